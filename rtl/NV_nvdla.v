// Our open-source DLA, port-compatible with NVDLA's nv_small NV_nvdla (46 ports, same names and
// widths; the memory widths come from dla_config.vh). Microarchitecture: rtl/README.md.
//
//   CSB --> dla_csb_slave --> dla_regfile (generated) --consumer groups--> engines (PDP, SDP)
//                                 ^   |  OP_EN                                  |  DMA clients
//                       complete, |   v                                         v
//                       intr_set  dla_op_ctl (one per engine) <-- op_done    dla_axi_rd / dla_axi_wr --> AXI4
//
// Clocks: everything runs on dla_core_clk; dla_csb_clk is assumed to be the same clock (it is not
// used). Resets: dla_reset_rstn and direct_reset_ (both active low) are combined and synchronized.
// global_clk_ovr_on, tmc2slcg_disable_clock_gating, test_mode and nvdla_pwrbus_ram_*_pd are
// accepted and ignored (no clock gating, no RAM power control).
`include "dla_config.vh"
`include "nvdla_regs.vh"
`include "dla_defs.vh"

module NV_nvdla (
    input  wire                            dla_core_clk,
    input  wire                            dla_csb_clk,
    input  wire                            global_clk_ovr_on,
    input  wire                            tmc2slcg_disable_clock_gating,
    input  wire                            dla_reset_rstn,
    input  wire                            direct_reset_,
    input  wire                            test_mode,
    // CSB
    input  wire                            csb2nvdla_valid,
    output wire                            csb2nvdla_ready,
    input  wire [15:0]                     csb2nvdla_addr,
    input  wire [31:0]                     csb2nvdla_wdat,
    input  wire                            csb2nvdla_write,
    input  wire                            csb2nvdla_nposted,
    output wire                            nvdla2csb_valid,
    output wire [31:0]                     nvdla2csb_data,
    output wire                            nvdla2csb_wr_complete,
    // primary memory, AXI4
    output wire                            nvdla_core2dbb_aw_awvalid,
    input  wire                            nvdla_core2dbb_aw_awready,
    output wire [7:0]                      nvdla_core2dbb_aw_awid,
    output wire [3:0]                      nvdla_core2dbb_aw_awlen,
    output wire [`DLA_MEM_ADDR_WIDTH-1:0]  nvdla_core2dbb_aw_awaddr,
    output wire                            nvdla_core2dbb_w_wvalid,
    input  wire                            nvdla_core2dbb_w_wready,
    output wire [`DLA_MEMIF_WIDTH-1:0]     nvdla_core2dbb_w_wdata,
    output wire [`DLA_MEMIF_BYTES-1:0]     nvdla_core2dbb_w_wstrb,
    output wire                            nvdla_core2dbb_w_wlast,
    input  wire                            nvdla_core2dbb_b_bvalid,
    output wire                            nvdla_core2dbb_b_bready,
    input  wire [7:0]                      nvdla_core2dbb_b_bid,
    output wire                            nvdla_core2dbb_ar_arvalid,
    input  wire                            nvdla_core2dbb_ar_arready,
    output wire [7:0]                      nvdla_core2dbb_ar_arid,
    output wire [3:0]                      nvdla_core2dbb_ar_arlen,
    output wire [`DLA_MEM_ADDR_WIDTH-1:0]  nvdla_core2dbb_ar_araddr,
    input  wire                            nvdla_core2dbb_r_rvalid,
    output wire                            nvdla_core2dbb_r_rready,
    input  wire [7:0]                      nvdla_core2dbb_r_rid,
    input  wire                            nvdla_core2dbb_r_rlast,
    input  wire [`DLA_MEMIF_WIDTH-1:0]     nvdla_core2dbb_r_rdata,
    // interrupt (level)
    output wire                            dla_intr,
    // RAM power controls (ignored)
    input  wire [31:0]                     nvdla_pwrbus_ram_c_pd,
    input  wire [31:0]                     nvdla_pwrbus_ram_ma_pd,
    input  wire [31:0]                     nvdla_pwrbus_ram_mb_pd,
    input  wire [31:0]                     nvdla_pwrbus_ram_p_pd,
    input  wire [31:0]                     nvdla_pwrbus_ram_o_pd,
    input  wire [31:0]                     nvdla_pwrbus_ram_a_pd
);

localparam AW   = `DLA_MEM_ADDR_WIDTH;
localparam DW   = `DLA_MEMIF_WIDTH;
localparam SW   = `DLA_MEMIF_BYTES;
localparam LENW = `DLA_DMA_LEN_WIDTH;
localparam NRD  = `DLA_DMA_RD_CLIENTS;
localparam NWR  = `DLA_DMA_WR_CLIENTS;
localparam NSRD = `DLA_SDP_RD_CLIENTS;
localparam IB   = `NVDLA_INTR_BITS;

wire clk = dla_core_clk;
wire rstn;

dla_reset_sync u_reset (
    .clk(clk), .arst_n(dla_reset_rstn & direct_reset_), .rst_n(rstn)
);

// ------------------------------------------------------------------------------------------------
// CSB slave and register file
// ------------------------------------------------------------------------------------------------
wire        req_valid;
wire        req_write;
wire [15:0] req_addr;
wire [31:0] req_wdat;
wire [31:0] req_rdat;
wire [IB-1:0] intr_set;

dla_csb_slave u_csb (
    .clk(clk), .rstn(rstn),
    .csb_valid(csb2nvdla_valid), .csb_ready(csb2nvdla_ready), .csb_addr(csb2nvdla_addr),
    .csb_wdat(csb2nvdla_wdat), .csb_write(csb2nvdla_write), .csb_nposted(csb2nvdla_nposted),
    .rsp_valid(nvdla2csb_valid), .rsp_data(nvdla2csb_data), .rsp_wr_complete(nvdla2csb_wr_complete),
    .req_valid(req_valid), .req_write(req_write), .req_addr(req_addr), .req_wdat(req_wdat),
    .req_rdat(req_rdat)
);

`ifdef DLA_HAS_PDP
wire [`NVDLA_PDP_VEC_WIDTH-1:0]      pdp_regs;
wire                                 pdp_consumer;
wire [1:0]                           pdp_op_en;
wire                                 pdp_complete;
wire                                 pdp_stat_we;
wire [9:0]                           pdp_stat_word;
wire [31:0]                          pdp_stat_data;
`endif
`ifdef DLA_HAS_PDP_RDMA
wire [`NVDLA_PDP_RDMA_VEC_WIDTH-1:0] pdp_rdma_regs;
wire                                 pdp_rdma_consumer;
wire [1:0]                           pdp_rdma_op_en;
wire                                 pdp_rdma_complete;
wire                                 pdp_rdma_stat_we;
wire [9:0]                           pdp_rdma_stat_word;
wire [31:0]                          pdp_rdma_stat_data;
`endif
`ifdef DLA_HAS_SDP
wire [`NVDLA_SDP_VEC_WIDTH-1:0]      sdp_regs;
wire                                 sdp_consumer;
wire [1:0]                           sdp_op_en;
wire                                 sdp_complete;
wire                                 sdp_stat_we;
wire [9:0]                           sdp_stat_word;
wire [31:0]                          sdp_stat_data;
`endif
`ifdef DLA_HAS_SDP_RDMA
wire [`NVDLA_SDP_RDMA_VEC_WIDTH-1:0] sdp_rdma_regs;
wire                                 sdp_rdma_consumer;
wire [1:0]                           sdp_rdma_op_en;
wire                                 sdp_rdma_complete;
wire                                 sdp_rdma_stat_we;
wire [9:0]                           sdp_rdma_stat_word;
wire [31:0]                          sdp_rdma_stat_data;
`endif

dla_regfile u_regfile (
    .clk(clk), .rstn(rstn),
    .req_valid(req_valid), .req_write(req_write), .req_addr(req_addr), .req_wdat(req_wdat),
    .req_rdat(req_rdat),
    .intr_set(intr_set), .dla_intr(dla_intr)
`ifdef DLA_HAS_SDP_RDMA
    ,.sdp_rdma_regs(sdp_rdma_regs), .sdp_rdma_consumer(sdp_rdma_consumer), .sdp_rdma_op_en(sdp_rdma_op_en)
    ,.sdp_rdma_complete(sdp_rdma_complete), .sdp_rdma_stat_we(sdp_rdma_stat_we)
    ,.sdp_rdma_stat_word(sdp_rdma_stat_word), .sdp_rdma_stat_data(sdp_rdma_stat_data)
`endif
`ifdef DLA_HAS_SDP
    ,.sdp_regs(sdp_regs), .sdp_consumer(sdp_consumer), .sdp_op_en(sdp_op_en)
    ,.sdp_complete(sdp_complete), .sdp_stat_we(sdp_stat_we)
    ,.sdp_stat_word(sdp_stat_word), .sdp_stat_data(sdp_stat_data)
`endif
`ifdef DLA_HAS_PDP_RDMA
    ,.pdp_rdma_regs(pdp_rdma_regs), .pdp_rdma_consumer(pdp_rdma_consumer), .pdp_rdma_op_en(pdp_rdma_op_en)
    ,.pdp_rdma_complete(pdp_rdma_complete), .pdp_rdma_stat_we(pdp_rdma_stat_we)
    ,.pdp_rdma_stat_word(pdp_rdma_stat_word), .pdp_rdma_stat_data(pdp_rdma_stat_data)
`endif
`ifdef DLA_HAS_PDP
    ,.pdp_regs(pdp_regs), .pdp_consumer(pdp_consumer), .pdp_op_en(pdp_op_en)
    ,.pdp_complete(pdp_complete), .pdp_stat_we(pdp_stat_we)
    ,.pdp_stat_word(pdp_stat_word), .pdp_stat_data(pdp_stat_data)
`endif
);

// ------------------------------------------------------------------------------------------------
// DMA clients
// ------------------------------------------------------------------------------------------------
wire [NRD-1:0]      rd_req_valid;
wire [NRD-1:0]      rd_req_ready;
wire [NRD*AW-1:0]   rd_req_addr;
wire [NRD*LENW-1:0] rd_req_len;
wire [NRD-1:0]      rd_rsp_valid;
wire [NRD-1:0]      rd_rsp_ready;
wire [DW-1:0]       rd_rsp_data;
wire                rd_rsp_last;
wire [NWR-1:0]      wr_req_valid;
wire [NWR-1:0]      wr_req_ready;
wire [NWR*AW-1:0]   wr_req_addr;
wire [NWR*LENW-1:0] wr_req_len;
wire [NWR-1:0]      wr_dat_valid;
wire [NWR-1:0]      wr_dat_ready;
wire [NWR*DW-1:0]   wr_dat_data;
wire [NWR*SW-1:0]   wr_dat_strb;
wire [NWR-1:0]      wr_cpl;
wire [NWR-1:0]      wr_idle;

// ------------------------------------------------------------------------------------------------
// Operation control: golden.dla's firing rules (rtl/README.md, "Firing rules")
// ------------------------------------------------------------------------------------------------
wire [IB-1:0] pdp_intr_set;
wire [IB-1:0] sdp_intr_set;
assign intr_set = pdp_intr_set | sdp_intr_set;

`ifdef DLA_ENGINE_PDP
wire pdp_armed      = pdp_op_en[pdp_consumer];
wire pdp_rdma_armed = pdp_rdma_op_en[pdp_rdma_consumer];
wire pdp_flying     = (pdp_regs[`NVDLA_PDP_D_OPERATION_MODE_CFG_FLYING_MODE_VEC]
                       == `NVDLA_PDP_D_OPERATION_MODE_CFG_FLYING_MODE_ON_FLYING);
wire pdp_busy;
wire pdp_op_start;
wire pdp_op_done;
`endif
`ifdef DLA_ENGINE_SDP
wire sdp_armed      = sdp_op_en[sdp_consumer];
wire sdp_rdma_armed = sdp_rdma_op_en[sdp_rdma_consumer];
wire sdp_flying     = (sdp_regs[`NVDLA_SDP_D_FEATURE_MODE_CFG_FLYING_MODE_VEC]
                       == `NVDLA_SDP_D_FEATURE_MODE_CFG_FLYING_MODE_ON);
wire sdp_to_pdp     = (sdp_regs[`NVDLA_SDP_D_FEATURE_MODE_CFG_OUTPUT_DST_VEC]
                       == `NVDLA_SDP_D_FEATURE_MODE_CFG_OUTPUT_DST_PDP);
wire sdp_busy;
wire sdp_op_start;
wire sdp_op_done;
`endif

// SDP -> PDP on the fly: both start together once SDP (input from memory, OUTPUT_DST=PDP), SDP_RDMA
// and PDP (FLYING_MODE=ON_FLYING) are armed. Only with DLA_SDP_PDP_FLYING (engines that pass the
// data); otherwise such an operation never starts.
`ifdef DLA_SDP_PDP_FLYING
`ifdef DLA_ENGINE_PDP
`ifdef DLA_ENGINE_SDP
`define DLA_CHAIN_SDP_PDP
`endif
`endif
`endif
`ifdef DLA_CHAIN_SDP_PDP
wire chain_go = sdp_armed & ~sdp_flying & sdp_rdma_armed & sdp_to_pdp
              & pdp_armed & pdp_flying & ~sdp_busy & ~pdp_busy;
`else
wire chain_go = 1'b0;
`endif

`ifdef DLA_ENGINE_PDP
// PDP alone: input from memory (OFF_FLYING) needs PDP and PDP_RDMA armed.
dla_op_ctl #(.INTR_BITS(IB), .DONE_BIT(`NVDLA_DONE_BIT_PDP)) u_pdp_ctl (
    .clk(clk), .rstn(rstn),
    .go(((pdp_armed & ~pdp_flying & pdp_rdma_armed) | chain_go) & ~pdp_busy),
    .core_consumer(pdp_consumer), .rdma_armed(pdp_rdma_armed),
    .op_start(pdp_op_start), .op_done(pdp_op_done), .busy(pdp_busy),
    .core_complete(pdp_complete), .rdma_complete(pdp_rdma_complete), .intr_set(pdp_intr_set)
);
`else
assign pdp_intr_set = {IB{1'b0}};
`endif

`ifdef DLA_ENGINE_SDP
// SDP alone: input from memory (FLYING_MODE=OFF) needs SDP and SDP_RDMA armed; SDP fed on the fly
// by the conv pipeline never starts (this RTL has none).
dla_op_ctl #(.INTR_BITS(IB), .DONE_BIT(`NVDLA_DONE_BIT_SDP)) u_sdp_ctl (
    .clk(clk), .rstn(rstn),
    .go(((sdp_armed & ~sdp_flying & sdp_rdma_armed & ~sdp_to_pdp) | chain_go) & ~sdp_busy),
    .core_consumer(sdp_consumer), .rdma_armed(sdp_rdma_armed),
    .op_start(sdp_op_start), .op_done(sdp_op_done), .busy(sdp_busy),
    .core_complete(sdp_complete), .rdma_complete(sdp_rdma_complete), .intr_set(sdp_intr_set)
);
`else
assign sdp_intr_set = {IB{1'b0}};
`endif

// ------------------------------------------------------------------------------------------------
// Engines
// ------------------------------------------------------------------------------------------------
`ifdef DLA_ENGINE_PDP
`ifdef DLA_TEST_ENGINE
dla_test_engine #(.AW(AW), .DW(DW), .LENW(LENW), .STAT_WORD(`NVDLA_PDP_D_PERF_WRITE_STALL_WORD)) u_pdp (
    .clk(clk), .rstn(rstn), .op_start(pdp_op_start), .op_done(pdp_op_done),
    .src_addr(pdp_rdma_regs[`NVDLA_PDP_RDMA_D_SRC_BASE_ADDR_LOW_VEC_LSB +: AW]),  // LOW, HIGH adjacent
    .dst_addr(pdp_regs[`NVDLA_PDP_D_DST_BASE_ADDR_LOW_VEC_LSB +: AW]),
    .beats_m1(pdp_rdma_regs[`NVDLA_PDP_RDMA_D_DATA_CUBE_IN_WIDTH_VEC_LSB +: 4]),
    .last_strb(pdp_regs[`NVDLA_PDP_D_DST_SURFACE_STRIDE_VEC_LSB +: SW]),
    .stat_we(pdp_stat_we), .stat_word(pdp_stat_word), .stat_data(pdp_stat_data),
    .rd_req_valid(rd_req_valid[0]), .rd_req_ready(rd_req_ready[0]),
    .rd_req_addr(rd_req_addr[0 +: AW]), .rd_req_len(rd_req_len[0 +: LENW]),
    .rd_rsp_valid(rd_rsp_valid[0]), .rd_rsp_ready(rd_rsp_ready[0]),
    .rd_rsp_data(rd_rsp_data), .rd_rsp_last(rd_rsp_last),
    .wr_req_valid(wr_req_valid[0]), .wr_req_ready(wr_req_ready[0]),
    .wr_req_addr(wr_req_addr[0 +: AW]), .wr_req_len(wr_req_len[0 +: LENW]),
    .wr_dat_valid(wr_dat_valid[0]), .wr_dat_ready(wr_dat_ready[0]),
    .wr_dat_data(wr_dat_data[0 +: DW]), .wr_dat_strb(wr_dat_strb[0 +: SW]),
    .wr_cpl(wr_cpl[0]), .wr_idle(wr_idle[0])
);
assign pdp_rdma_stat_we   = 1'b0;
assign pdp_rdma_stat_word = 10'd0;
assign pdp_rdma_stat_data = 32'd0;
`else
dla_pdp u_pdp (
    .clk(clk), .rstn(rstn), .op_start(pdp_op_start), .op_done(pdp_op_done),
    .pdp_regs(pdp_regs), .pdp_rdma_regs(pdp_rdma_regs),
    .pdp_stat_we(pdp_stat_we), .pdp_stat_word(pdp_stat_word), .pdp_stat_data(pdp_stat_data),
    .pdp_rdma_stat_we(pdp_rdma_stat_we), .pdp_rdma_stat_word(pdp_rdma_stat_word),
    .pdp_rdma_stat_data(pdp_rdma_stat_data),
    .rd_req_valid(rd_req_valid[0]), .rd_req_ready(rd_req_ready[0]),
    .rd_req_addr(rd_req_addr[0 +: AW]), .rd_req_len(rd_req_len[0 +: LENW]),
    .rd_rsp_valid(rd_rsp_valid[0]), .rd_rsp_ready(rd_rsp_ready[0]),
    .rd_rsp_data(rd_rsp_data), .rd_rsp_last(rd_rsp_last),
    .wr_req_valid(wr_req_valid[0]), .wr_req_ready(wr_req_ready[0]),
    .wr_req_addr(wr_req_addr[0 +: AW]), .wr_req_len(wr_req_len[0 +: LENW]),
    .wr_dat_valid(wr_dat_valid[0]), .wr_dat_ready(wr_dat_ready[0]),
    .wr_dat_data(wr_dat_data[0 +: DW]), .wr_dat_strb(wr_dat_strb[0 +: SW]),
    .wr_cpl(wr_cpl[0]), .wr_idle(wr_idle[0])
);
`endif
`else
// no PDP engine: its DMA clients are idle (its registers, if any, still read and write)
assign rd_req_valid[0]          = 1'b0;
assign rd_req_addr[0 +: AW]     = {AW{1'b0}};
assign rd_req_len[0 +: LENW]    = {LENW{1'b0}};
assign rd_rsp_ready[0]          = 1'b1;
assign wr_req_valid[0]          = 1'b0;
assign wr_req_addr[0 +: AW]     = {AW{1'b0}};
assign wr_req_len[0 +: LENW]    = {LENW{1'b0}};
assign wr_dat_valid[0]          = 1'b0;
assign wr_dat_data[0 +: DW]     = {DW{1'b0}};
assign wr_dat_strb[0 +: SW]     = {SW{1'b0}};
`ifdef DLA_HAS_PDP
assign pdp_complete = 1'b0;
assign pdp_stat_we = 1'b0;
assign pdp_stat_word = 10'd0;
assign pdp_stat_data = 32'd0;
`endif
`ifdef DLA_HAS_PDP_RDMA
assign pdp_rdma_complete = 1'b0;
assign pdp_rdma_stat_we = 1'b0;
assign pdp_rdma_stat_word = 10'd0;
assign pdp_rdma_stat_data = 32'd0;
`endif
`endif

`ifdef DLA_ENGINE_SDP
`ifdef DLA_TEST_ENGINE
dla_test_engine #(.AW(AW), .DW(DW), .LENW(LENW), .STAT_WORD(`NVDLA_SDP_D_PERF_WDMA_WRITE_STALL_WORD)) u_sdp (
    .clk(clk), .rstn(rstn), .op_start(sdp_op_start), .op_done(sdp_op_done),
    .src_addr(sdp_rdma_regs[`NVDLA_SDP_RDMA_D_SRC_BASE_ADDR_LOW_VEC_LSB +: AW]),
    .dst_addr(sdp_regs[`NVDLA_SDP_D_DST_BASE_ADDR_LOW_VEC_LSB +: AW]),
    .beats_m1(sdp_rdma_regs[`NVDLA_SDP_RDMA_D_DATA_CUBE_WIDTH_VEC_LSB +: 4]),
    .last_strb(sdp_regs[`NVDLA_SDP_D_DST_SURFACE_STRIDE_VEC_LSB +: SW]),
    .stat_we(sdp_stat_we), .stat_word(sdp_stat_word), .stat_data(sdp_stat_data),
    .rd_req_valid(rd_req_valid[1]), .rd_req_ready(rd_req_ready[1]),
    .rd_req_addr(rd_req_addr[AW +: AW]), .rd_req_len(rd_req_len[LENW +: LENW]),
    .rd_rsp_valid(rd_rsp_valid[1]), .rd_rsp_ready(rd_rsp_ready[1]),
    .rd_rsp_data(rd_rsp_data), .rd_rsp_last(rd_rsp_last),
    .wr_req_valid(wr_req_valid[1]), .wr_req_ready(wr_req_ready[1]),
    .wr_req_addr(wr_req_addr[AW +: AW]), .wr_req_len(wr_req_len[LENW +: LENW]),
    .wr_dat_valid(wr_dat_valid[1]), .wr_dat_ready(wr_dat_ready[1]),
    .wr_dat_data(wr_dat_data[DW +: DW]), .wr_dat_strb(wr_dat_strb[SW +: SW]),
    .wr_cpl(wr_cpl[1]), .wr_idle(wr_idle[1])
);
assign sdp_rdma_stat_we   = 1'b0;
assign sdp_rdma_stat_word = 10'd0;
assign sdp_rdma_stat_data = 32'd0;
// the test engine uses one read client
assign rd_req_valid[2 +: NSRD-1]             = {(NSRD-1){1'b0}};
assign rd_req_addr[2*AW +: (NSRD-1)*AW]      = {((NSRD-1)*AW){1'b0}};
assign rd_req_len[2*LENW +: (NSRD-1)*LENW]   = {((NSRD-1)*LENW){1'b0}};
assign rd_rsp_ready[2 +: NSRD-1]             = {(NSRD-1){1'b1}};
wire unused_test_sdp_clients = &{1'b0, rd_req_ready[2 +: NSRD-1], rd_rsp_valid[2 +: NSRD-1]};
`else
dla_sdp u_sdp (
    .clk(clk), .rstn(rstn), .op_start(sdp_op_start), .op_done(sdp_op_done),
    .sdp_regs(sdp_regs), .sdp_rdma_regs(sdp_rdma_regs),
    .sdp_stat_we(sdp_stat_we), .sdp_stat_word(sdp_stat_word), .sdp_stat_data(sdp_stat_data),
    .sdp_rdma_stat_we(sdp_rdma_stat_we), .sdp_rdma_stat_word(sdp_rdma_stat_word),
    .sdp_rdma_stat_data(sdp_rdma_stat_data),
    .rd_req_valid(rd_req_valid[1 +: NSRD]), .rd_req_ready(rd_req_ready[1 +: NSRD]),
    .rd_req_addr(rd_req_addr[AW +: NSRD*AW]), .rd_req_len(rd_req_len[LENW +: NSRD*LENW]),
    .rd_rsp_valid(rd_rsp_valid[1 +: NSRD]), .rd_rsp_ready(rd_rsp_ready[1 +: NSRD]),
    .rd_rsp_data(rd_rsp_data), .rd_rsp_last(rd_rsp_last),
    .wr_req_valid(wr_req_valid[1]), .wr_req_ready(wr_req_ready[1]),
    .wr_req_addr(wr_req_addr[AW +: AW]), .wr_req_len(wr_req_len[LENW +: LENW]),
    .wr_dat_valid(wr_dat_valid[1]), .wr_dat_ready(wr_dat_ready[1]),
    .wr_dat_data(wr_dat_data[DW +: DW]), .wr_dat_strb(wr_dat_strb[SW +: SW]),
    .wr_cpl(wr_cpl[1]), .wr_idle(wr_idle[1])
);
`endif
`else
assign rd_req_valid[1 +: NSRD]             = {NSRD{1'b0}};
assign rd_req_addr[AW +: NSRD*AW]          = {(NSRD*AW){1'b0}};
assign rd_req_len[LENW +: NSRD*LENW]       = {(NSRD*LENW){1'b0}};
assign rd_rsp_ready[1 +: NSRD]             = {NSRD{1'b1}};
assign wr_req_valid[1]                     = 1'b0;
assign wr_req_addr[AW +: AW]               = {AW{1'b0}};
assign wr_req_len[LENW +: LENW]            = {LENW{1'b0}};
assign wr_dat_valid[1]                     = 1'b0;
assign wr_dat_data[DW +: DW]               = {DW{1'b0}};
assign wr_dat_strb[SW +: SW]               = {SW{1'b0}};
`ifdef DLA_HAS_SDP
assign sdp_complete = 1'b0;
assign sdp_stat_we = 1'b0;
assign sdp_stat_word = 10'd0;
assign sdp_stat_data = 32'd0;
`endif
`ifdef DLA_HAS_SDP_RDMA
assign sdp_rdma_complete = 1'b0;
assign sdp_rdma_stat_we = 1'b0;
assign sdp_rdma_stat_word = 10'd0;
assign sdp_rdma_stat_data = 32'd0;
`endif
`endif

// ------------------------------------------------------------------------------------------------
// AXI4 DMA
// ------------------------------------------------------------------------------------------------
dla_axi_rd #(
    .CLIENTS(NRD), .AW(AW), .DW(DW), .LENW(LENW), .MAX_BURST(`DLA_AXI_MAX_BURST),
    .OUTST_LOG2(`DLA_DMA_OUTSTANDING_LOG2), .BYTES_LOG2(`DLA_MEMIF_BYTES_LOG2), .AXI_ID(`DLA_AXI_ID)
) u_axi_rd (
    .clk(clk), .rstn(rstn),
    .req_valid(rd_req_valid), .req_ready(rd_req_ready), .req_addr(rd_req_addr), .req_len(rd_req_len),
    .rsp_valid(rd_rsp_valid), .rsp_ready(rd_rsp_ready), .rsp_data(rd_rsp_data), .rsp_last(rd_rsp_last),
    .arvalid(nvdla_core2dbb_ar_arvalid), .arready(nvdla_core2dbb_ar_arready),
    .arid(nvdla_core2dbb_ar_arid), .arlen(nvdla_core2dbb_ar_arlen), .araddr(nvdla_core2dbb_ar_araddr),
    .rvalid(nvdla_core2dbb_r_rvalid), .rready(nvdla_core2dbb_r_rready), .rid(nvdla_core2dbb_r_rid),
    .rlast(nvdla_core2dbb_r_rlast), .rdata(nvdla_core2dbb_r_rdata)
);

dla_axi_wr #(
    .CLIENTS(NWR), .AW(AW), .DW(DW), .LENW(LENW), .MAX_BURST(`DLA_AXI_MAX_BURST),
    .OUTST_LOG2(`DLA_DMA_OUTSTANDING_LOG2), .BYTES_LOG2(`DLA_MEMIF_BYTES_LOG2), .AXI_ID(`DLA_AXI_ID)
) u_axi_wr (
    .clk(clk), .rstn(rstn),
    .req_valid(wr_req_valid), .req_ready(wr_req_ready), .req_addr(wr_req_addr), .req_len(wr_req_len),
    .dat_valid(wr_dat_valid), .dat_ready(wr_dat_ready), .dat_data(wr_dat_data), .dat_strb(wr_dat_strb),
    .cpl(wr_cpl), .idle(wr_idle),
    .awvalid(nvdla_core2dbb_aw_awvalid), .awready(nvdla_core2dbb_aw_awready),
    .awid(nvdla_core2dbb_aw_awid), .awlen(nvdla_core2dbb_aw_awlen), .awaddr(nvdla_core2dbb_aw_awaddr),
    .wvalid(nvdla_core2dbb_w_wvalid), .wready(nvdla_core2dbb_w_wready), .wdata(nvdla_core2dbb_w_wdata),
    .wstrb(nvdla_core2dbb_w_wstrb), .wlast(nvdla_core2dbb_w_wlast),
    .bvalid(nvdla_core2dbb_b_bvalid), .bready(nvdla_core2dbb_b_bready), .bid(nvdla_core2dbb_b_bid)
);

// ------------------------------------------------------------------------------------------------
// Inputs this design does not use (see the header comment)
// ------------------------------------------------------------------------------------------------
wire unused_inputs = &{1'b0, dla_csb_clk, global_clk_ovr_on, tmc2slcg_disable_clock_gating, test_mode,
                       nvdla_pwrbus_ram_c_pd, nvdla_pwrbus_ram_ma_pd, nvdla_pwrbus_ram_mb_pd,
                       nvdla_pwrbus_ram_p_pd, nvdla_pwrbus_ram_o_pd, nvdla_pwrbus_ram_a_pd};
`ifdef DLA_TEST_ENGINE
wire unused_test_engine = &{1'b0
`ifdef DLA_HAS_PDP
    , pdp_regs
`endif
`ifdef DLA_HAS_PDP_RDMA
    , pdp_rdma_regs
`endif
`ifdef DLA_HAS_SDP
    , sdp_regs
`endif
`ifdef DLA_HAS_SDP_RDMA
    , sdp_rdma_regs
`endif
    };
`endif

endmodule
