// Reset synchronizer: asynchronous assertion, deassertion synchronized to clk (two flops).
module dla_reset_sync (
    input  wire clk,
    input  wire arst_n,  // asynchronous, active low
    output wire rst_n    // active low, released on a clk edge
);

// Waiver SYNCASYNCNET: this is the reset synchronizer itself; its output flop is (by design) both
// clocked here and the asynchronous reset of everything else.
/* verilator lint_off SYNCASYNCNET */
reg [1:0] sync;
/* verilator lint_on SYNCASYNCNET */

always @(posedge clk or negedge arst_n) begin
    if (!arst_n) sync <= 2'b00;
    else         sync <= {sync[0], 1'b1};
end

assign rst_n = sync[1];

endmodule
