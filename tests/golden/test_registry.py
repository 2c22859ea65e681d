"""golden.registry: the one name -> entry table behind engines, float kernels, shape functions, frontends and
the compiler's op table."""
from __future__ import annotations

import pytest

from golden.registry import DuplicateNameError, Registry, UnknownNameError


def test_register_under_several_names_reads_like_a_dict() -> None:
    table: Registry[int] = Registry("widget")

    @table.register("a", "b")
    def f() -> int:
        return 1

    assert table["a"] is f and table["b"] is f
    assert "a" in table and "c" not in table
    assert table.get("c") is None and sorted(table) == ["a", "b"] and len(table) == 2


def test_duplicate_registration_is_one_line_naming_the_table() -> None:
    table: Registry[int] = Registry("float kernel")
    table.add("Conv", 1)
    with pytest.raises(DuplicateNameError) as e:
        table.register("Relu", "Conv")(2)
    assert str(e.value) == "float kernel 'Conv' registered twice"
    assert isinstance(e.value, ValueError)


def test_unknown_name_lists_the_known_ones() -> None:
    table: Registry[int] = Registry("IR op")
    table.add("Relu", 1)
    table.add("Conv", 2)
    with pytest.raises(UnknownNameError) as e:
        table["Resize"]
    assert str(e.value) == "unknown IR op 'Resize' (known: Conv, Relu)"
    assert isinstance(e.value, KeyError)
