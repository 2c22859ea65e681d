// AXI4 write DMA shared by the engines' write clients (rtl/README.md, "DMA").
// Client protocol (valid/ready):
//   request : req_valid/req_ready, req_addr (byte address aligned to the bus width; low bits are
//             ignored), req_len = beats - 1;
//   data    : after the request is accepted, exactly req_len+1 beats on dat_valid/dat_ready with
//             dat_data/dat_strb (byte enables; partial atoms are written with strobes);
//   done    : cpl pulses once per request when the last write response (B) of it is back; idle is
//             high while the client has no request in progress or unanswered.
// An engine raises op_done only once idle is high again, so memory holds its output when the
// interrupt fires. Requests are served one at a time (round-robin); each is split into bursts of
// dla_burst_len beats; AW leads W (a burst's data is sent only after its AW handshake); up to
// 2**OUTST_LOG2 bursts await B. One AXI ID; bready is high whenever a B is expected.
module dla_axi_wr #(
    parameter CLIENTS    = 1,
    parameter AW         = 32,
    parameter DW         = 64,
    parameter LENW       = 16,
    parameter MAX_BURST  = 1,
    parameter OUTST_LOG2 = 4,
    parameter BYTES_LOG2 = 3,
    parameter AXI_ID     = 0
) (
    input  wire                      clk,
    input  wire                      rstn,
    // clients
    input  wire [CLIENTS-1:0]        req_valid,
    output wire [CLIENTS-1:0]        req_ready,
    input  wire [CLIENTS*AW-1:0]     req_addr,
    input  wire [CLIENTS*LENW-1:0]   req_len,
    input  wire [CLIENTS-1:0]        dat_valid,
    output wire [CLIENTS-1:0]        dat_ready,
    input  wire [CLIENTS*DW-1:0]     dat_data,
    input  wire [CLIENTS*DW/8-1:0]   dat_strb,
    output wire [CLIENTS-1:0]        cpl,
    output wire [CLIENTS-1:0]        idle,
    // AXI4 AW / W / B
    output wire                      awvalid,
    input  wire                      awready,
    output wire [7:0]                awid,
    output wire [3:0]                awlen,
    output wire [AW-1:0]             awaddr,
    output wire                      wvalid,
    input  wire                      wready,
    output wire [DW-1:0]             wdata,
    output wire [DW/8-1:0]           wstrb,
    output wire                      wlast,
    input  wire                      bvalid,
    output wire                      bready,
    input  wire [7:0]                bid
);

localparam CW = (CLIENTS > 1) ? $clog2(CLIENTS) : 1;
localparam [CLIENTS-1:0] ONE = 1;
localparam SW = DW / 8;

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

// ---- current request: AW side and W side walk the same bursts ----
reg [CW-1:0]       cur_client;
reg [AW-1:0]       aw_addr;
reg [LENW:0]       aw_left;
reg [AW-1:0]       w_addr;
reg [LENW:0]       w_left;
reg [4:0]          w_beats;     // beats left in the current W burst (0: a burst starts)
reg [OUTST_LOG2:0] aw_ahead;    // bursts whose AW is done and whose W is not
wire [4:0]         aw_burst;
wire [4:0]         w_burst;
wire               b_full;

dla_burst_len #(.LENW(LENW), .MAX_BURST(MAX_BURST), .BYTES_LOG2(BYTES_LOG2)) u_aw_burst (
    .page_addr(aw_addr[11:0]), .left(aw_left), .beats(aw_burst)
);
dla_burst_len #(.LENW(LENW), .MAX_BURST(MAX_BURST), .BYTES_LOG2(BYTES_LOG2)) u_w_burst (
    .page_addr(w_addr[11:0]), .left(w_left), .beats(w_burst)
);

wire [4:0] w_cur       = (w_beats == 5'd0) ? w_burst : w_beats;
wire       aw_last     = (aw_left == {{(LENW-4){1'b0}}, aw_burst});
wire       w_may       = cur_valid & (aw_ahead != {(OUTST_LOG2+1){1'b0}});
wire       client_dat  = |(dat_valid & (ONE << cur_client));
wire       aw_hs       = awvalid & awready;
wire       w_hs        = wvalid & wready;

assign awvalid = cur_valid & (aw_left != {(LENW+1){1'b0}}) & ~b_full;
assign awid    = AXI_ID;
assign awlen   = aw_burst[3:0] - 4'd1;
assign awaddr  = aw_addr;
assign wvalid  = w_may & client_dat;
assign wdata   = dat_data[cur_client*DW +: DW];
assign wstrb   = dat_strb[cur_client*SW +: SW];
assign wlast   = (w_cur == 5'd1);
assign dat_ready = (w_may & wready) ? (ONE << cur_client) : {CLIENTS{1'b0}};

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        cur_valid  <= 1'b0;
        cur_client <= {CW{1'b0}};
        aw_addr    <= {AW{1'b0}};
        aw_left    <= {(LENW+1){1'b0}};
        w_addr     <= {AW{1'b0}};
        w_left     <= {(LENW+1){1'b0}};
        w_beats    <= 5'd0;
        aw_ahead   <= {(OUTST_LOG2+1){1'b0}};
    end else if (accept) begin
        cur_valid  <= 1'b1;
        cur_client <= sel_client;
        aw_addr    <= {sel_addr[AW-1:BYTES_LOG2], {BYTES_LOG2{1'b0}}};
        w_addr     <= {sel_addr[AW-1:BYTES_LOG2], {BYTES_LOG2{1'b0}}};
        aw_left    <= {1'b0, sel_len} + 1'b1;
        w_left     <= {1'b0, sel_len} + 1'b1;
        w_beats    <= 5'd0;
    end else begin
        if (aw_hs) begin
            aw_addr <= aw_addr + ({{(AW-5){1'b0}}, aw_burst} << BYTES_LOG2);
            aw_left <= aw_left - {{(LENW-4){1'b0}}, aw_burst};
        end
        if (w_hs) begin
            w_addr  <= w_addr + SW;
            w_left  <= w_left - 1'b1;
            w_beats <= w_cur - 5'd1;
            if (w_left == {{LENW{1'b0}}, 1'b1}) cur_valid <= 1'b0;
        end
        case ({aw_hs, w_hs & wlast})
            2'b10:   aw_ahead <= aw_ahead + 1'b1;
            2'b01:   aw_ahead <= aw_ahead - 1'b1;
            default: ;
        endcase
    end
end

// ---- B: one entry per burst, in order ----
wire [CW:0]   b_head;
wire          b_empty;
wire [CW-1:0] b_client = b_head[CW:1];
wire          b_last   = b_head[0];
wire          b_pop    = bvalid & ~b_empty;

dla_fifo #(.WIDTH(CW + 1), .DEPTH_LOG2(OUTST_LOG2)) u_track (
    .clk(clk), .rstn(rstn),
    .push(aw_hs), .push_data({cur_client, aw_last}),
    .pop(b_pop),
    .head(b_head), .empty(b_empty), .full(b_full)
);

assign bready = ~b_empty;

// ---- per-client completion ----
genvar c;
generate
    for (c = 0; c < CLIENTS; c = c + 1) begin : g_client
        localparam [CW-1:0] ID = c;
        reg [OUTST_LOG2+1:0] pending;  // requests accepted whose last B is not back
        wire inc = req_valid[c] & req_ready[c];
        wire dec = b_pop & b_last & (b_client == ID);
        always @(posedge clk or negedge rstn) begin
            if (!rstn) pending <= {(OUTST_LOG2+2){1'b0}};
            else if (inc & ~dec) pending <= pending + 1'b1;
            else if (dec & ~inc) pending <= pending - 1'b1;
        end
        assign cpl[c]  = dec;
        assign idle[c] = (pending == {(OUTST_LOG2+2){1'b0}});
    end
endgenerate

// single AXI ID: responses are in order, bid carries no information
wire unused_bid = &{1'b0, bid};

endmodule
