"""Unbounded polls: register reads that never match, under poll budgets from absurd to invalid, and
interrupts that never come. The promise: an ERROR naming the register and file:line within a bounded
time (the poll cap, the per-trace timeout), never a hang."""
from __future__ import annotations

from pathlib import Path

from regressions.robustness.attack import Attack, Scenario
from regressions.robustness.attacks.common import pdp_trace, sub, trace_cfg, txn_trace
from regressions.robustness.material import Material

FAMILY = "unbounded polls"
READ = "read_reg 0xffff1008 0xffffffe0 0x00000100"
NEVER = "read_reg 0xffff1008 0xffffffe0 0x00000200"  # CFG_DST_LINE was written 0x100: never reads back 0x200


def _poll(name: str, plusargs: str, never: bool = True, exits: frozenset[int] = frozenset({1, 2}),
          more: tuple[str, ...] = (), env: dict | None = None, names: tuple[str, ...] = (),
          quick: bool = False) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = txn_trace(workdir, material, (lambda t: t.replace(READ, NEVER)) if never else None, plusargs)
        return Scenario(["trace", str(rel), "--json", "r.json", *more], names=names, fail_names=("s:", *names),
                        reports=(Path("r.json"),), env=env or {})
    return Attack(f"input.txn: {name}", FAMILY, setup, exits, quick=quick)


def _cfg_poll(name: str, edit, names: tuple[str, ...] = ("t:",), more: tuple[str, ...] = ()) -> Attack:
    def setup(workdir: Path, material: Material) -> Scenario:
        rel = pdp_trace(workdir, material, edit)
        return Scenario(["trace", str(rel), "--json", "r.json", *more], names=(trace_cfg(rel),), fail_names=names,
                        reports=(Path("r.json"),))
    return Attack(f".cfg: {name}", FAMILY, setup, frozenset({1, 2}))


def _no_launch(text: str) -> str:
    return (text.replace("reg_write(NVDLA_PDP.D_OP_ENABLE_0, 0x1);\n", "")
            .replace("reg_write(NVDLA_PDP_RDMA.D_OP_ENABLE_0, 0x1);\n", ""))


def attacks() -> list[Attack]:
    intr = "intr_notify(PDP_0, sync_id_0);"
    return [
        _poll("+read_reg_poll_retries=10^12 and a read that never matches", "+read_reg_poll_retries=1000000000000",
              names=("read_reg_poll_retries",)),
        _poll("+read_reg_poll_retries=10^12, reads that match", "+read_reg_poll_retries=1000000000000", never=False,
              exits=frozenset({0, 2}), names=("read_reg_poll_retries",)),
        _poll("+read_reg_poll_retries=10^6 (the cap) and a read that never matches", "+read_reg_poll_retries=1000000",
              names=("CFG_DST_LINE",)),
        _poll("10^6 polls that never match under --timeout 1", "+read_reg_poll_retries=1000000", more=("--timeout", "1")),
        _poll("10^6 polls that never match under DLA_TRACE_TIMEOUT=1", "+read_reg_poll_retries=1000000",
              env={"DLA_TRACE_TIMEOUT": "1"}),
        _poll("+read_reg_poll_retries=-1", "+read_reg_poll_retries=-1", exits=frozenset({2}),
              names=("read_reg_poll_retries",)),
        _poll("+read_reg_poll_retries=abc", "+read_reg_poll_retries=abc", exits=frozenset({2}), quick=True,
              names=("read_reg_poll_retries",)),
        _poll("+read_reg_poll_retries=1e3", "+read_reg_poll_retries=1e3", exits=frozenset({2}),
              names=("read_reg_poll_retries",)),
        _poll("+read_reg_poll_retries=2^64", f"+read_reg_poll_retries={1 << 64}",
              names=("read_reg_poll_retries",)),
        _cfg_poll("poll_reg_equal that never matches", sub(intr, "poll_reg_equal(NVDLA_PDP.S_STATUS_0, 0x5);\n" + intr),
                  names=("t:", "S_STATUS")),
        _cfg_poll("interrupt of an engine never launched", _no_launch),
        _cfg_poll("interrupt of an engine never launched under --timeout 1", _no_launch, more=("--timeout", "1")),
    ]
