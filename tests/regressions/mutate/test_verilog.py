"""The Verilog mutator (``regressions.mutate.verilog``) on a tiny module: which sites it finds (never in
declarations, widths, the reset branch, dead conditional code; ``<=`` of a nonblocking assignment is not a
comparison), that a mutant changes only its line, and that mutant schemata behave exactly like the plain mutants
under Icarus (and Verilator): ``+mut=0`` is the original, ``+mut=K`` is mutant K, and a known mutant is killed by
a checking testbench."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from regressions.mutate import verilog
from regressions.mutate.campaign import Result
from regressions.mutate.mutants import Mutant

DUT = """\
// a comment with a + b and if (x) in it
`define ONE 1'b1
module acc #(parameter W = 8) (
  input clk, input rstn, input en,
  input [W-1:0] a, input [W-1:0] b,
  output reg [W:0] sum,
  output gt
);
  reg [3:0] count;
  wire [3:0] next = count + `ONE;
  assign gt = (a > b) & en;
`ifdef NEVER_DEFINED
  assign dead = a - b;
`endif
  always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
      sum <= {W+1{1'b0}};
      count <= 4'd0;
    end else if (en) begin
      sum <= a + b;
      count <= next;
    end else begin
      sum <= sum <= 9'd3;  // the second <= compares
    end
  end
endmodule
"""

TB = """\
module tb;
  reg clk = 0, rstn = 0, en = 0;
  reg [7:0] a = 0, b = 0;
  wire [8:0] sum;
  wire gt;
  integer i;
  reg [31:0] lfsr = 32'h1;
  acc u (.clk(clk), .rstn(rstn), .en(en), .a(a), .b(b), .sum(sum), .gt(gt));
  always #5 clk = ~clk;
  initial begin
    #12 rstn = 1;
    for (i = 0; i < 40; i = i + 1) begin
      @(negedge clk);
      lfsr = {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};
      a = lfsr[7:0]; b = lfsr[15:8]; en = lfsr[16] | lfsr[17];
      $display("%0d %0d %0d %0d", i, sum, gt, u.count);
    end
    $finish;
  end
endmodule
"""


@pytest.fixture
def design(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "acc.v").write_text(DUT)
    return root


def sites(root: Path) -> list[Mutant]:
    return verilog.enumerate_mutants(root, ["acc.v"])


def line_of(text: str) -> int:
    return next(i for i, ln in enumerate(DUT.splitlines(), 1) if text in ln)


def test_sites_skip_declarations_reset_branches_and_dead_code(design: Path) -> None:
    by_line: dict[int, set[str]] = {}
    for m in sites(design):
        by_line.setdefault(m.line, set()).add(m.operator)
    assert set(by_line) - {line_of("reg [3:0] count;"), line_of("output reg [W:0] sum")} == {
        line_of("wire [3:0] next"), line_of("assign gt"), line_of("end else if (en)"), line_of("sum <= a + b"),
        line_of("sum <= sum <= 9'd3"), line_of("assign dead")}
    # comments, `define, the module header and ports and the reset branch have none; a project that is neither
    # NVDLA's tree nor ours keeps every conditional branch (test_conditionals_follow_the_defines)
    assert by_line[line_of("sum <= a + b")] == {"Add_Sub"}  # the nonblocking <= is not a comparison
    assert by_line[line_of("sum <= sum <= 9'd3")] == {"LtE_Lt", "Const_Inc", "Const_Dec"}
    assert by_line[line_of("assign gt")] == {"Gt_GtE", "BitAnd_BitOr"}
    assert by_line[line_of("wire [3:0] next")] == {"Add_Sub"}  # a macro operand; the width [3:0] is not mutated
    assert by_line[line_of("end else if (en)")] == {"Invert_If"}
    # stuck bits: lsb and msb of both registers, at 0 and 1
    stuck = [m for m in sites(design) if m.operator in verilog.STUCK]
    assert len(stuck) == 8 and {m.line for m in stuck} == {line_of("output reg [W:0] sum"), line_of("reg [3:0] count;")}


def test_conditionals_follow_the_defines(tmp_path: Path) -> None:
    """NVDLA's tree (a file list with -D beside vmod/): a false `ifdef and one no-one can decide (a macro some
    other file defines) hold no mutants; the true branch does."""
    root = tmp_path / "nv"
    (root / "vmod" / "nvdla" / "pdp").mkdir(parents=True)
    (root / "vmod" / "include").mkdir()
    (root / "nv_small.f").write_text("-DSYNTHESIS\n")
    (root / "vmod" / "other.v").write_text("`define MAYBE\n")
    (root / "vmod" / "nvdla" / "pdp" / "m.v").write_text(
        "module m(input [3:0] a, output [3:0] x, y, z);\n"
        "`ifdef SYNTHESIS\nassign x = a + 4'd1;\n`else\nassign x = a - 4'd1;\n`endif\n"
        "`ifdef MAYBE\nassign y = a & 4'd2;\n`endif\n"
        "`ifndef SYNTHESIS\nassign z = a | 4'd3;\n`else\nassign z = a ^ 4'd3;\n`endif\nendmodule\n")
    verilog._CONFIGS.clear()
    lines = {m.line for m in verilog.enumerate_mutants(root, ["vmod/nvdla/pdp/m.v"])}
    assert lines == {3, 13}
    assert verilog.unit_of("vmod/nvdla/pdp/m.v") == "pdp" and verilog.unit_of("rtl/engines/dla_pdp.v") == "dla_pdp"


def test_a_mutant_changes_only_its_site(design: Path) -> None:
    for m in sites(design):
        text = verilog.mutated_source(design, m)
        assert text is not None and text != DUT
        assert len(text.splitlines()) == len(DUT.splitlines())
        changed = [i for i, (x, y) in enumerate(zip(DUT.splitlines(), text.splitlines()), 1) if x != y]
        if m.operator in verilog.STUCK:  # every nonblocking assignment of the register gets the stuck bit
            assert changed and all("<=" in DUT.splitlines()[i - 1] for i in changed)
        else:
            assert changed == [m.line], m.id
    (add,) = [m for m in sites(design) if m.line == line_of("sum <= a + b")]
    assert "sum <= (a - b);" in verilog.mutated_source(design, add)
    assert verilog.describe(design, add) == ("sum <= a + b;", "sum <= (a - b);")


def _icarus(work: Path, dut_text: str, name: str) -> Path:
    (work / f"{name}.v").write_text(dut_text)
    (work / "tb.v").write_text(TB)
    vvp = work / f"{name}.vvp"
    subprocess.run(["iverilog", "-g2005", "-s", "tb", "-o", str(vvp), str(work / "tb.v"), str(work / f"{name}.v")],
                   check=True, capture_output=True, text=True)
    return vvp


def _run(vvp: Path, *plusargs: str) -> str:
    return subprocess.run(["vvp", "-n", str(vvp), *plusargs], check=True, capture_output=True, text=True).stdout


def _icarus_outputs(work: Path, dut_text: str, plusargs: list[str]) -> str:
    return _run(_icarus(work, dut_text, "plain"), *plusargs)


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")
def test_schemata_are_the_plain_mutants_under_icarus(design: Path, tmp_path: Path) -> None:
    ms = sites(design)
    chosen = {m: k for k, m in enumerate(ms, start=1)}
    schemata = verilog.schemata(design, "acc.v", chosen)
    assert len(schemata.splitlines()) == len(DUT.splitlines())
    work = tmp_path / "w"
    work.mkdir()
    original = _icarus_outputs(work, DUT, [])
    vvp = _icarus(work, schemata, "schemata")
    assert _run(vvp) == original  # no plusarg: mut_id 0
    assert _run(vvp, "+mut=0") == original
    killed = set()
    for m, k in chosen.items():
        plain = _icarus_outputs(work, verilog.mutated_source(design, m), [])
        assert _run(vvp, f"+mut={k}") == plain, m.id
        if plain != original:
            killed.add(m.operator)
    assert {"Add_Sub", "BitAnd_BitOr", "Invert_If", "Stuck1_Lsb", "Stuck0_Msb"} <= killed


def test_schemata_build_and_select_under_verilator(design: Path, tmp_path: Path) -> None:
    from tb.vectors.sim import VERILATOR_MAKEFLAGS, verilator_env

    env = verilator_env()
    if env is None or shutil.which("iverilog") is None:
        pytest.skip("verilator or iverilog not installed")
    ms = sites(design)
    chosen = {m: k for k, m in enumerate(ms, start=1)}
    (tmp_path / "acc.v").write_text(verilog.schemata(design, "acc.v", chosen))
    (tmp_path / "tb.v").write_text(TB)
    proc = subprocess.run(["verilator", "--binary", "--timing", "-j", "2", "-MAKEFLAGS", VERILATOR_MAKEFLAGS,
                           "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "tb", "--Mdir",
                           str(tmp_path / "obj"), "-o", "sim", "tb.v", "acc.v"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]

    def run(*plusargs: str) -> str:
        out = subprocess.run([str(tmp_path / "obj" / "sim"), *plusargs], capture_output=True, text=True, env=env)
        return "\n".join(ln for ln in out.stdout.splitlines() if ln[:1].isdigit())

    work = tmp_path / "icarus"
    work.mkdir()
    original = "\n".join(ln for ln in _icarus_outputs(work, DUT, []).splitlines() if ln[:1].isdigit())
    assert run("+mut=0") == original
    (add,) = [m for m in ms if m.line == line_of("sum <= a + b")]
    plain = "\n".join(ln for ln in _icarus_outputs(work, verilog.mutated_source(design, add), []).splitlines()
                      if ln[:1].isdigit())
    assert run(f"+mut={chosen[add]}") == plain != original


def test_report_counts_suite_kills_the_traces_miss(tmp_path: Path, monkeypatch) -> None:
    from regressions.mutate import report

    root = tmp_path / "proj"
    root.mkdir()
    (root / "acc.v").write_text(DUT)
    ms = sites(root)[:4]

    def res(m: Mutant, outcome: str, traces, suite) -> Result:
        return Result(m.id, m.path, "acc", m.operator, m.line, outcome, 1.0, 1, "", "h",
                      killed_by_traces=traces, killed_by_suite=suite)

    results = {ms[0].id: res(ms[0], "killed", True, None), ms[1].id: res(ms[1], "killed", False, True),
               ms[2].id: res(ms[2], "survived", False, False), ms[3].id: res(ms[3], "invalid", None, None)}
    monkeypatch.setattr(report, "TRIAGE", tmp_path / "triage")
    s = report.write_report(root, "toy-rtl", ms, results, tmp_path)
    assert (s["killed"], s["survived"], s["killed_by_traces"], s["suite_not_traces"]) == (2, 1, 1, 1)
    md = (tmp_path / "report.md").read_text()
    assert "Killed by our suite but not by the traces alone: 1" in md and "| acc | 4 | 2 | 1 | 0 | 66.7% | 1 | 1 |" in md
