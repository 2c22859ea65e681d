// SDP write client: takes output atoms (UB bytes each, in cube order) and writes them to the byte
// segments of the destination cube (dla_sdp_walk) through the DMA write client.
//
// - A packer places the atoms of each segment into bus beats with byte strobes (a segment may start
//   and end anywhere in a beat; partial beats are flushed at the end of each segment) and queues the
//   beats in a FIFO.
// - A second walker over the same segments makes the write requests: a request of n beats only once
//   its n beats are queued (n = the rest of the segment, at most the FIFO depth, waiting for half the
//   FIFO on long segments), then streams them, so the shared write DMA is never held waiting for
//   SDP's data. One request at a time: the next one may be prepared while the previous one's beats
//   stream, but req_valid rises only after its last beat.
// - busy rises with start and falls once every beat is written and the DMA reports the client idle
//   (all write responses back), checked from the cycle after the last data beat.
module dla_sdp_wr #(
    parameter AW    = 32,
    parameter DW    = 64,
    parameter MBL   = 3,    // log2(DW/8)
    parameter UB    = 8,    // bytes per input unit (atom)
    parameter FLOG2 = 4,    // beat FIFO depth log2
    parameter LENW  = 16,
    parameter LW    = 48
) (
    input  wire                 clk,
    input  wire                 rstn,
    input  wire                 start,
    input  wire [AW-1:0]        base,
    input  wire [31:0]          line_stride,
    input  wire [31:0]          surf_stride,
    input  wire [13:0]          lines,
    input  wire [13:0]          surfs,
    input  wire [LW-1:0]        line_bytes,
    output reg                  busy,
    // units
    input  wire                 in_valid,
    output wire                 in_ready,
    input  wire [UB*8-1:0]      in_data,
    // DMA write client
    output wire                 req_valid,
    input  wire                 req_ready,
    output reg  [AW-1:0]        req_addr,
    output reg  [LENW-1:0]      req_len,
    output wire                 dat_valid,
    input  wire                 dat_ready,
    output wire [DW-1:0]        dat_data,
    output wire [DW/8-1:0]      dat_strb,
    input  wire                 idle
);

localparam integer MB = DW / 8;
localparam DEPTH = 1 << FLOG2;
localparam integer BUFW = (UB > MB) ? 2 * UB : MB + UB;
localparam CW    = $clog2(BUFW + 1);
localparam [CW-1:0]  MB_V    = MB[CW-1:0];
localparam integer UBI = UB;
localparam [CW-1:0]  UB_V    = UBI[CW-1:0];
localparam [LW-1:0]  UB_L    = UB;
localparam [FLOG2:0] CHUNK_V = DEPTH / 2;
localparam [LW:0]    MB_M1   = {{(LW+1-MBL){1'b0}}, {MBL{1'b1}}};

// =====================================================================================
// packer
// =====================================================================================
wire          a_valid;
wire [AW-1:0] a_addr;
wire [LW-1:0] a_len;
wire          a_next;
dla_sdp_walk #(.AW(AW), .LW(LW)) u_walk_pack (
    .clk(clk), .rstn(rstn), .start(start), .base(base), .line_stride(line_stride),
    .surf_stride(surf_stride), .lines(lines), .surfs(surfs), .line_bytes(line_bytes),
    .next(a_next), .valid(a_valid), .addr(a_addr), .len(a_len)
);

reg              g_act;    // accepting the units of a segment
reg [LW-1:0]     g_rem;    // bytes of the segment still to accept
reg [BUFW*8-1:0] wb;       // pending bytes: beat-aligned, [0, wc)
reg [BUFW-1:0]   ws;       // their strobes
reg [CW-1:0]     wc;

wire          bf_full, bf_empty;
wire [DW+MB-1:0] bf_head;
wire          emit    = ((wc >= MB_V) | (~g_act & (wc != {CW{1'b0}}))) & ~bf_full;
wire [CW-1:0] wc_e    = emit ? ((wc > MB_V) ? wc - MB_V : {CW{1'b0}}) : wc;
wire [BUFW*8-1:0] wb_e = emit ? wb >> (8 * MB) : wb;
wire [BUFW-1:0]   ws_e = emit ? ws >> MB : ws;
wire          accept  = g_act & in_valid & ((wc < MB_V) | emit);
assign in_ready = accept;
// the next segment starts once the flush of the previous one is (being) emitted
assign a_next   = ~g_act & ((wc == {CW{1'b0}}) | (emit & (wc <= MB_V))) & a_valid;

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        g_act <= 1'b0;
        g_rem <= {LW{1'b0}};
        wb    <= {(BUFW*8){1'b0}};
        ws    <= {BUFW{1'b0}};
        wc    <= {CW{1'b0}};
    end else if (a_next) begin
        // a new segment: its first bytes sit at the start address' offset in the beat
        g_act <= 1'b1;
        g_rem <= a_len;
        wb    <= {(BUFW*8){1'b0}};
        ws    <= {BUFW{1'b0}};
        wc    <= {{(CW-MBL){1'b0}}, a_addr[MBL-1:0]};
    end else if (accept) begin
        wb    <= wb_e | ({{((BUFW-UB)*8){1'b0}}, in_data} << {wc_e, 3'b000});
        ws    <= ws_e | ({{(BUFW-UB){1'b0}}, {UB{1'b1}}} << wc_e);
        wc    <= wc_e + UB_V;
        g_rem <= g_rem - UB_L;
        g_act <= (g_rem != UB_L);
    end else begin
        wb    <= wb_e;
        ws    <= ws_e;
        wc    <= wc_e;
    end
end

wire unused_a_addr = &{1'b0, a_addr};   // only its offset in the beat matters here
wire pack_done = ~g_act & (wc == {CW{1'b0}}) & ~a_valid;

// beats waiting for their request
wire bf_pop = dat_valid & dat_ready;
dla_fifo #(.WIDTH(DW + MB), .DEPTH_LOG2(FLOG2)) u_beats (
    .clk(clk), .rstn(rstn), .push(emit), .push_data({ws[MB-1:0], wb[DW-1:0]}), .pop(bf_pop),
    .head(bf_head), .empty(bf_empty), .full(bf_full)
);
assign dat_data = bf_head[DW-1:0];
assign dat_strb = bf_head[DW+MB-1:DW];

// =====================================================================================
// requests
// =====================================================================================
wire          b_valid;
wire [AW-1:0] b_addr;
wire [LW-1:0] b_len;
wire          b_next;
dla_sdp_walk #(.AW(AW), .LW(LW)) u_walk_req (
    .clk(clk), .rstn(rstn), .start(start), .base(base), .line_stride(line_stride),
    .surf_stride(surf_stride), .lines(lines), .surfs(surfs), .line_bytes(line_bytes),
    .next(b_next), .valid(b_valid), .addr(b_addr), .len(b_len)
);
wire [LW:0] b_beats = ({1'b0, b_len} + {{(LW+1-MBL){1'b0}}, b_addr[MBL-1:0]} + MB_M1) >> MBL;

reg            r_act;
reg  [AW-1:0]  r_addr;
reg  [LW:0]    r_left;   // beats of the segment not requested yet
reg  [FLOG2:0] avail;    // queued beats not covered by a request
reg            r_pend;   // a request is waiting (presented once the previous one's data is out)
reg            dphase;   // streaming the beats of the accepted request
reg  [FLOG2:0] d_left;

wire           left_lt_chunk = (r_left < {{(LW-FLOG2){1'b0}}, CHUNK_V});
wire           left_lt_avail = (r_left < {{(LW-FLOG2){1'b0}}, avail});
wire [FLOG2:0] thresh = left_lt_chunk ? r_left[FLOG2:0] : CHUNK_V;
wire [FLOG2:0] clen   = left_lt_avail ? r_left[FLOG2:0] : avail;
wire           last_chunk = (r_left == {{(LW-FLOG2){1'b0}}, clen});
wire           create = r_act & ~r_pend & (avail >= thresh) & (avail != {(FLOG2+1){1'b0}});
assign b_next = (~r_act | (create & last_chunk)) & b_valid;

assign req_valid = r_pend & ~dphase;
assign dat_valid = dphase & ~bf_empty;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        r_act     <= 1'b0;
        r_addr    <= {AW{1'b0}};
        r_left    <= {(LW+1){1'b0}};
        avail     <= {(FLOG2+1){1'b0}};
        r_pend    <= 1'b0;
        dphase    <= 1'b0;
        d_left    <= {(FLOG2+1){1'b0}};
        req_addr  <= {AW{1'b0}};
        req_len   <= {LENW{1'b0}};
    end else begin
        if (b_next) begin
            r_act  <= 1'b1;
            r_addr <= {b_addr[AW-1:MBL], {MBL{1'b0}}};
            r_left <= b_beats;
        end else if (create) begin
            r_addr <= r_addr + ({{(AW-FLOG2-1){1'b0}}, clen} << MBL);
            r_left <= r_left - {{(LW-FLOG2){1'b0}}, clen};
            r_act  <= ~last_chunk;
        end
        avail <= avail + {{FLOG2{1'b0}}, emit} - (create ? clen : {(FLOG2+1){1'b0}});
        if (create) begin
            r_pend   <= 1'b1;
            req_addr <= r_addr;
            req_len  <= {{(LENW-FLOG2-1){1'b0}}, clen - {{FLOG2{1'b0}}, 1'b1}};
        end
        if (req_valid & req_ready) begin
            r_pend <= 1'b0;
            dphase <= 1'b1;
            d_left <= req_len[FLOG2:0] + {{FLOG2{1'b0}}, 1'b1};
        end else if (bf_pop) begin
            d_left <= d_left - {{FLOG2{1'b0}}, 1'b1};
            if (d_left == {{FLOG2{1'b0}}, 1'b1}) dphase <= 1'b0;
        end
    end
end

wire req_done = ~r_act & ~b_valid & ~r_pend & ~dphase;

// =====================================================================================
// completion
// =====================================================================================
reg drain;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        busy  <= 1'b0;
        drain <= 1'b0;
    end else if (start) begin
        busy  <= 1'b1;
        drain <= 1'b0;
    end else if (busy & ~drain) begin
        drain <= pack_done & req_done;
    end else if (drain & idle) begin
        busy  <= 1'b0;
        drain <= 1'b0;
    end
end

endmodule
