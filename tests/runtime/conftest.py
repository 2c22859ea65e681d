from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from runtime.trace import write_dat


@pytest.fixture
def make_trace(tmp_path):
    """Build a trace directory ``<root>/<config>/<name>/<name>.cfg`` with optional .dat files."""

    def make(name: str, lines: list[str], dats: dict[str, bytes] | None = None, config: str = "nv_small") -> Path:
        d = tmp_path / config / name
        d.mkdir(parents=True)
        for fname, data in (dats or {}).items():
            write_dat(d / fname, data)
        (d / f"{name}.cfg").write_text("\n".join(lines) + "\n")
        return d

    return make


def crc(data: bytes) -> int:
    return zlib.crc32(data)


PAYLOAD = bytes(range(7, 7 + 64))

#: A trace that needs no engine: data is loaded, an interrupt is raised by S_INTR_SET, the CRC checked.
def passing_lines(crc_value: int | None = None) -> list[str]:
    return [
        "// comment line",
        "mem_init(pri_mem, 0x80000000, 0x100, ALL_ZERO);",
        'mem_load(pri_mem, 0x80000000, "in.dat");',
        "reg_write(NVDLA_GLB.S_INTR_MASK_0, 0x3f03fc);",
        "reg_write(NVDLA_GLB.S_INTR_SET_0, 0x10);",
        "intr_notify(PDP_0, sync_id_0);",
        f"check_crc(sync_id_0, 1, 0x80000000, 0x100, {crc_value if crc_value is not None else crc(PAYLOAD + bytes(192)):#x});",
    ]
