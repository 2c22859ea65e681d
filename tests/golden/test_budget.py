"""The memory budget refuses declared sizes before anything is allocated."""
from __future__ import annotations

import pytest

from golden import budget
from golden.budget import MemoryBudgetError, check_size, format_size, max_memory, parse_size, set_max_memory


@pytest.mark.parametrize("text, value", [("512M", 512 << 20), ("8G", 8 << 30), ("1.5GiB", 3 << 29),
                                         ("100", 100), ("4kb", 4096)])
def test_sizes_parse(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0", "5X"])
def test_bad_sizes_are_value_errors(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_limit_order_override_then_env_then_machine(monkeypatch):
    monkeypatch.delenv("DLA_MAX_MEMORY", raising=False)
    assert max_memory() == budget.usable_memory() // 2 <= budget.physical_memory() // 2
    monkeypatch.setenv("DLA_MAX_MEMORY", "1G")
    assert max_memory() == 1 << 30
    set_max_memory(1 << 20)
    try:
        assert max_memory() == 1 << 20
    finally:
        set_max_memory(None)
    assert max_memory() == 1 << 30


def test_check_size_names_what_asked(monkeypatch):
    monkeypatch.setenv("DLA_MAX_MEMORY", "1M")
    assert check_size("x", 1 << 20) == 1 << 20
    with pytest.raises(MemoryBudgetError, match=r"mem_init size: 2 MiB exceeds the memory budget of 1 MiB"):
        check_size("mem_init size", 2 << 20)
    with pytest.raises(ValueError, match="negative"):
        check_size("y", -1)
    assert format_size(12) == "12 bytes"
    assert format_size(3 * 300000 * 300000 * 4) == "1,006 GiB" and format_size(1 << 40) == "1 TiB"


def test_default_follows_an_address_space_limit(monkeypatch):
    """Under ``ulimit -v 4G`` the default budget is 2 GiB, whatever the machine's RAM."""
    monkeypatch.delenv("DLA_MAX_MEMORY", raising=False)
    monkeypatch.setattr(budget.resource, "getrlimit", lambda which: (4 << 30, budget.resource.RLIM_INFINITY))
    assert max_memory() == min(budget.physical_memory(), 4 << 30) // 2
