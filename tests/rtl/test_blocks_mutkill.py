"""Small blocks of our RTL against their specifications, cycle by cycle, each alone under Icarus: the reset
synchronizer (asynchronous assertion, release on the second clock edge), the round-robin arbiter (the grant goes
to the first requester after the last winner, cyclically), the AXI burst length (min of the largest burst, the
beats left and the beats to the 4 KiB boundary) and the FIFO (a queue: first word falls through, full at
2**DEPTH_LOG2 entries, pushes when full and pops when empty ignored).

Written for the RTL mutation campaign (``make mutate TARGET=rtl``): the full-design benches exercise these
blocks only through the engines, where a slower arbiter rotation, a burst one beat shorter or a reset released a
cycle early changes timing but no data, and such mutants survived.
"""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog not installed")

RTL = Path(__file__).resolve().parents[2] / "rtl"


def simulate(tmp_path: Path, tb: str, *modules: str, vectors: list[str] | None = None) -> list[str]:
    """Build ``tb`` (top module ``tb``) with rtl/<module>.v under Icarus and run it; its output lines."""
    (tmp_path / "tb.v").write_text(tb)
    if vectors is not None:
        (tmp_path / "vectors.hex").write_text("\n".join(vectors) + "\n")
    vvp = tmp_path / "tb.vvp"
    build = subprocess.run(["iverilog", "-g2005", "-s", "tb", "-o", str(vvp), str(tmp_path / "tb.v"),
                            *(str(RTL / f"{m}.v") for m in modules)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["vvp", "-n", str(vvp)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return [ln for ln in run.stdout.splitlines() if ln and not ln.startswith(("VCD", "WARNING"))]


RESET_TB = """
module tb;
  reg clk = 0, arst_n = 0;
  wire rst_n;
  dla_reset_sync u (.clk(clk), .arst_n(arst_n), .rst_n(rst_n));
  always #5 clk = ~clk;
  initial begin
    #1 $display("in reset %b", rst_n);
    repeat (2) @(posedge clk);
    #2 arst_n = 1;
    repeat (4) begin @(posedge clk); #1 $display("edge %b", rst_n); end
    #2 arst_n = 0;
    #1 $display("asserted %b", rst_n);
    @(posedge clk); #1 $display("held %b", rst_n);
    #2 arst_n = 1;
    repeat (3) begin @(posedge clk); #1 $display("edge %b", rst_n); end
    $finish;
  end
endmodule
"""


def test_reset_is_asserted_at_once_and_released_on_the_second_edge(tmp_path: Path) -> None:
    assert simulate(tmp_path, RESET_TB, "dla_reset_sync") == [
        "in reset 0", "edge 0", "edge 1", "edge 1", "edge 1", "asserted 0", "held 0", "edge 0", "edge 1", "edge 1"]


ARB_TB = """
module tb;
  localparam N = {n};
  reg clk = 0, rstn = 0;
  reg [N:0] mem [0:{cycles}-1];
  reg [N-1:0] req = 0;
  reg advance = 0;
  wire [N-1:0] grant;
  integer i;
  dla_rr_arb #(.N(N)) u (.clk(clk), .rstn(rstn), .req(req), .advance(advance), .grant(grant));
  always #5 clk = ~clk;
  initial begin
    $readmemh("vectors.hex", mem);
    #12 rstn = 1;
    for (i = 0; i < {cycles}; i = i + 1) begin
      @(negedge clk);
      {{advance, req}} = mem[i];
      #1 $display("%0d", grant);
    end
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize("n", [2, 3, 5])
def test_round_robin_grants_the_next_requester_after_the_last_winner(tmp_path: Path, n: int) -> None:
    rng = random.Random(n)
    last, expected, vectors = -1, [], []
    for _ in range(300):
        req = rng.getrandbits(n) if rng.random() < 0.8 else (1 << rng.randrange(n))
        order = [(last + 1 + k) % n for k in range(n)]
        winner = next((i for i in order if req >> i & 1), None)
        advance = winner is not None and rng.random() < 0.7
        expected.append(str(0 if winner is None else 1 << winner))
        vectors.append(format(int(advance) << n | req, "x"))
        if advance:
            last = winner
    out = simulate(tmp_path, ARB_TB.format(n=n, cycles=len(vectors)), "dla_rr_arb", vectors=vectors)
    assert out == expected


BURST_TB = """
module tb;
  reg [11:0] page_addr;
  reg [16:0] left;
  wire [4:0] beats;
  reg [28:0] mem [0:{count}-1];
  integer i;
  dla_burst_len #(.LENW(16), .MAX_BURST({max_burst}), .BYTES_LOG2({bytes_log2})) u (
      .page_addr(page_addr), .left(left), .beats(beats));
  initial begin
    $readmemh("vectors.hex", mem);
    for (i = 0; i < {count}; i = i + 1) begin
      {{page_addr, left}} = mem[i];
      #1 $display("%0d", beats);
    end
  end
endmodule
"""


@pytest.mark.parametrize("max_burst,bytes_log2", [(1, 3), (4, 4), (16, 3), (16, 6), (8, 5)])
def test_burst_is_the_largest_allowed_short_of_the_4k_boundary(tmp_path: Path, max_burst: int,
                                                                bytes_log2: int) -> None:
    rng = random.Random(max_burst * 64 + bytes_log2)
    beat = 1 << bytes_log2
    vectors, expected = [], []
    page_ends = [4096 - k * beat for k in range(1, 20)]
    for _ in range(400):
        addr = rng.choice([rng.randrange(0, 4096 // beat) * beat, rng.choice(page_ends)])
        left = rng.choice([1, 2, max_burst - 1 or 1, max_burst, max_burst + 1, rng.randrange(1, 1 << 16),
                           (1 << 16)])
        vectors.append(format(addr << 17 | left, "x"))
        expected.append(str(min(max_burst, left, (4096 - addr) >> bytes_log2)))
    out = simulate(tmp_path, BURST_TB.format(count=len(vectors), max_burst=max_burst, bytes_log2=bytes_log2),
                   "dla_burst_len", vectors=vectors)
    assert out == expected


FIFO_TB = """
module tb;
  reg clk = 0, rstn = 0;
  reg push = 0, pop = 0;
  reg [7:0] push_data = 0;
  wire [7:0] head;
  wire empty, full;
  reg [9:0] mem [0:{cycles}-1];
  integer i;
  dla_fifo #(.WIDTH(8), .DEPTH_LOG2({depth_log2})) u (
      .clk(clk), .rstn(rstn), .push(push), .push_data(push_data), .pop(pop), .head(head), .empty(empty),
      .full(full));
  always #5 clk = ~clk;
  initial begin
    $readmemh("vectors.hex", mem);
    #12 rstn = 1;
    for (i = 0; i < {cycles}; i = i + 1) begin
      @(negedge clk);
      {{push, pop, push_data}} = mem[i];
      #1 $display("%0d %0d %0d", empty, full, empty ? 0 : head);
    end
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize("depth_log2", [1, 2, 3])
def test_fifo_is_a_queue_of_its_depth(tmp_path: Path, depth_log2: int) -> None:
    rng = random.Random(depth_log2)
    depth, queue, vectors, expected = 1 << depth_log2, [], [], []
    for k in range(400):
        fill = (k // 40) % 2 == 0  # phases that fill it up and drain it
        push, pop = rng.random() < (0.8 if fill else 0.3), rng.random() < (0.3 if fill else 0.8)
        data = rng.getrandbits(8)
        vectors.append(format(int(push) << 9 | int(pop) << 8 | data, "x"))
        expected.append(f"{int(not queue)} {int(len(queue) == depth)} {queue[0] if queue else 0}")
        popped = pop and len(queue) > 0  # (before this cycle's push)
        if push and len(queue) < depth:
            queue.append(data)
        if popped:
            queue.pop(0)
    out = simulate(tmp_path, FIFO_TB.format(cycles=len(vectors), depth_log2=depth_log2), "dla_fifo",
                   vectors=vectors)
    assert out == expected
