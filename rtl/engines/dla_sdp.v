// SDP engine (SDP + SDP_RDMA), int8, input from memory, output to memory; bit-exact to
// golden/engines/sdp.py for X1 (BS) and X2 (BN) with register or memory operands and the output CVT.
// Interface: rtl/README.md, "Engine interface". Read client i (flat vectors, i*width +: width):
// 0 MRDMA (input cube), 1 BRDMA (X1 operands), 2 NRDMA (X2 operands), 3 ERDMA (Y operands, unused).
//
// Data flow (one atom = ATOM lanes of one surface at one (h, w); all lanes, padding included):
//
//   MRDMA  dla_sdp_rd --atoms------------\
//   BRDMA  dla_sdp_rd --operand units---- > controller --> ATOM x dla_sdp_lane --> out FIFO --> dla_sdp_wr --> DMA
//   NRDMA  dla_sdp_rd --operand units----/   (s, h, w)      X1 | X2 | CVT (8 cycles)
//
// - The controller walks the cube surface by surface, line by line, and fires one atom per cycle
//   when its input atom, its operand units (per element: one per atom; per kernel: one per surface,
//   held for the whole surface) and a free slot of the output FIFO are there (credits cover the
//   lanes' fixed latency, so the datapath never stalls).
// - A MEM operand is read only if the stage uses it (stage and its ALU/MUL not bypassed, source MEM),
//   as golden does. An operand unit is ATOM elements of 1, 2 or 4 bytes (DATA_SIZE x components;
//   DATA_USE=BOTH: ALU component then MUL component); 1-byte components are sign-extended.
// - D_PERF_OUT_SATURATION is reported with op_done when PERF_SAT_EN (golden reports nothing else).
// - op_done after the last atom's write is answered (dla_sdp_wr busy falls on wr_idle).
//
// Not implemented here:
// - Y (EW) and its LUT. Golden raises UnsupportedError where the config lacks them (the nv_small
//   family: such traces are N/A). On configs that have them a non-bypassed EW stage is ignored
//   (X1 -> X2 -> CVT still run and write), which differs from golden.
// - int16/fp16 (golden: UnsupportedError; processed as int8 here), batches and Winograd
//   (UnsupportedError; ignored here), SDP fed on the fly by the conv pipeline (NV_nvdla.v never
//   starts it), output to PDP on the fly (no data path to PDP yet: with OUTPUT_DST=PDP the results
//   are computed and dropped, nothing is written, op_done as usual), CV-SRAM (RAM_TYPE ignored: every
//   access goes to the one AXI port).
// - Layers golden rejects with ConfigError (e.g. a MEM source whose DMA is disabled or does not
//   deliver that component): the operand stream is read as configured anyway, so nothing hangs.
`include "dla_config.vh"
`include "nvdla_regs.vh"
`include "dla_defs.vh"

module dla_sdp (
    input  wire                                                  clk,
    input  wire                                                  rstn,
    // operation control
    input  wire                                                  op_start,
    output reg                                                   op_done,
    input  wire [`NVDLA_SDP_VEC_WIDTH-1:0]                       sdp_regs,       // SDP consumer group
    input  wire [`NVDLA_SDP_RDMA_VEC_WIDTH-1:0]                  sdp_rdma_regs,  // SDP_RDMA consumer group
    // status reports into the consumer groups (read-only D_ registers)
    output wire                                                  sdp_stat_we,
    output wire [9:0]                                            sdp_stat_word,
    output wire [31:0]                                           sdp_stat_data,
    output wire                                                  sdp_rdma_stat_we,
    output wire [9:0]                                            sdp_rdma_stat_word,
    output wire [31:0]                                           sdp_rdma_stat_data,
    // DMA read clients
    output wire [`DLA_SDP_RD_CLIENTS-1:0]                        rd_req_valid,
    input  wire [`DLA_SDP_RD_CLIENTS-1:0]                        rd_req_ready,
    output wire [`DLA_SDP_RD_CLIENTS*`DLA_MEM_ADDR_WIDTH-1:0]    rd_req_addr,
    output wire [`DLA_SDP_RD_CLIENTS*`DLA_DMA_LEN_WIDTH-1:0]     rd_req_len,
    input  wire [`DLA_SDP_RD_CLIENTS-1:0]                        rd_rsp_valid,
    output wire [`DLA_SDP_RD_CLIENTS-1:0]                        rd_rsp_ready,
    input  wire [`DLA_MEMIF_WIDTH-1:0]                           rd_rsp_data,
    input  wire                                                  rd_rsp_last,
    // DMA write client
    output wire                                                  wr_req_valid,
    input  wire                                                  wr_req_ready,
    output wire [`DLA_MEM_ADDR_WIDTH-1:0]                        wr_req_addr,
    output wire [`DLA_DMA_LEN_WIDTH-1:0]                         wr_req_len,
    output wire                                                  wr_dat_valid,
    input  wire                                                  wr_dat_ready,
    output wire [`DLA_MEMIF_WIDTH-1:0]                           wr_dat_data,
    output wire [`DLA_MEMIF_BYTES-1:0]                           wr_dat_strb,
    input  wire                                                  wr_cpl,
    input  wire                                                  wr_idle
);

localparam AW    = `DLA_MEM_ADDR_WIDTH;
localparam DW    = `DLA_MEMIF_WIDTH;
localparam MBL   = `DLA_MEMIF_BYTES_LOG2;
localparam LENW  = `DLA_DMA_LEN_WIDTH;
localparam ATOM  = `DLA_ATOM_BYTES;
localparam AL    = $clog2(ATOM);
localparam [2:0] AL3 = AL[2:0];
localparam OPU   = 4 * ATOM;       // largest operand unit: ATOM x 2 components x 2 bytes
localparam LW    = 48;             // segment lengths in bytes
localparam LAT   = 8;              // dla_sdp_lane latency
localparam OFL2  = 4;              // output FIFO depth log2 (> LAT for one atom per cycle)
localparam [AW-1:0] AU_M1 = `DLA_ADDRESS_UNIT - 1;
localparam [31:0]   SU_M1 = `DLA_ADDRESS_UNIT - 1;
localparam [OFL2:0] OF_DEPTH = 1 << OFL2;

// =====================================================================================
// configuration (consumer groups: stable from op_start to op_done)
// =====================================================================================
wire [12:0] w_m1 = sdp_regs[`NVDLA_SDP_D_DATA_CUBE_WIDTH_WIDTH_VEC];
wire [12:0] h_m1 = sdp_regs[`NVDLA_SDP_D_DATA_CUBE_HEIGHT_HEIGHT_VEC];
wire [12:0] c_m1 = sdp_regs[`NVDLA_SDP_D_DATA_CUBE_CHANNEL_CHANNEL_VEC];
wire [12:0] s_m1 = c_m1 >> AL;                       // surfaces - 1
wire [13:0] n_w  = {1'b0, w_m1} + 14'd1;
wire [13:0] n_h  = {1'b0, h_m1} + 14'd1;
wire [13:0] n_s  = {1'b0, s_m1} + 14'd1;

// output to PDP on the fly is not wired: compute and drop
wire to_mem = (sdp_regs[`NVDLA_SDP_D_FEATURE_MODE_CFG_OUTPUT_DST_VEC] != `NVDLA_SDP_D_FEATURE_MODE_CFG_OUTPUT_DST_PDP);

// X stages: {bypass, alu_bypass, alu_algo, alu_shift, mul_bypass, mul_prelu, mul_shift[5:0], relu_bypass}
wire [7:0] bs_mul_shift8 = sdp_regs[`NVDLA_SDP_D_DP_BS_MUL_CFG_BS_MUL_SHIFT_VALUE_VEC];
wire [7:0] bn_mul_shift8 = sdp_regs[`NVDLA_SDP_D_DP_BN_MUL_CFG_BN_MUL_SHIFT_VALUE_VEC];
wire [18:0] bs_cfg = {sdp_regs[`NVDLA_SDP_D_DP_BS_CFG_BS_BYPASS_VEC], sdp_regs[`NVDLA_SDP_D_DP_BS_CFG_BS_ALU_BYPASS_VEC],
                      sdp_regs[`NVDLA_SDP_D_DP_BS_CFG_BS_ALU_ALGO_VEC], sdp_regs[`NVDLA_SDP_D_DP_BS_ALU_CFG_BS_ALU_SHIFT_VALUE_VEC],
                      sdp_regs[`NVDLA_SDP_D_DP_BS_CFG_BS_MUL_BYPASS_VEC], sdp_regs[`NVDLA_SDP_D_DP_BS_CFG_BS_MUL_PRELU_VEC],
                      bs_mul_shift8[5:0], sdp_regs[`NVDLA_SDP_D_DP_BS_CFG_BS_RELU_BYPASS_VEC]};
wire [18:0] bn_cfg = {sdp_regs[`NVDLA_SDP_D_DP_BN_CFG_BN_BYPASS_VEC], sdp_regs[`NVDLA_SDP_D_DP_BN_CFG_BN_ALU_BYPASS_VEC],
                      sdp_regs[`NVDLA_SDP_D_DP_BN_CFG_BN_ALU_ALGO_VEC], sdp_regs[`NVDLA_SDP_D_DP_BN_ALU_CFG_BN_ALU_SHIFT_VALUE_VEC],
                      sdp_regs[`NVDLA_SDP_D_DP_BN_CFG_BN_MUL_BYPASS_VEC], sdp_regs[`NVDLA_SDP_D_DP_BN_CFG_BN_MUL_PRELU_VEC],
                      bn_mul_shift8[5:0], sdp_regs[`NVDLA_SDP_D_DP_BN_CFG_BN_RELU_BYPASS_VEC]};
wire        bs_alu_mem = sdp_regs[`NVDLA_SDP_D_DP_BS_ALU_CFG_BS_ALU_SRC_VEC];
wire        bs_mul_mem = sdp_regs[`NVDLA_SDP_D_DP_BS_MUL_CFG_BS_MUL_SRC_VEC];
wire        bn_alu_mem = sdp_regs[`NVDLA_SDP_D_DP_BN_ALU_CFG_BN_ALU_SRC_VEC];
wire        bn_mul_mem = sdp_regs[`NVDLA_SDP_D_DP_BN_MUL_CFG_BN_MUL_SRC_VEC];
wire [15:0] bs_alu_reg = sdp_regs[`NVDLA_SDP_D_DP_BS_ALU_SRC_VALUE_BS_ALU_OPERAND_VEC];
wire [15:0] bs_mul_reg = sdp_regs[`NVDLA_SDP_D_DP_BS_MUL_SRC_VALUE_BS_MUL_OPERAND_VEC];
wire [15:0] bn_alu_reg = sdp_regs[`NVDLA_SDP_D_DP_BN_ALU_SRC_VALUE_BN_ALU_OPERAND_VEC];
wire [15:0] bn_mul_reg = sdp_regs[`NVDLA_SDP_D_DP_BN_MUL_SRC_VALUE_BN_MUL_OPERAND_VEC];
// golden XConfig.uses_alu_mem / uses_mul_mem
wire b_use = ~bs_cfg[18] & ((~bs_cfg[17] & bs_alu_mem) | (~bs_cfg[8] & bs_mul_mem));
wire n_use = ~bn_cfg[18] & ((~bn_cfg[17] & bn_alu_mem) | (~bn_cfg[8] & bn_mul_mem));

wire [31:0] cvt_offset = sdp_regs[`NVDLA_SDP_D_CVT_OFFSET_CVT_OFFSET_VEC];
wire [15:0] cvt_scale  = sdp_regs[`NVDLA_SDP_D_CVT_SCALE_CVT_SCALE_VEC];
wire [5:0]  cvt_shift  = sdp_regs[`NVDLA_SDP_D_CVT_SHIFT_CVT_SHIFT_VEC];
wire        perf_sat   = sdp_regs[`NVDLA_SDP_D_PERF_ENABLE_PERF_SAT_EN_VEC];

// operand DMAs: element bytes = 2^bpel (DATA_SIZE, x2 with DATA_USE=BOTH)
wire [1:0] b_use_f = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BRDMA_CFG_BRDMA_DATA_USE_VEC];
wire [1:0] n_use_f = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_NRDMA_CFG_NRDMA_DATA_USE_VEC];
wire       b_both  = (b_use_f == `NVDLA_SDP_RDMA_D_BRDMA_CFG_BRDMA_DATA_USE_BOTH);
wire       n_both  = (n_use_f == `NVDLA_SDP_RDMA_D_NRDMA_CFG_NRDMA_DATA_USE_BOTH);
wire       b_size2 = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BRDMA_CFG_BRDMA_DATA_SIZE_VEC];
wire       n_size2 = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_NRDMA_CFG_NRDMA_DATA_SIZE_VEC];
wire       b_pe    = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BRDMA_CFG_BRDMA_DATA_MODE_VEC];
wire       n_pe    = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_NRDMA_CFG_NRDMA_DATA_MODE_VEC];
wire [1:0] b_bpel  = {1'b0, b_size2} + {1'b0, b_both};
wire [1:0] n_bpel  = {1'b0, n_size2} + {1'b0, n_both};
wire [7:0] b_ubytes = 8'd1 << (AL3 + {1'b0, b_bpel});
wire [7:0] n_ubytes = 8'd1 << (AL3 + {1'b0, n_bpel});

// byte addresses and strides (low bits below the address unit ignored, golden.dma.dma_bytes)
wire [63:0] src_a64 = {sdp_rdma_regs[`NVDLA_SDP_RDMA_D_SRC_BASE_ADDR_HIGH_SRC_BASE_ADDR_HIGH_VEC], sdp_rdma_regs[`NVDLA_SDP_RDMA_D_SRC_BASE_ADDR_LOW_SRC_BASE_ADDR_LOW_VEC]};
wire [63:0] bs_a64  = {sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BS_BASE_ADDR_HIGH_BS_BASE_ADDR_HIGH_VEC], sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BS_BASE_ADDR_LOW_BS_BASE_ADDR_LOW_VEC]};
wire [63:0] bn_a64  = {sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BN_BASE_ADDR_HIGH_BN_BASE_ADDR_HIGH_VEC], sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BN_BASE_ADDR_LOW_BN_BASE_ADDR_LOW_VEC]};
wire [63:0] dst_a64 = {sdp_regs[`NVDLA_SDP_D_DST_BASE_ADDR_HIGH_DST_BASE_ADDR_HIGH_VEC], sdp_regs[`NVDLA_SDP_D_DST_BASE_ADDR_LOW_DST_BASE_ADDR_LOW_VEC]};
wire [AW-1:0] src_base = src_a64[AW-1:0] & ~AU_M1;
wire [AW-1:0] bs_base  = bs_a64[AW-1:0] & ~AU_M1;
wire [AW-1:0] bn_base  = bn_a64[AW-1:0] & ~AU_M1;
wire [AW-1:0] dst_base = dst_a64[AW-1:0] & ~AU_M1;
wire [31:0] src_line = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_SRC_LINE_STRIDE_SRC_LINE_STRIDE_VEC] & ~SU_M1;
wire [31:0] src_surf = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_SRC_SURFACE_STRIDE_SRC_SURFACE_STRIDE_VEC] & ~SU_M1;
wire [31:0] bs_line  = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BS_LINE_STRIDE_BS_LINE_STRIDE_VEC] & ~SU_M1;
wire [31:0] bs_surf  = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BS_SURFACE_STRIDE_BS_SURFACE_STRIDE_VEC] & ~SU_M1;
wire [31:0] bn_line  = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BN_LINE_STRIDE_BN_LINE_STRIDE_VEC] & ~SU_M1;
wire [31:0] bn_surf  = sdp_rdma_regs[`NVDLA_SDP_RDMA_D_BN_SURFACE_STRIDE_BN_SURFACE_STRIDE_VEC] & ~SU_M1;
wire [31:0] dst_line = sdp_regs[`NVDLA_SDP_D_DST_LINE_STRIDE_DST_LINE_STRIDE_VEC] & ~SU_M1;
wire [31:0] dst_surf = sdp_regs[`NVDLA_SDP_D_DST_SURFACE_STRIDE_DST_SURFACE_STRIDE_VEC] & ~SU_M1;

// segment lengths: a line is W units; a per-kernel operand vector is one segment of S units
wire [LW-1:0] w_l = {{(LW-14){1'b0}}, n_w};
wire [LW-1:0] s_l = {{(LW-14){1'b0}}, n_s};
wire [LW-1:0] feat_line = w_l << AL;
wire [LW-1:0] b_line = b_pe ? (w_l << (AL3 + {1'b0, b_bpel})) : (s_l << (AL3 + {1'b0, b_bpel}));
wire [LW-1:0] n_line = n_pe ? (w_l << (AL3 + {1'b0, n_bpel})) : (s_l << (AL3 + {1'b0, n_bpel}));

// =====================================================================================
// read clients
// =====================================================================================
wire               in_valid, b_valid, n_valid;
wire               in_ready, b_ready, n_ready;
wire [ATOM*8-1:0]  in_data;
wire [OPU*8-1:0]   b_data, n_data;

dla_sdp_rd #(.AW(AW), .DW(DW), .MBL(MBL), .UMAX(ATOM), .FLOG2(5), .LENW(LENW), .LW(LW)) u_mrdma (
    .clk(clk), .rstn(rstn), .start(op_start),
    .base(src_base), .line_stride(src_line), .surf_stride(src_surf), .lines(n_h), .surfs(n_s),
    .line_bytes(feat_line), .ubytes(8'd1 << AL),
    .req_valid(rd_req_valid[0]), .req_ready(rd_req_ready[0]),
    .req_addr(rd_req_addr[0 +: AW]), .req_len(rd_req_len[0 +: LENW]),
    .rsp_valid(rd_rsp_valid[0]), .rsp_ready(rd_rsp_ready[0]), .rsp_data(rd_rsp_data),
    .out_valid(in_valid), .out_ready(in_ready), .out_data(in_data)
);

dla_sdp_rd #(.AW(AW), .DW(DW), .MBL(MBL), .UMAX(OPU), .FLOG2(5), .LENW(LENW), .LW(LW)) u_brdma (
    .clk(clk), .rstn(rstn), .start(op_start & b_use),
    .base(bs_base), .line_stride(bs_line), .surf_stride(bs_surf),
    .lines(b_pe ? n_h : 14'd1), .surfs(b_pe ? n_s : 14'd1),
    .line_bytes(b_line), .ubytes(b_ubytes),
    .req_valid(rd_req_valid[1]), .req_ready(rd_req_ready[1]),
    .req_addr(rd_req_addr[AW +: AW]), .req_len(rd_req_len[LENW +: LENW]),
    .rsp_valid(rd_rsp_valid[1]), .rsp_ready(rd_rsp_ready[1]), .rsp_data(rd_rsp_data),
    .out_valid(b_valid), .out_ready(b_ready), .out_data(b_data)
);

dla_sdp_rd #(.AW(AW), .DW(DW), .MBL(MBL), .UMAX(OPU), .FLOG2(5), .LENW(LENW), .LW(LW)) u_nrdma (
    .clk(clk), .rstn(rstn), .start(op_start & n_use),
    .base(bn_base), .line_stride(bn_line), .surf_stride(bn_surf),
    .lines(n_pe ? n_h : 14'd1), .surfs(n_pe ? n_s : 14'd1),
    .line_bytes(n_line), .ubytes(n_ubytes),
    .req_valid(rd_req_valid[2]), .req_ready(rd_req_ready[2]),
    .req_addr(rd_req_addr[2*AW +: AW]), .req_len(rd_req_len[2*LENW +: LENW]),
    .rsp_valid(rd_rsp_valid[2]), .rsp_ready(rd_rsp_ready[2]), .rsp_data(rd_rsp_data),
    .out_valid(n_valid), .out_ready(n_ready), .out_data(n_data)
);

// ERDMA (Y operands): no EW unit here
assign rd_req_valid[3]              = 1'b0;
assign rd_req_addr[3*AW +: AW]      = {AW{1'b0}};
assign rd_req_len[3*LENW +: LENW]   = {LENW{1'b0}};
assign rd_rsp_ready[3]              = 1'b1;

// =====================================================================================
// controller: one atom per cycle in (surface, line, pixel) order
// =====================================================================================
reg        act;        // operation in progress
reg        run;        // atoms left to fire
reg [12:0] cw, ch, cs;
reg [OFL2:0] ocred;    // output FIFO slots not yet promised to an atom

wire first_in_surf = (cw == 13'd0) & (ch == 13'd0);
wire need_b = b_use & (b_pe | first_in_surf);
wire need_n = n_use & (n_pe | first_in_surf);
wire fire   = run & in_valid & (~need_b | b_valid) & (~need_n | n_valid) & (ocred != {(OFL2+1){1'b0}});
assign in_ready = fire;
assign b_ready  = fire & need_b;
assign n_ready  = fire & need_n;
wire last_atom = (cw == w_m1) & (ch == h_m1) & (cs == s_m1);

reg              s0_v;
reg [ATOM*8-1:0] s0_x;
reg [OPU*8-1:0]  s0_b, s0_n, b_hold, n_hold;
reg [LAT-1:0]    vpipe;

wire of_push, of_pop, of_empty, of_full;
wire [ATOM*8-1:0] of_head;

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        run    <= 1'b0;
        cw     <= 13'd0;
        ch     <= 13'd0;
        cs     <= 13'd0;
        s0_v   <= 1'b0;
        s0_x   <= {(ATOM*8){1'b0}};
        s0_b   <= {(OPU*8){1'b0}};
        s0_n   <= {(OPU*8){1'b0}};
        b_hold <= {(OPU*8){1'b0}};
        n_hold <= {(OPU*8){1'b0}};
        vpipe  <= {LAT{1'b0}};
        ocred  <= OF_DEPTH;
    end else begin
        if (op_start) begin
            run <= 1'b1;
            cw  <= 13'd0;
            ch  <= 13'd0;
            cs  <= 13'd0;
        end else if (fire) begin
            if (cw != w_m1) begin
                cw <= cw + 13'd1;
            end else begin
                cw <= 13'd0;
                if (ch != h_m1) begin
                    ch <= ch + 13'd1;
                end else begin
                    ch <= 13'd0;
                    cs <= cs + 13'd1;
                end
            end
            if (last_atom) run <= 1'b0;
        end
        s0_v <= fire;
        if (fire) begin
            s0_x <= in_data;
            s0_b <= need_b ? b_data : b_hold;
            s0_n <= need_n ? n_data : n_hold;
        end
        if (fire & need_b) b_hold <= b_data;
        if (fire & need_n) n_hold <= n_data;
        vpipe <= {vpipe[LAT-2:0], s0_v};
        ocred <= ocred - {{OFL2{1'b0}}, fire} + {{OFL2{1'b0}}, of_pop};
    end
end

// =====================================================================================
// lanes
// =====================================================================================
wire [ATOM*8-1:0] y_atom;
wire [ATOM-1:0]   y_sat;

// one operand element of lane i from a unit of 2^bpel-byte elements
function [31:0] operand_pair;   // {mul, alu}, each signed 16 bits
    input [OPU*8-1:0] unit;
    input integer     lane;
    input [1:0]       bpel;
    input             both;
    reg   [15:0]      first, second;
    begin
        case (bpel)
            2'd0: begin
                first  = {{8{unit[8*lane+7]}}, unit[8*lane +: 8]};
                second = first;
            end
            2'd1: begin
                if (both) begin   // two 1-byte components
                    first  = {{8{unit[16*lane+7]}}, unit[16*lane +: 8]};
                    second = {{8{unit[16*lane+15]}}, unit[16*lane+8 +: 8]};
                end else begin    // one 2-byte component
                    first  = unit[16*lane +: 16];
                    second = first;
                end
            end
            default: begin        // two 2-byte components
                first  = unit[32*lane +: 16];
                second = unit[32*lane+16 +: 16];
            end
        endcase
        operand_pair = {both ? second : first, first};
    end
endfunction

genvar g;
generate
    for (g = 0; g < ATOM; g = g + 1) begin : g_lane
        wire [31:0] b_pair = operand_pair(s0_b, g, b_bpel, b_both);
        wire [31:0] n_pair = operand_pair(s0_n, g, n_bpel, n_both);
        dla_sdp_lane u_lane (
            .clk(clk), .rstn(rstn), .bs_cfg(bs_cfg), .bn_cfg(bn_cfg),
            .cvt_offset(cvt_offset), .cvt_scale(cvt_scale), .cvt_shift(cvt_shift),
            .x_in(s0_x[8*g +: 8]),
            .bs_alu_op(bs_alu_mem ? b_pair[15:0] : bs_alu_reg),
            .bs_mul_op(bs_mul_mem ? b_pair[31:16] : bs_mul_reg),
            .bn_alu_op(bn_alu_mem ? n_pair[15:0] : bn_alu_reg),
            .bn_mul_op(bn_mul_mem ? n_pair[31:16] : bn_mul_reg),
            .y_out(y_atom[8*g +: 8]), .sat(y_sat[g])
        );
    end
endgenerate

// =====================================================================================
// output FIFO, saturation count, writer
// =====================================================================================
assign of_push = vpipe[LAT-1];
dla_fifo #(.WIDTH(ATOM*8), .DEPTH_LOG2(OFL2)) u_out (
    .clk(clk), .rstn(rstn), .push(of_push), .push_data(y_atom), .pop(of_pop),
    .head(of_head), .empty(of_empty), .full(of_full)
);

function [7:0] popcount;
    input [ATOM-1:0] bits;
    integer i;
    begin
        popcount = 8'd0;
        for (i = 0; i < ATOM; i = i + 1) popcount = popcount + {7'd0, bits[i]};
    end
endfunction

reg [31:0] sat_count;
always @(posedge clk or negedge rstn) begin
    if (!rstn)         sat_count <= 32'd0;
    else if (op_start) sat_count <= 32'd0;
    else if (of_push)  sat_count <= sat_count + {24'd0, popcount(y_sat)};
end

wire wr_busy;
wire wr_in_ready;
assign of_pop = ~of_empty & (to_mem ? wr_in_ready : 1'b1);

dla_sdp_wr #(.AW(AW), .DW(DW), .MBL(MBL), .UB(ATOM), .FLOG2(4), .LENW(LENW), .LW(LW)) u_wdma (
    .clk(clk), .rstn(rstn), .start(op_start & to_mem),
    .base(dst_base), .line_stride(dst_line), .surf_stride(dst_surf), .lines(n_h), .surfs(n_s),
    .line_bytes(feat_line), .busy(wr_busy),
    .in_valid(~of_empty & to_mem), .in_ready(wr_in_ready), .in_data(of_head),
    .req_valid(wr_req_valid), .req_ready(wr_req_ready), .req_addr(wr_req_addr), .req_len(wr_req_len),
    .dat_valid(wr_dat_valid), .dat_ready(wr_dat_ready), .dat_data(wr_dat_data), .dat_strb(wr_dat_strb),
    .idle(wr_idle)
);

// =====================================================================================
// completion and status
// =====================================================================================
wire finished = act & ~run & ~s0_v & (vpipe == {LAT{1'b0}}) & of_empty & ~wr_busy;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        act     <= 1'b0;
        op_done <= 1'b0;
    end else begin
        op_done <= 1'b0;
        if (op_start) begin
            act <= 1'b1;
        end else if (finished) begin
            act     <= 1'b0;
            op_done <= 1'b1;
        end
    end
end

assign sdp_stat_we        = op_done & perf_sat;
assign sdp_stat_word      = `NVDLA_SDP_D_PERF_OUT_SATURATION_WORD;
assign sdp_stat_data      = sat_count;
assign sdp_rdma_stat_we   = 1'b0;
assign sdp_rdma_stat_word = 10'd0;
assign sdp_rdma_stat_data = 32'd0;

// Register bits this engine does not look at (EW, LUT, precisions, RAM types, batch strides, ...),
// the unused DMA answers (ERDMA, rd_rsp_last, wr_cpl) and the address bits above AW.
wire unused_sdp = &{1'b0, sdp_regs, sdp_rdma_regs, src_a64, bs_a64, bn_a64, dst_a64, bs_mul_shift8,
                    bn_mul_shift8, rd_req_ready[3], rd_rsp_valid[3], rd_rsp_last, wr_cpl, of_full,
                    b_use_f, n_use_f};

endmodule
