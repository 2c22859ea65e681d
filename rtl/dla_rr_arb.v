// Round-robin arbiter: one-hot grant among requesters; the priority moves past the winner when the
// grant is taken (advance). Combinational grant, registered priority.
module dla_rr_arb #(
    parameter N = 2
) (
    input  wire         clk,
    input  wire         rstn,
    input  wire [N-1:0] req,
    input  wire         advance,  // the granted request was accepted this cycle
    output wire [N-1:0] grant
);

localparam [N-1:0] ONE = 1;

reg  [N-1:0] allow;  // requesters at or after the priority pointer
wire [N-1:0] masked  = req & allow;
wire [N-1:0] pick    = (|masked) ? masked : req;
assign grant = pick & (~pick + ONE);  // lowest set bit

always @(posedge clk or negedge rstn) begin
    if (!rstn) allow <= {N{1'b1}};
    else if (advance) allow <= ~((grant << 1) - ONE) & ~grant;
end

endmodule
