// Beats of the next AXI burst: min(MAX_BURST, beats left, beats to the next 4 KiB boundary).
// AXI4 forbids a burst crossing 4 KiB; addresses are aligned to the bus width (2**BYTES_LOG2 bytes).
module dla_burst_len #(
    parameter LENW       = 16,  // left is LENW+1 bits (a request is up to 2**LENW beats)
    parameter MAX_BURST  = 1,   // 1..16 (AXI4 len is 4 bits here)
    parameter BYTES_LOG2 = 3
) (
    input  wire [11:0]   page_addr,  // address bits [11:0]
    input  wire [LENW:0] left,       // beats still to cover (> 0)
    output wire [4:0]    beats       // 1..MAX_BURST
);

localparam [LENW:0] MAXB = MAX_BURST;

wire [12:0]   to_page_end = 13'h1000 - {1'b0, page_addr};
wire [12:0]   page_beats  = to_page_end >> BYTES_LOG2;
wire [LENW:0] page_beats_w = {{(LENW-12){1'b0}}, page_beats};
wire [LENW:0] cap   = (page_beats_w < MAXB) ? page_beats_w : MAXB;
wire [LENW:0] burst = (left < cap) ? left : cap;

assign beats = burst[4:0];

// burst[LENW:5] is always 0 (burst <= MAX_BURST <= 16)
wire unused_burst_high = &{1'b0, burst[LENW:5]};

endmodule
