"""golden.intr: the done bits come from GLB.S_INTR_STATUS and agree with what the engines declare."""
from __future__ import annotations

from golden.engines import load_engines
from golden.intr import DONE_BITS, INTR_SOURCES, SOURCE_UNIT, done_bit, unit_done_bits
from golden.regs import UNITS

STATUS = UNITS["GLB"].register("S_INTR_STATUS")


def test_every_source_has_a_group_pair_in_the_status_register() -> None:
    for source, bit in DONE_BITS.items():
        assert STATUS.field(f"{source}_DONE_STATUS0").lsb == bit == done_bit(source)
        assert STATUS.field(f"{source}_DONE_STATUS1").lsb == bit + 1


def test_sources_map_to_register_units() -> None:
    assert set(SOURCE_UNIT.values()) <= set(UNITS)
    assert INTR_SOURCES[DONE_BITS["RUBIK"]] == ("RUBIK", "RBK")
    assert unit_done_bits("CDMA", "CACC") == (("CDMA", 16), ("CDMA", 18), ("CACC", 20))


def test_engines_declare_the_register_tables_bits() -> None:
    for engine in load_engines().values():
        for unit, bit in engine.done_bits:
            assert INTR_SOURCES[bit][1] == unit, engine.name
