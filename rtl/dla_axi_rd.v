// AXI4 read DMA shared by the engines' read clients (rtl/README.md, "DMA").
// Client protocol (valid/ready on both sides):
//   request : req_valid/req_ready, req_addr (byte address, aligned to the bus width; low bits are
//             ignored), req_len = beats - 1;
//   response: rsp_valid/rsp_ready per client, rsp_data/rsp_last shared (rsp_last on the request's
//             final beat). Beats come back in request order.
// Rule for clients: issue a request only when you can take all its beats without waiting for any
// other DMA traffic (responses of all clients share one in-order AXI ID, so a client that stalls its
// responses stalls everyone behind it).
// Requests are arbitrated round-robin, split into bursts of dla_burst_len beats and issued on AR
// back to back; up to 2**OUTST_LOG2 bursts are in flight. One AXI ID (AXI_ID) for everything.
module dla_axi_rd #(
    parameter CLIENTS    = 1,
    parameter AW         = 32,
    parameter DW         = 64,
    parameter LENW       = 16,
    parameter MAX_BURST  = 1,
    parameter OUTST_LOG2 = 4,
    parameter BYTES_LOG2 = 3,
    parameter AXI_ID     = 0
) (
    input  wire                     clk,
    input  wire                     rstn,
    // clients
    input  wire [CLIENTS-1:0]       req_valid,
    output wire [CLIENTS-1:0]       req_ready,
    input  wire [CLIENTS*AW-1:0]    req_addr,
    input  wire [CLIENTS*LENW-1:0]  req_len,
    output wire [CLIENTS-1:0]       rsp_valid,
    input  wire [CLIENTS-1:0]       rsp_ready,
    output wire [DW-1:0]            rsp_data,
    output wire                     rsp_last,
    // AXI4 AR / R
    output wire                     arvalid,
    input  wire                     arready,
    output wire [7:0]               arid,
    output wire [3:0]               arlen,
    output wire [AW-1:0]            araddr,
    input  wire                     rvalid,
    output wire                     rready,
    input  wire [7:0]               rid,
    input  wire                     rlast,
    input  wire [DW-1:0]            rdata
);

localparam CW = (CLIENTS > 1) ? $clog2(CLIENTS) : 1;
localparam [CLIENTS-1:0] ONE = 1;

// ---- arbitration ----
wire [CLIENTS-1:0] grant;
reg                cur_valid;
wire               accept = ~cur_valid & (|req_valid);

dla_rr_arb #(.N(CLIENTS)) u_arb (
    .clk(clk), .rstn(rstn), .req(req_valid), .advance(accept), .grant(grant)
);

assign req_ready = cur_valid ? {CLIENTS{1'b0}} : grant;

reg [AW-1:0]   sel_addr;
reg [LENW-1:0] sel_len;
reg [CW-1:0]   sel_client;
integer i;
always @(*) begin
    sel_addr   = {AW{1'b0}};
    sel_len    = {LENW{1'b0}};
    sel_client = {CW{1'b0}};
    for (i = 0; i < CLIENTS; i = i + 1) begin
        if (grant[i]) begin
            sel_addr   = req_addr[i*AW +: AW];
            sel_len    = req_len[i*LENW +: LENW];
            sel_client = i[CW-1:0];
        end
    end
end

// requests are aligned to the bus width: the low address bits are dropped
wire unused_sel_addr_low = &{1'b0, sel_addr[BYTES_LOG2-1:0]};

// ---- AR: split the current request into bursts ----
reg [CW-1:0]   cur_client;
reg [AW-1:0]   cur_addr;
reg [LENW:0]   cur_left;
wire [4:0]     burst;
wire           track_full;
wire           ar_hs = arvalid & arready;
wire           last_burst = (cur_left == {{(LENW-4){1'b0}}, burst});

dla_burst_len #(.LENW(LENW), .MAX_BURST(MAX_BURST), .BYTES_LOG2(BYTES_LOG2)) u_burst (
    .page_addr(cur_addr[11:0]), .left(cur_left), .beats(burst)
);

assign arvalid = cur_valid & ~track_full;
assign arid    = AXI_ID;
assign arlen   = burst[3:0] - 4'd1;
assign araddr  = cur_addr;

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        cur_valid  <= 1'b0;
        cur_client <= {CW{1'b0}};
        cur_addr   <= {AW{1'b0}};
        cur_left   <= {(LENW+1){1'b0}};
    end else if (accept) begin
        cur_valid  <= 1'b1;
        cur_client <= sel_client;
        cur_addr   <= {sel_addr[AW-1:BYTES_LOG2], {BYTES_LOG2{1'b0}}};
        cur_left   <= {1'b0, sel_len} + 1'b1;
    end else if (ar_hs) begin
        cur_addr <= cur_addr + ({{(AW-5){1'b0}}, burst} << BYTES_LOG2);
        cur_left <= cur_left - {{(LENW-4){1'b0}}, burst};
        if (last_burst) cur_valid <= 1'b0;
    end
end

// ---- R: route beats to the client of the oldest burst ----
wire [CW:0] head;
wire        track_empty;
wire [CW-1:0] head_client = head[CW:1];
wire          head_last   = head[0];

dla_fifo #(.WIDTH(CW + 1), .DEPTH_LOG2(OUTST_LOG2)) u_track (
    .clk(clk), .rstn(rstn),
    .push(ar_hs), .push_data({cur_client, last_burst}),
    .pop(rvalid & rready & rlast),
    .head(head), .empty(track_empty), .full(track_full)
);

wire [CLIENTS-1:0] head_onehot = ONE << head_client;

assign rready    = ~track_empty & |(rsp_ready & head_onehot);
assign rsp_valid = (rvalid & ~track_empty) ? head_onehot : {CLIENTS{1'b0}};
assign rsp_data  = rdata;
assign rsp_last  = rlast & head_last;

// single AXI ID: responses are in order, rid carries no information
wire unused_rid = &{1'b0, rid};

endmodule
