// Rounding right shift of the NVDLA datapath (golden.arith.rha): v / 2**s rounded to nearest, ties
// away from zero, for a signed W-bit v and s = 0..63: sign * (((|v| >> (s-1)) + 1) >> 1).
// Combinational; the result is W+1 bits signed (|v| of the most negative v needs the extra bit
// only when s = 0, where r = v).
module dla_sdp_rha #(
    parameter W = 49
) (
    input  wire [W-1:0] v,
    input  wire [5:0]   s,
    output wire [W:0]   r
);

wire         neg  = v[W-1];
wire [W-1:0] mag  = neg ? (~v + {{(W-1){1'b0}}, 1'b1}) : v;   // |v| as unsigned
wire [W-1:0] part = mag >> (s - 6'd1);
wire [W:0]   half = ({1'b0, part} + {{W{1'b0}}, 1'b1}) >> 1;
wire [W:0]   rnd  = neg ? (~half + {{W{1'b0}}, 1'b1}) : half;
assign r = (s == 6'd0) ? {v[W-1], v} : rnd;

endmodule
