// One SDP_RDMA read client (MRDMA input cube, BRDMA / NRDMA operands): reads the byte segments of
// a cube (dla_sdp_walk) through the DMA and hands them on as a stream of `ubytes`-byte units
// (one atom of elements: ATOM x bytes per element), in memory order.
//
// - Requests are credit based: a request of n beats is issued only when n beats of the beat FIFO are
//   free and not promised to earlier requests, so every response beat is taken at once (the DMA
//   rule: never stall responses). Requests cover the beat-aligned span of a segment, in chunks of
//   up to the FIFO depth (issued once half the FIFO, or the rest of the segment, is free).
// - A descriptor FIFO tells the realigner each segment's start offset in its first beat and its
//   length, so segments may start at any byte and units may straddle beats.
// - The realigner keeps up to UMAX + MB bytes; it takes a beat when it fits and gives a unit as soon
//   as `ubytes` bytes are there. out_valid does not depend on out_ready.
module dla_sdp_rd #(
    parameter AW    = 32,
    parameter DW    = 64,
    parameter MBL   = 3,    // log2(DW/8)
    parameter UMAX  = 8,    // largest unit, bytes
    parameter FLOG2 = 5,    // beat FIFO depth log2
    parameter LENW  = 16,
    parameter LW    = 48
) (
    input  wire                 clk,
    input  wire                 rstn,
    input  wire                 start,
    // cube geometry (stable from start to the end of the operation)
    input  wire [AW-1:0]        base,
    input  wire [31:0]          line_stride,
    input  wire [31:0]          surf_stride,
    input  wire [13:0]          lines,
    input  wire [13:0]          surfs,
    input  wire [LW-1:0]        line_bytes,
    input  wire [7:0]           ubytes,
    // DMA read client
    output reg                  req_valid,
    input  wire                 req_ready,
    output reg  [AW-1:0]        req_addr,
    output reg  [LENW-1:0]      req_len,
    input  wire                 rsp_valid,
    output wire                 rsp_ready,
    input  wire [DW-1:0]        rsp_data,
    // units
    output wire                 out_valid,
    input  wire                 out_ready,
    output wire [UMAX*8-1:0]    out_data
);

localparam integer MB = DW / 8;
localparam DEPTH = 1 << FLOG2;
localparam integer BUFB = UMAX + MB;
localparam CW    = $clog2(BUFB + 1);
localparam [FLOG2:0] DEPTH_V = DEPTH;
localparam [FLOG2:0] CHUNK_V = DEPTH / 2;
localparam [LW:0]    MB_M1   = {{(LW+1-MBL){1'b0}}, {MBL{1'b1}}};
localparam [CW-1:0]  MB_V    = MB[CW-1:0];
localparam [CW:0]    BUFB_V  = BUFB[CW:0];

// ---- segments ----
wire          w_valid;
wire [AW-1:0] w_addr;
wire [LW-1:0] w_len;
wire          load;
dla_sdp_walk #(.AW(AW), .LW(LW)) u_walk (
    .clk(clk), .rstn(rstn), .start(start), .base(base), .line_stride(line_stride),
    .surf_stride(surf_stride), .lines(lines), .surfs(surfs), .line_bytes(line_bytes),
    .next(load), .valid(w_valid), .addr(w_addr), .len(w_len)
);

reg            s_act;     // a segment's requests are being issued
wire [MBL-1:0] w_skip  = w_addr[MBL-1:0];
wire [LW:0]    w_beats = ({1'b0, w_len} + {{(LW+1-MBL){1'b0}}, w_skip} + MB_M1) >> MBL;

// descriptor FIFO: {skip, length} of each segment whose requests have started
wire               d_empty, d_full;
wire [MBL+LW-1:0]  d_head;
wire               d_pop;
dla_fifo #(.WIDTH(MBL + LW), .DEPTH_LOG2(3)) u_desc (
    .clk(clk), .rstn(rstn), .push(load), .push_data({w_skip, w_len}), .pop(d_pop),
    .head(d_head), .empty(d_empty), .full(d_full)
);
wire [MBL-1:0] d_skip = d_head[MBL+LW-1:LW];
wire [LW-1:0]  d_len  = d_head[LW-1:0];

// ---- requests ----
reg  [AW-1:0] s_addr;
reg  [LW:0]   s_left;    // beats of the segment not requested yet
reg  [FLOG2:0] resv;     // beat FIFO entries promised (in flight or stored)
wire [FLOG2:0] free    = DEPTH_V - resv;
wire          left_lt_chunk = (s_left < {{(LW-FLOG2){1'b0}}, CHUNK_V});
wire          left_lt_free  = (s_left < {{(LW-FLOG2){1'b0}}, free});
wire [FLOG2:0] thresh  = left_lt_chunk ? s_left[FLOG2:0] : CHUNK_V;
wire [FLOG2:0] clen    = left_lt_free ? s_left[FLOG2:0] : free;
wire          last_chunk = (s_left == {{(LW-FLOG2){1'b0}}, clen});
wire          create  = s_act & (~req_valid | req_ready) & (free >= thresh) & (free != {(FLOG2+1){1'b0}});
// the next segment starts as the last chunk of the current one is requested
assign load = (~s_act | (create & last_chunk)) & w_valid & ~d_full;
wire          take;

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        s_act     <= 1'b0;
        s_addr    <= {AW{1'b0}};
        s_left    <= {(LW+1){1'b0}};
        req_valid <= 1'b0;
        req_addr  <= {AW{1'b0}};
        req_len   <= {LENW{1'b0}};
        resv      <= {(FLOG2+1){1'b0}};
    end else begin
        if (load) begin
            s_act  <= 1'b1;
            s_addr <= {w_addr[AW-1:MBL], {MBL{1'b0}}};
            s_left <= w_beats;
        end else if (create) begin
            s_addr <= s_addr + ({{(AW-FLOG2-1){1'b0}}, clen} << MBL);
            s_left <= s_left - {{(LW-FLOG2){1'b0}}, clen};
            s_act  <= ~last_chunk;
        end
        if (create) begin
            req_valid <= 1'b1;
            req_addr  <= s_addr;
            req_len   <= {{(LENW-FLOG2-1){1'b0}}, clen - {{FLOG2{1'b0}}, 1'b1}};
        end else if (req_ready) begin
            req_valid <= 1'b0;
        end
        resv <= resv + (create ? clen : {(FLOG2+1){1'b0}}) - {{FLOG2{1'b0}}, take};
    end
end

// ---- beats ----
wire          bf_empty, bf_full;
wire [DW-1:0] bf_head;
assign rsp_ready = ~bf_full;   // never full: every beat has a promised entry
dla_fifo #(.WIDTH(DW), .DEPTH_LOG2(FLOG2)) u_beats (
    .clk(clk), .rstn(rstn), .push(rsp_valid), .push_data(rsp_data), .pop(take),
    .head(bf_head), .empty(bf_empty), .full(bf_full)
);

// ---- realigner ----
reg [BUFB*8-1:0] gbuf;     // bytes [0, cnt) valid, the rest 0
reg [CW-1:0]     cnt;
reg              g_first;  // next beat is the first of the head descriptor's segment
reg [LW-1:0]     g_rem;    // bytes of the segment still to come (when !g_first)

wire [MBL-1:0] off    = g_first ? d_skip : {MBL{1'b0}};
wire [LW-1:0]  rem    = g_first ? d_len : g_rem;
wire [CW-1:0]  room   = MB_V - {{(CW-MBL){1'b0}}, off};
wire           rem_lt = (rem < {{(LW-CW){1'b0}}, room});
wire [CW-1:0]  n      = rem_lt ? rem[CW-1:0] : room;       // bytes this beat gives
wire           seg_end = (rem <= {{(LW-CW){1'b0}}, room}); // last beat of the segment
assign take  = ~bf_empty & ~d_empty & (({1'b0, cnt} + {1'b0, n}) <= BUFB_V);
assign d_pop = take & seg_end;

wire [CW-1:0] ub = ubytes[CW-1:0];
assign out_valid = (cnt >= ub) & (ub != {CW{1'b0}});
assign out_data  = gbuf[UMAX*8-1:0];
wire pop_out = out_valid & out_ready;

wire [CW-1:0]     cnt1 = pop_out ? cnt - ub : cnt;
wire [BUFB*8-1:0] buf1 = pop_out ? gbuf >> {ub, 3'b000} : gbuf;
wire [DW-1:0]     head_sh   = bf_head >> {off, 3'b000};
wire [DW-1:0]     head_mask = ~({DW{1'b1}} << {n, 3'b000});
wire [BUFB*8-1:0] newb = {{(UMAX*8){1'b0}}, head_sh & head_mask} << {cnt1, 3'b000};

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        gbuf    <= {(BUFB*8){1'b0}};
        cnt     <= {CW{1'b0}};
        g_first <= 1'b1;
        g_rem   <= {LW{1'b0}};
    end else begin
        gbuf <= take ? (buf1 | newb) : buf1;
        cnt  <= take ? cnt1 + n : cnt1;
        if (take) begin
            g_first <= seg_end;
            g_rem   <= rem - {{(LW-CW){1'b0}}, n};
        end
    end
end

wire unused_ubytes = &{1'b0, ubytes};   // units are at most UMAX bytes

endmodule
