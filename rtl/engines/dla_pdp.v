// PDP engine (PDP + PDP_RDMA): planar pooling (max, min, average) of an int8 feature cube read from
// memory (OFF_FLYING: input through the PDP_RDMA registers), bit-exact to golden/engines/pdp.py.
//
// Microarchitecture (correctness first, rtl/README.md "Engine interface" and "DMA"):
//   request generator (RG) -- walks surfaces s, output rows oy, output columns ox and, per output
//       pixel, the real (unpadded) input rows of its window; per row one read request covering the
//       window's real columns (contiguous atoms). One descriptor per request goes to a FIFO.
//   response side (RS) -- takes every beat at once (rd_rsp_ready is always 1), picks the atoms of
//       the request out of each beat and accumulates them per lane: int16 wrapping sum (AVERAGE),
//       max or min. The last beat of a pixel's last request finishes the pixel.
//   finish pipeline -- F1: sum + padding term (AVERAGE); F2: rha(sum*RECIP_KERNEL_WIDTH, 16);
//       then rha(.*RECIP_KERNEL_HEIGHT, 16), low byte, into the output FIFO.
//   writer -- runs of up to RUN_MAX output atoms of one output line: once all of a run's atoms are
//       in the output FIFO, one write request, then its beats (atoms packed, strobes per atom).
//       After the last run: wait for wr_idle, then op_done.
// A pixel is started only while fewer than OF_DEPTH pixels are in flight or waiting in the output
// FIFO, so the RS never has to stall a beat; a write request is issued only with all its data at
// hand. All atom lanes (also the padding lanes of the last surface) are computed and written.
//
// Semantics (golden/engines/pdp.py, docs/golden-semantics.md):
//   - input columns of output ox: [ox*sw - pad_left, +kw), rows [oy*sh - pad_top, +kh); MAX/MIN
//     over the real taps only;
//   - AVERAGE: int16 wrapping sum of the real taps + rows_real*PAD[n] + kw*PAD[m] (n padded columns,
//     m padded rows; PAD_VALUE_nX sign-extended from bit 7/8/9/9/10/10/10 OR-ed with the field and
//     kept to 16 bits), then out = low byte of rha(rha(t*RECIP_W, 16)*RECIP_H, 16), rha rounding
//     half away from zero;
//   - sizes from the PDP registers (CUBE_IN_*, CUBE_OUT_WIDTH/HEIGHT; surfaces from
//     CUBE_IN_CHANNEL), source address and strides from PDP_RDMA, destination from PDP;
//     address/stride words lose their low bits on configs with a coarser DLA_ADDRESS_UNIT;
//   - split-width mode: for the configurations golden accepts, the splits together are exactly the
//     unsplit pooling (golden/engines/pdp.py), so SPLIT_NUM and PARTIAL_WIDTH_* are not needed.
// Reports: D_INF_INPUT_NUM, D_NAN_INPUT_NUM, D_NAN_OUTPUT_NUM = 0 (as golden for int8).
// ON_FLYING operations (started only with DLA_SDP_PDP_FLYING) complete without memory traffic: the
// SDP->PDP data path is not there yet.
// Configurations golden rejects (ConfigError / UnsupportedError) still complete: a window without
// real data gives an unspecified (deterministic) value, int16/fp16 are processed as int8, RAM types
// are ignored (one memory), PDP_RDMA sizes and split registers are not compared with the PDP's. Addresses and strides are assumed to be multiples of the atom size
// (DLA_ATOM_BYTES); the bus width must be a multiple of the atom (every preset).
`include "dla_config.vh"
`include "nvdla_regs.vh"
`include "dla_defs.vh"

module dla_pdp (
    input  wire                                  clk,
    input  wire                                  rstn,
    // operation control
    input  wire                                  op_start,
    output reg                                   op_done,
    input  wire [`NVDLA_PDP_VEC_WIDTH-1:0]       pdp_regs,       // PDP consumer group
    input  wire [`NVDLA_PDP_RDMA_VEC_WIDTH-1:0]  pdp_rdma_regs,  // PDP_RDMA consumer group
    // status reports into the consumer groups (read-only D_ registers)
    output wire                                  pdp_stat_we,
    output wire [9:0]                            pdp_stat_word,
    output wire [31:0]                           pdp_stat_data,
    output wire                                  pdp_rdma_stat_we,
    output wire [9:0]                            pdp_rdma_stat_word,
    output wire [31:0]                           pdp_rdma_stat_data,
    // DMA read client
    output wire                                  rd_req_valid,
    input  wire                                  rd_req_ready,
    output wire [`DLA_MEM_ADDR_WIDTH-1:0]        rd_req_addr,
    output wire [`DLA_DMA_LEN_WIDTH-1:0]         rd_req_len,
    input  wire                                  rd_rsp_valid,
    output wire                                  rd_rsp_ready,
    input  wire [`DLA_MEMIF_WIDTH-1:0]           rd_rsp_data,
    input  wire                                  rd_rsp_last,
    // DMA write client
    output wire                                  wr_req_valid,
    input  wire                                  wr_req_ready,
    output wire [`DLA_MEM_ADDR_WIDTH-1:0]        wr_req_addr,
    output wire [`DLA_DMA_LEN_WIDTH-1:0]         wr_req_len,
    output wire                                  wr_dat_valid,
    input  wire                                  wr_dat_ready,
    output wire [`DLA_MEMIF_WIDTH-1:0]           wr_dat_data,
    output wire [`DLA_MEMIF_BYTES-1:0]           wr_dat_strb,
    input  wire                                  wr_cpl,
    input  wire                                  wr_idle
);

// ------------------------------------------------------------------------------------------------
// Sizes
// ------------------------------------------------------------------------------------------------
localparam AW       = `DLA_MEM_ADDR_WIDTH;
localparam DW       = `DLA_MEMIF_WIDTH;
localparam MB       = `DLA_MEMIF_BYTES;           // bytes per bus beat
localparam AB       = `DLA_ATOM_BYTES;            // int8 lanes per atom
localparam ABL      = $clog2(AB);
localparam R        = MB / AB;                    // atoms per bus beat (1 or more)
localparam RL       = $clog2(R);
localparam RLW      = (RL > 0) ? RL : 1;
localparam ULOG     = $clog2(`DLA_ADDRESS_UNIT);  // address/stride bits below the address unit
localparam LENW     = `DLA_DMA_LEN_WIDTH;
localparam ADW      = AB * 8;                     // bits of one atom
localparam DQ_LOG2  = 5;                          // read requests in flight (descriptor FIFO)
localparam OF_LOG2  = 4;                          // output FIFO: 2**OF_LOG2 atoms
localparam OF_DEPTH = 1 << OF_LOG2;
localparam RUN_MAX  = OF_DEPTH / 2;               // atoms per write request at most
localparam DQW      = 16 + 5 + RLW + 3;           // descriptor bits

// ------------------------------------------------------------------------------------------------
// Configuration (the consumer groups are stable from op_start to op_done)
// ------------------------------------------------------------------------------------------------
wire [1:0]  cfg_method = pdp_regs[`NVDLA_PDP_D_OPERATION_MODE_CFG_POOLING_METHOD_VEC];
// ON_FLYING (0, input from SDP): only started with DLA_SDP_PDP_FLYING; the SDP->PDP data path does
// not exist yet, so such an operation completes without memory traffic
wire        on_flying  = (pdp_regs[`NVDLA_PDP_D_OPERATION_MODE_CFG_FLYING_MODE_VEC] ==
                          `NVDLA_PDP_D_OPERATION_MODE_CFG_FLYING_MODE_ON_FLYING);
wire        is_avg     = (cfg_method == `NVDLA_PDP_D_OPERATION_MODE_CFG_POOLING_METHOD_POOLING_METHOD_AVERAGE);
wire        is_max     = (cfg_method == `NVDLA_PDP_D_OPERATION_MODE_CFG_POOLING_METHOD_POOLING_METHOD_MAX);
// otherwise MIN (2, and the illegal 3)
wire [4:0]  kw  = {1'b0, pdp_regs[`NVDLA_PDP_D_POOLING_KERNEL_CFG_KERNEL_WIDTH_VEC]} + 5'd1;
wire [4:0]  kh  = {1'b0, pdp_regs[`NVDLA_PDP_D_POOLING_KERNEL_CFG_KERNEL_HEIGHT_VEC]} + 5'd1;
wire [4:0]  sw  = {1'b0, pdp_regs[`NVDLA_PDP_D_POOLING_KERNEL_CFG_KERNEL_STRIDE_WIDTH_VEC]} + 5'd1;
wire [4:0]  sh  = {1'b0, pdp_regs[`NVDLA_PDP_D_POOLING_KERNEL_CFG_KERNEL_STRIDE_HEIGHT_VEC]} + 5'd1;
wire [2:0]  pad_l = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_CFG_PAD_LEFT_VEC];
wire [2:0]  pad_t = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_CFG_PAD_TOP_VEC];
wire [13:0] in_w  = {1'b0, pdp_regs[`NVDLA_PDP_D_DATA_CUBE_IN_WIDTH_CUBE_IN_WIDTH_VEC]} + 14'd1;
wire [13:0] in_h  = {1'b0, pdp_regs[`NVDLA_PDP_D_DATA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT_VEC]} + 14'd1;
wire [12:0] c_m1  = pdp_regs[`NVDLA_PDP_D_DATA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL_VEC];
wire [13:0] s_last  = {1'b0, c_m1 >> ABL};       // surfaces - 1
wire [13:0] ow_m1 = {1'b0, pdp_regs[`NVDLA_PDP_D_DATA_CUBE_OUT_WIDTH_CUBE_OUT_WIDTH_VEC]};
wire [13:0] oh_m1 = {1'b0, pdp_regs[`NVDLA_PDP_D_DATA_CUBE_OUT_HEIGHT_CUBE_OUT_HEIGHT_VEC]};
wire [16:0] rcp_w = pdp_regs[`NVDLA_PDP_D_RECIP_KERNEL_WIDTH_RECIP_KERNEL_WIDTH_VEC];
wire [16:0] rcp_h = pdp_regs[`NVDLA_PDP_D_RECIP_KERNEL_HEIGHT_RECIP_KERNEL_HEIGHT_VEC];
wire [15:0] pv1 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_1_CFG_PAD_VALUE_1X_VEC_LSB +: 16];
wire [15:0] pv2 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_2_CFG_PAD_VALUE_2X_VEC_LSB +: 16];
wire [15:0] pv3 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_3_CFG_PAD_VALUE_3X_VEC_LSB +: 16];
wire [15:0] pv4 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_4_CFG_PAD_VALUE_4X_VEC_LSB +: 16];
wire [15:0] pv5 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_5_CFG_PAD_VALUE_5X_VEC_LSB +: 16];
wire [15:0] pv6 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_6_CFG_PAD_VALUE_6X_VEC_LSB +: 16];
wire [15:0] pv7 = pdp_regs[`NVDLA_PDP_D_POOLING_PADDING_VALUE_7_CFG_PAD_VALUE_7X_VEC_LSB +: 16];
// PAD_VALUE_nX as the int16 line buffer sees it: sign bit 7/8/9/9/10/10/10 copied upwards, OR-ed
// with the field, 16 bits kept (cmod int_sign_extend; bits above the sign bit survive).
wire [15:0] pad1 = pv1 | {{8{pv1[7]}}, 8'd0};
wire [15:0] pad2 = pv2 | {{7{pv2[8]}}, 9'd0};
wire [15:0] pad3 = pv3 | {{6{pv3[9]}}, 10'd0};
wire [15:0] pad4 = pv4 | {{6{pv4[9]}}, 10'd0};
wire [15:0] pad5 = pv5 | {{5{pv5[10]}}, 11'd0};
wire [15:0] pad6 = pv6 | {{5{pv6[10]}}, 11'd0};
wire [15:0] pad7 = pv7 | {{5{pv7[10]}}, 11'd0};

// base addresses: LOW and HIGH words are adjacent in the vectors (LOW first)
wire [AW-1:0] src_word = pdp_rdma_regs[`NVDLA_PDP_RDMA_D_SRC_BASE_ADDR_LOW_VEC_LSB +: AW];
wire [AW-1:0] dst_word = pdp_regs[`NVDLA_PDP_D_DST_BASE_ADDR_LOW_VEC_LSB +: AW];
wire [31:0]   src_ls_word = pdp_rdma_regs[`NVDLA_PDP_RDMA_D_SRC_LINE_STRIDE_VEC];
wire [31:0]   src_ss_word = pdp_rdma_regs[`NVDLA_PDP_RDMA_D_SRC_SURFACE_STRIDE_VEC];
wire [31:0]   dst_ls_word = pdp_regs[`NVDLA_PDP_D_DST_LINE_STRIDE_VEC];
wire [31:0]   dst_ss_word = pdp_regs[`NVDLA_PDP_D_DST_SURFACE_STRIDE_VEC];
wire [AW-1:0] src_ls_aw;
wire [AW-1:0] src_ss_aw;
wire [AW-1:0] dst_ls_aw;
wire [AW-1:0] dst_ss_aw;
generate
    if (AW > 32) begin : g_stride_ext
        assign src_ls_aw = {{(AW-32){1'b0}}, src_ls_word};
        assign src_ss_aw = {{(AW-32){1'b0}}, src_ss_word};
        assign dst_ls_aw = {{(AW-32){1'b0}}, dst_ls_word};
        assign dst_ss_aw = {{(AW-32){1'b0}}, dst_ss_word};
    end else begin : g_stride_cut
        assign src_ls_aw = src_ls_word[AW-1:0];
        assign src_ss_aw = src_ss_word[AW-1:0];
        assign dst_ls_aw = dst_ls_word[AW-1:0];
        assign dst_ss_aw = dst_ss_word[AW-1:0];
    end
endgenerate
// byte values (golden.dma.dma_bytes: the low bits of a coarser address unit are ignored)
wire [AW-1:0] src_base = (src_word >> ULOG) << ULOG;
wire [AW-1:0] dst_base = (dst_word >> ULOG) << ULOG;
wire [AW-1:0] src_ls   = (src_ls_aw >> ULOG) << ULOG;
wire [AW-1:0] src_ss   = (src_ss_aw >> ULOG) << ULOG;
wire [AW-1:0] dst_ls   = (dst_ls_aw >> ULOG) << ULOG;
wire [AW-1:0] dst_ss   = (dst_ss_aw >> ULOG) << ULOG;

// The rest of the groups (sizes repeated in PDP_RDMA, split-width registers, data formats, RAM
// types, right/bottom padding, which only decide the output size) is not needed, see above.
wire unused_regs = &{1'b0, pdp_regs, pdp_rdma_regs, wr_cpl};

// ------------------------------------------------------------------------------------------------
// Operation state and status reports
// ------------------------------------------------------------------------------------------------
reg [1:0] rep_cnt;      // report being sent (three, in the cycles after op_start)
reg       rep_busy;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        rep_cnt  <= 2'd0;
        rep_busy <= 1'b0;
    end else if (op_start) begin
        rep_cnt  <= 2'd0;
        rep_busy <= 1'b1;
    end else if (rep_busy) begin
        rep_cnt <= rep_cnt + 2'd1;
        if (rep_cnt == 2'd2) rep_busy <= 1'b0;
    end
end
assign pdp_stat_we   = rep_busy;
assign pdp_stat_word = (rep_cnt == 2'd0) ? `NVDLA_PDP_D_INF_INPUT_NUM_WORD :
                       (rep_cnt == 2'd1) ? `NVDLA_PDP_D_NAN_INPUT_NUM_WORD :
                                           `NVDLA_PDP_D_NAN_OUTPUT_NUM_WORD;
assign pdp_stat_data = 32'd0;   // floating-point statistics: always 0 for int8
assign pdp_rdma_stat_we   = 1'b0;  // golden reports nothing into PDP_RDMA
assign pdp_rdma_stat_word = 10'd0;
assign pdp_rdma_stat_data = 32'd0;

// ------------------------------------------------------------------------------------------------
// Request generator
// ------------------------------------------------------------------------------------------------
localparam [1:0] RG_IDLE = 2'd0, RG_ROW = 2'd1, RG_PIX = 2'd2, RG_ISSUE = 2'd3;

reg  [1:0]        rg_state;
reg  [13:0]       rg_s;
reg  [13:0]       rg_oy;
reg  [13:0]       rg_ox;
reg  signed [19:0] rg_wy;         // first window row of output row rg_oy (may be negative)
reg  signed [19:0] rg_wx;         // first window column of output column rg_ox
reg  [AW-1:0]     rg_surf;        // address of surface rg_s
reg  [AW-1:0]     rg_row0;        // address of the window's first real row, column 0
reg  [4:0]        rg_rows;        // real rows of the window
reg               rg_rign;        // the window has no real row
reg  [AW-1:0]     rg_addr;        // address of the next request
reg  [4:0]        rg_cols;        // atoms per request
reg  [4:0]        rg_left;        // requests left for this pixel
reg               rg_first;
reg               rg_ign;
reg  [15:0]       rg_pad;
reg  [OF_LOG2:0]  resv;           // pixels started and not yet taken by the writer

wire              dq_full;
wire              dq_empty;
wire [DQW-1:0]    dq_head;
wire              rd_hs = rd_req_valid & rd_req_ready;
wire [OF_LOG2:0]  wr_pop_cnt;     // atoms the writer takes from the output FIFO this cycle

// window rows of the current output row
wire signed [19:0] in_h_s  = {6'd0, in_h};
wire signed [19:0] in_w_s  = {6'd0, in_w};
wire signed [19:0] wy_end  = rg_wy + $signed({15'd0, kh});
wire signed [19:0] y0      = rg_wy[19] ? 20'sd0 : rg_wy;
wire signed [19:0] y1e     = (wy_end > in_h_s) ? in_h_s : wy_end;
wire signed [19:0] nrows   = y1e - y0;
wire               row_ign = (nrows <= 20'sd0);
wire [13:0]        y0c     = (y0 >= in_h_s) ? (in_h - 14'd1) : y0[13:0];
wire [AW-1:0]      row0    = rg_surf + {{(AW-14){1'b0}}, y0c} * src_ls;

// window columns of the current output column
wire signed [19:0] wx_end  = rg_wx + $signed({15'd0, kw});
wire signed [19:0] x0      = rg_wx[19] ? 20'sd0 : rg_wx;
wire signed [19:0] x1e     = (wx_end > in_w_s) ? in_w_s : wx_end;
wire signed [19:0] ncols   = x1e - x0;
wire               col_ign = (ncols <= 20'sd0);
wire [13:0]        x0c     = (x0 >= in_w_s) ? (in_w - 14'd1) : x0[13:0];
wire               pix_ign = rg_rign | col_ign;
wire [4:0]         pix_cols = pix_ign ? 5'd1 : ncols[4:0];
wire [4:0]         pix_rows = pix_ign ? 5'd1 : rg_rows;
wire [AW-1:0]      pix_addr = rg_row0 + ({{(AW-14){1'b0}}, x0c} << ABL);

// padding term of an AVERAGE window: rows_real*PAD[n] + kw*PAD[m] (mod 2^16)
wire [4:0]  pad_n = kw - ncols[4:0];
wire [4:0]  pad_m = kh - rg_rows;
reg  [15:0] pad_tn;
reg  [15:0] pad_tm;
always @(*) begin
    case (pad_n)
        5'd1: pad_tn = pad1;
        5'd2: pad_tn = pad2;
        5'd3: pad_tn = pad3;
        5'd4: pad_tn = pad4;
        5'd5: pad_tn = pad5;
        5'd6: pad_tn = pad6;
        5'd7: pad_tn = pad7;
        default: pad_tn = 16'd0;
    endcase
    case (pad_m)
        5'd1: pad_tm = pad1;
        5'd2: pad_tm = pad2;
        5'd3: pad_tm = pad3;
        5'd4: pad_tm = pad4;
        5'd5: pad_tm = pad5;
        5'd6: pad_tm = pad6;
        5'd7: pad_tm = pad7;
        default: pad_tm = 16'd0;
    endcase
end
wire [15:0] pix_pad = {11'd0, rg_rows} * pad_tn + {11'd0, kw} * pad_tm;

// slot of the request's first atom within its bus beat, and the beats it needs
wire [RLW-1:0] rg_s0;
generate
    if (R > 1) begin : g_rslot
        assign rg_s0 = rg_addr[ABL +: RL];
    end else begin : g_rslot1
        assign rg_s0 = 1'b0;
    end
endgenerate
wire [5:0]  rg_span = {{(6-RLW){1'b0}}, rg_s0} + {1'b0, rg_cols} - 6'd1;   // atom slots - 1
wire [5:0]  rg_beats_m1 = rg_span >> RL;
wire        rg_last = (rg_left == 5'd1);
wire        rg_end_pix  = rd_hs & rg_last;
wire        rg_end_row  = rg_end_pix & (rg_ox == ow_m1);
wire        rg_end_surf = rg_end_row & (rg_oy == oh_m1);
wire        rg_end_all  = rg_end_surf & (rg_s == s_last);

assign rd_req_valid = (rg_state == RG_ISSUE) & ~dq_full;
assign rd_req_addr  = rg_addr;
assign rd_req_len   = {{(LENW-6){1'b0}}, rg_beats_m1};
assign rd_rsp_ready = 1'b1;

wire pix_go = (rg_state == RG_PIX) & (resv != OF_DEPTH[OF_LOG2:0]);

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        rg_state <= RG_IDLE;
        rg_s     <= 14'd0;
        rg_oy    <= 14'd0;
        rg_ox    <= 14'd0;
        rg_wy    <= 20'sd0;
        rg_wx    <= 20'sd0;
        rg_surf  <= {AW{1'b0}};
        rg_row0  <= {AW{1'b0}};
        rg_rows  <= 5'd0;
        rg_rign  <= 1'b0;
        rg_addr  <= {AW{1'b0}};
        rg_cols  <= 5'd0;
        rg_left  <= 5'd0;
        rg_first <= 1'b0;
        rg_ign   <= 1'b0;
        rg_pad   <= 16'd0;
    end else begin
        case (rg_state)
            RG_IDLE: if (op_start && !on_flying) begin
                rg_state <= RG_ROW;
                rg_s     <= 14'd0;
                rg_oy    <= 14'd0;
                rg_ox    <= 14'd0;
                rg_wy    <= -$signed({17'd0, pad_t});
                rg_wx    <= -$signed({17'd0, pad_l});
                rg_surf  <= src_base;
            end
            RG_ROW: begin
                rg_row0  <= row0;
                rg_rows  <= row_ign ? 5'd1 : nrows[4:0];
                rg_rign  <= row_ign;
                rg_state <= RG_PIX;
            end
            RG_PIX: if (pix_go) begin
                rg_addr  <= pix_addr;
                rg_cols  <= pix_cols;
                rg_left  <= pix_rows;
                rg_first <= 1'b1;
                rg_ign   <= pix_ign;
                rg_pad   <= pix_pad;
                rg_state <= RG_ISSUE;
            end
            default: if (rd_hs) begin   // RG_ISSUE
                rg_addr  <= rg_addr + src_ls;
                rg_left  <= rg_left - 5'd1;
                rg_first <= 1'b0;
                if (rg_end_all) begin
                    rg_state <= RG_IDLE;
                end else if (rg_end_surf) begin
                    rg_s     <= rg_s + 14'd1;
                    rg_surf  <= rg_surf + src_ss;
                    rg_oy    <= 14'd0;
                    rg_wy    <= -$signed({17'd0, pad_t});
                    rg_ox    <= 14'd0;
                    rg_wx    <= -$signed({17'd0, pad_l});
                    rg_state <= RG_ROW;
                end else if (rg_end_row) begin
                    rg_oy    <= rg_oy + 14'd1;
                    rg_wy    <= rg_wy + $signed({15'd0, sh});
                    rg_ox    <= 14'd0;
                    rg_wx    <= -$signed({17'd0, pad_l});
                    rg_state <= RG_ROW;
                end else if (rg_end_pix) begin
                    rg_ox    <= rg_ox + 14'd1;
                    rg_wx    <= rg_wx + $signed({15'd0, sw});
                    rg_state <= RG_PIX;
                end
            end
        endcase
    end
end

// pixels in flight or waiting in the output FIFO
always @(posedge clk or negedge rstn) begin
    if (!rstn) resv <= {(OF_LOG2+1){1'b0}};
    else       resv <= resv + {{OF_LOG2{1'b0}}, pix_go} - wr_pop_cnt;
end

// descriptor of every request: {ignore, first, last, first slot, atoms, padding term}
dla_fifo #(.WIDTH(DQW), .DEPTH_LOG2(DQ_LOG2)) u_desc (
    .clk(clk), .rstn(rstn),
    .push(rd_hs), .push_data({rg_ign, rg_first, rg_last, rg_s0, rg_cols, rg_pad}),
    .pop(rd_rsp_valid & rd_rsp_last),
    .head(dq_head), .empty(dq_empty), .full(dq_full)
);

// ------------------------------------------------------------------------------------------------
// Response side: accumulate
// ------------------------------------------------------------------------------------------------
wire [15:0]    d_pad   = dq_head[15:0];
wire [4:0]     d_cols  = dq_head[20:16];
wire [RLW-1:0] d_s0    = dq_head[21 +: RLW];
wire           d_last  = dq_head[21 + RLW];
wire           d_first = dq_head[22 + RLW];
wire           d_ign   = dq_head[23 + RLW];

reg  [4:0]       rs_beat;           // beat of the current request
reg  [AB*16-1:0] acc;               // per lane: int16 sum, or max/min (sign-extended)
reg  [AB*16-1:0] acc_next;
reg  [R-1:0]     slot_ok;           // atoms of the request in this beat
wire [15:0]      acc_init = is_avg ? 16'h0000 : is_max ? 16'hFF80 : 16'h007F;
wire             rs_done = rd_rsp_valid & rd_rsp_last & d_last;

// slot j of beat b holds atom b*R + j - s0 of the request
generate
    if (R > 1) begin : g_slots
        genvar gj;
        for (gj = 0; gj < R; gj = gj + 1) begin : g_slot
            localparam [RL-1:0] SLOT = gj;
            wire [5+RL:0] idx = {1'b0, rs_beat, SLOT};
            wire [5+RL:0] lo  = {{6{1'b0}}, d_s0};
            wire [5+RL:0] hi  = lo + {{(RL+1){1'b0}}, d_cols};
            always @(*) slot_ok[gj] = ~d_ign & (idx >= lo) & (idx < hi);
        end
    end else begin : g_slots1
        always @(*) slot_ok = ~d_ign;
    end
endgenerate

integer j, l;
reg [15:0] x16;
reg [15:0] a16;
always @(*) begin
    x16 = 16'd0;
    a16 = 16'd0;
    acc_next = (d_first && rs_beat == 5'd0) ? {AB{acc_init}} : acc;
    for (j = 0; j < R; j = j + 1) begin
        if (slot_ok[j]) begin
            for (l = 0; l < AB; l = l + 1) begin
                x16 = {{8{rd_rsp_data[(j*AB+l)*8+7]}}, rd_rsp_data[(j*AB+l)*8 +: 8]};
                a16 = acc_next[l*16 +: 16];
                if (is_avg)                                   a16 = a16 + x16;
                else if (is_max && ($signed(x16) > $signed(a16))) a16 = x16;
                else if (!is_max && ($signed(x16) < $signed(a16))) a16 = x16;
                acc_next[l*16 +: 16] = a16;
            end
        end
    end
end

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        rs_beat <= 5'd0;
        acc     <= {(AB*16){1'b0}};
    end else if (rd_rsp_valid) begin
        acc     <= acc_next;
        rs_beat <= rd_rsp_last ? 5'd0 : rs_beat + 5'd1;
    end
end

// ------------------------------------------------------------------------------------------------
// Finish pipeline
// ------------------------------------------------------------------------------------------------
reg              f1_v;
reg [AB*16-1:0]  f1_sum;
reg              f2_v;
reg [AB*18-1:0]  f2_val;   // AVERAGE: rha(sum*RECIP_W, 16); MAX/MIN: the value
reg [AB*16-1:0]  f1_in;
reg [AB*18-1:0]  f2_in;
reg [ADW-1:0]    out_atom;

// rha(v, 16) = (v + 2^15 - (v < 0)) >>> 16 (round half away from zero); v < 0 exactly when the
// signed factor is negative (a zero product rounds to 0 either way)
function [17:0] rha_w;          // rha(s * RECIP_KERNEL_WIDTH, 16), 18 bits signed
    input [15:0] s;
    input [16:0] rw;
    reg   [33:0] p;
    begin
        p = {{18{s[15]}}, s} * {17'd0, rw};
        // floor(p / 2^16) + 1 when the low half reaches 2^15 (+1 for a negative product)
        rha_w = p[33:16] + {17'd0, s[15] ? (p[15:0] > 16'h8000) : (p[15:0] >= 16'h8000)};
    end
endfunction

function [7:0] rha_h;           // low byte of rha(v * RECIP_KERNEL_HEIGHT, 16)
    input [17:0] v;
    input [16:0] rh;
    reg   [23:0] p;             // the low byte of the result needs only 24 product bits
    begin
        p = {{6{v[17]}}, v} * {7'd0, rh};
        rha_h = p[23:16] + {7'd0, v[17] ? (p[15:0] > 16'h8000) : (p[15:0] >= 16'h8000)};
    end
endfunction

integer fl;
always @(*) begin
    for (fl = 0; fl < AB; fl = fl + 1) begin
        f1_in[fl*16 +: 16] = is_avg ? acc_next[fl*16 +: 16] + d_pad : acc_next[fl*16 +: 16];
        f2_in[fl*18 +: 18] = is_avg ? rha_w(f1_sum[fl*16 +: 16], rcp_w)
                                    : {{2{f1_sum[fl*16+15]}}, f1_sum[fl*16 +: 16]};
        out_atom[fl*8 +: 8] = is_avg ? rha_h(f2_val[fl*18 +: 18], rcp_h) : f2_val[fl*18 +: 8];
    end
end

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        f1_v   <= 1'b0;
        f1_sum <= {(AB*16){1'b0}};
        f2_v   <= 1'b0;
        f2_val <= {(AB*18){1'b0}};
    end else begin
        f1_v <= rs_done;
        if (rs_done) f1_sum <= f1_in;
        f2_v <= f1_v;
        if (f1_v) f2_val <= f2_in;
    end
end

// ------------------------------------------------------------------------------------------------
// Output FIFO (flat storage, the writer peeks up to R atoms from the head)
// ------------------------------------------------------------------------------------------------
reg [OF_DEPTH*ADW-1:0] of_mem;
reg [OF_LOG2-1:0]      of_wptr;
reg [OF_LOG2-1:0]      of_rptr;
reg [OF_LOG2:0]        of_count;

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        of_mem   <= {(OF_DEPTH*ADW){1'b0}};
        of_wptr  <= {OF_LOG2{1'b0}};
        of_rptr  <= {OF_LOG2{1'b0}};
        of_count <= {(OF_LOG2+1){1'b0}};
    end else begin
        if (f2_v) begin
            of_mem[of_wptr*ADW +: ADW] <= out_atom;
            of_wptr <= of_wptr + {{(OF_LOG2-1){1'b0}}, 1'b1};
        end
        of_rptr  <= of_rptr + wr_pop_cnt[OF_LOG2-1:0];
        of_count <= of_count + {{OF_LOG2{1'b0}}, f2_v} - wr_pop_cnt;
    end
end

// ------------------------------------------------------------------------------------------------
// Writer
// ------------------------------------------------------------------------------------------------
localparam [2:0] W_IDLE = 3'd0, W_RUN = 3'd1, W_REQ = 3'd2, W_DATA = 3'd3, W_FLUSH = 3'd4;

reg  [2:0]       w_state;
reg  [13:0]      w_s;
reg  [13:0]      w_oy;
reg  [13:0]      w_ox;
reg  [AW-1:0]    w_surf;      // address of output surface w_s
reg  [AW-1:0]    w_row;       // address of output line (w_s, w_oy)
reg  [AW-1:0]    w_addr;
reg  [5:0]       w_len;       // beats - 1
reg  [OF_LOG2:0] w_run;       // atoms of the current request
reg  [OF_LOG2:0] w_left;      // atoms still to send
reg              w_first;     // the next beat is the request's first

wire [13:0]      w_rem     = ow_m1 - w_ox + 14'd1;
wire [OF_LOG2:0] run_len   = (w_rem > RUN_MAX) ? RUN_MAX[OF_LOG2:0] : w_rem[OF_LOG2:0];
wire [AW-1:0]    run_addr  = w_row + ({{(AW-14){1'b0}}, w_ox} << ABL);
wire [RLW-1:0]   run_s0;
wire [RLW-1:0]   w_s0;
generate
    if (R > 1) begin : g_wslot
        assign run_s0 = run_addr[ABL +: RL];
        assign w_s0   = w_addr[ABL +: RL];
    end else begin : g_wslot1
        assign run_s0 = 1'b0;
        assign w_s0   = 1'b0;
    end
endgenerate
wire [5:0] run_span = {{(6-RLW){1'b0}}, run_s0} + {{(5-OF_LOG2){1'b0}}, run_len} - 6'd1;
wire       w_hs     = wr_dat_valid & wr_dat_ready;

// beat packing: slot j carries FIFO atom (j - j0) from the head, j0 = first slot of this beat
reg [DW-1:0]     w_data;
reg [MB-1:0]     w_strb;
reg [OF_LOG2:0]  w_cnt;       // atoms in this beat
integer          wj;
integer          wk;
integer          wj0;
reg [OF_LOG2-1:0] w_slot;
always @(*) begin
    w_data = {DW{1'b0}};
    w_strb = {MB{1'b0}};
    w_cnt  = {(OF_LOG2+1){1'b0}};
    w_slot = {OF_LOG2{1'b0}};
    wj0    = w_first ? {{(32-RLW){1'b0}}, w_s0} : 0;
    for (wj = 0; wj < R; wj = wj + 1) begin
        wk = wj - wj0;
        if (wj >= wj0 && wk < {{(31-OF_LOG2){1'b0}}, w_left}) begin
            w_slot                = of_rptr + wk[OF_LOG2-1:0];
            w_data[wj*ADW +: ADW] = of_mem[w_slot*ADW +: ADW];
            w_strb[wj*AB +: AB]   = {AB{1'b1}};
            w_cnt                 = w_cnt + {{OF_LOG2{1'b0}}, 1'b1};
        end
    end
end

assign wr_req_valid = (w_state == W_REQ);
assign wr_req_addr  = w_addr;
assign wr_req_len   = {{(LENW-6){1'b0}}, w_len};
assign wr_dat_valid = (w_state == W_DATA);
assign wr_dat_data  = w_data;
assign wr_dat_strb  = w_strb;
assign wr_pop_cnt   = w_hs ? w_cnt : {(OF_LOG2+1){1'b0}};

wire w_end_run  = w_hs & (w_left == w_cnt);
wire w_end_row  = (w_ox + {{(13-OF_LOG2){1'b0}}, w_run} == ow_m1 + 14'd1);
wire w_end_surf = w_end_row & (w_oy == oh_m1);
wire w_end_all  = w_end_surf & (w_s == s_last);

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        w_state <= W_IDLE;
        w_s     <= 14'd0;
        w_oy    <= 14'd0;
        w_ox    <= 14'd0;
        w_surf  <= {AW{1'b0}};
        w_row   <= {AW{1'b0}};
        w_addr  <= {AW{1'b0}};
        w_len   <= 6'd0;
        w_run   <= {(OF_LOG2+1){1'b0}};
        w_left  <= {(OF_LOG2+1){1'b0}};
        w_first <= 1'b0;
        op_done <= 1'b0;
    end else begin
        op_done <= 1'b0;
        case (w_state)
            W_IDLE: if (op_start) begin
                w_state <= on_flying ? W_FLUSH : W_RUN;
                w_s     <= 14'd0;
                w_oy    <= 14'd0;
                w_ox    <= 14'd0;
                w_surf  <= dst_base;
                w_row   <= dst_base;
            end
            W_RUN: if (of_count >= run_len) begin
                w_addr  <= run_addr;
                w_len   <= run_span >> RL;
                w_run   <= run_len;
                w_left  <= run_len;
                w_first <= 1'b1;
                w_state <= W_REQ;
            end
            W_REQ: if (wr_req_ready) w_state <= W_DATA;
            W_DATA: if (w_hs) begin
                w_left  <= w_left - w_cnt;
                w_first <= 1'b0;
                if (w_end_run) begin
                    if (w_end_all) begin
                        w_state <= W_FLUSH;
                    end else if (w_end_surf) begin
                        w_s     <= w_s + 14'd1;
                        w_oy    <= 14'd0;
                        w_ox    <= 14'd0;
                        w_surf  <= w_surf + dst_ss;
                        w_row   <= w_surf + dst_ss;
                        w_state <= W_RUN;
                    end else if (w_end_row) begin
                        w_oy    <= w_oy + 14'd1;
                        w_ox    <= 14'd0;
                        w_row   <= w_row + dst_ls;
                        w_state <= W_RUN;
                    end else begin
                        w_ox    <= w_ox + {{(13-OF_LOG2){1'b0}}, w_run};
                        w_state <= W_RUN;
                    end
                end
            end
            W_FLUSH: if (wr_idle && !rep_busy && rg_state == RG_IDLE) begin
                op_done <= 1'b1;
                w_state <= W_IDLE;
            end
            default: w_state <= W_IDLE;
        endcase
    end
end

// the descriptor FIFO is never empty when a beat arrives (beats answer our own requests)
wire unused_dq = &{1'b0, dq_empty, d_cols, d_s0};

endmodule
