"""golden.crc: the CRC-32 of zero runs that ``Memory.crc32`` (NVDLA's ``check_crc``) uses for unwritten
memory. Its values against zlib are in test_budget_memory.py; this file pins its argument checking."""
from __future__ import annotations

import pytest

from golden.crc import crc32_zeros
from runtime.deadline import wall_clock


@pytest.mark.parametrize("nbytes", [-1, -2, -(1 << 40)])
def test_a_negative_length_is_refused(nbytes: int) -> None:
    """A CRC over a negative number of bytes (an underflowed size) is a caller's error and must be refused:
    the square-and-multiply loop would never end on -1, whose right shift stays -1."""
    # the wall clock turns a hang into a failure (its DeadlineExceeded is no ValueError); it never fires otherwise
    with pytest.raises(ValueError, match="negative length"), wall_clock(10.0, "crc32_zeros"):
        crc32_zeros(0, nbytes)


def test_zero_bytes_leave_the_crc_unchanged() -> None:
    """An empty run is the identity, the boundary just above the refused lengths (zlib.crc32(b"", c) == c)."""
    assert crc32_zeros(0, 0) == 0
    assert crc32_zeros(0xDEADBEEF, 0) == 0xDEADBEEF
