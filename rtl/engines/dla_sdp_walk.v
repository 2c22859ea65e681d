// Walks the contiguous byte segments of a cube in memory: `surfs` surfaces of `lines` lines of
// `line_bytes` bytes, line l of surface s at base + s*surf_stride + l*line_stride, in that order
// (surface-major, as SDP streams its atoms). Contiguous neighbours are merged: lines when
// line_stride == line_bytes (or one line), then surfaces when a surface is one segment and
// surf_stride equals its length, so a packed cube is a single segment.
// `start` (re)loads the configuration (which must then stay stable); `valid`/`addr`/`len` give the
// current segment, `next` moves on; after the last segment `valid` falls.
module dla_sdp_walk #(
    parameter AW = 32,
    parameter LW = 48
) (
    input  wire          clk,
    input  wire          rstn,
    input  wire          start,
    input  wire [AW-1:0] base,
    input  wire [31:0]   line_stride,
    input  wire [31:0]   surf_stride,
    input  wire [13:0]   lines,        // >= 1
    input  wire [13:0]   surfs,        // >= 1
    input  wire [LW-1:0] line_bytes,   // >= 1
    input  wire          next,
    output reg           valid,
    output wire [AW-1:0] addr,
    output wire [LW-1:0] len
);

localparam [13:0] ONE14 = 14'd1;

// ---- merging (configuration only) ----
wire          m_lines = (lines == ONE14) || ({{(LW-32){1'b0}}, line_stride} == line_bytes);
wire [LW-1:0] len1    = m_lines ? ({{(LW-14){1'b0}}, lines} * line_bytes) : line_bytes;
wire [13:0]   lines1  = m_lines ? ONE14 : lines;
wire          m_surfs = (lines1 == ONE14) && ((surfs == ONE14) || ({{(LW-32){1'b0}}, surf_stride} == len1));
wire [LW-1:0] len2    = m_surfs ? ({{(LW-14){1'b0}}, surfs} * len1) : len1;
wire [13:0]   surfs2  = m_surfs ? ONE14 : surfs;

reg [LW-1:0] r_len;
reg [13:0]   r_lines, r_surfs, h, s;
reg [AW-1:0] cur, srf;

assign addr = cur;
assign len  = r_len;

wire [AW-1:0] ls, ss;
generate
    if (AW > 32) begin : g_wide
        assign ls = {{(AW-32){1'b0}}, line_stride};
        assign ss = {{(AW-32){1'b0}}, surf_stride};
    end else begin : g_narrow
        assign ls = line_stride[AW-1:0];
        assign ss = surf_stride[AW-1:0];
    end
endgenerate

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        valid   <= 1'b0;
        r_len   <= {LW{1'b0}};
        r_lines <= 14'd0;
        r_surfs <= 14'd0;
        h       <= 14'd0;
        s       <= 14'd0;
        cur     <= {AW{1'b0}};
        srf     <= {AW{1'b0}};
    end else if (start) begin
        valid   <= 1'b1;
        r_len   <= len2;
        r_lines <= lines1;
        r_surfs <= surfs2;
        h       <= 14'd0;
        s       <= 14'd0;
        cur     <= base;
        srf     <= base;
    end else if (next && valid) begin
        if (h + ONE14 < r_lines) begin
            h   <= h + ONE14;
            cur <= cur + ls;
        end else if (s + ONE14 < r_surfs) begin
            s   <= s + ONE14;
            h   <= 14'd0;
            srf <= srf + ss;
            cur <= srf + ss;
        end else begin
            valid <= 1'b0;
        end
    end
end

endmodule
