// PDP engine (PDP + PDP_RDMA): PLACEHOLDER until the real pooling engine lands.
// It has the final port list of the engine interface (rtl/README.md, "Engine interface") and
// completes every operation one cycle after op_start without touching memory, so register, status
// and interrupt flows can be exercised. Replace the body, keep the ports.
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

always @(posedge clk or negedge rstn) begin
    if (!rstn) op_done <= 1'b0;
    else       op_done <= op_start;
end

assign pdp_stat_we        = 1'b0;
assign pdp_stat_word      = 10'd0;
assign pdp_stat_data      = 32'd0;
assign pdp_rdma_stat_we   = 1'b0;
assign pdp_rdma_stat_word = 10'd0;
assign pdp_rdma_stat_data = 32'd0;
assign rd_req_valid       = 1'b0;
assign rd_req_addr        = {`DLA_MEM_ADDR_WIDTH{1'b0}};
assign rd_req_len         = {`DLA_DMA_LEN_WIDTH{1'b0}};
assign rd_rsp_ready       = 1'b1;
assign wr_req_valid       = 1'b0;
assign wr_req_addr        = {`DLA_MEM_ADDR_WIDTH{1'b0}};
assign wr_req_len         = {`DLA_DMA_LEN_WIDTH{1'b0}};
assign wr_dat_valid       = 1'b0;
assign wr_dat_data        = {`DLA_MEMIF_WIDTH{1'b0}};
assign wr_dat_strb        = {`DLA_MEMIF_BYTES{1'b0}};

// placeholder: the configuration and the DMA answers are not looked at yet
wire unused_placeholder = &{1'b0, pdp_regs, pdp_rdma_regs, rd_req_ready, rd_rsp_valid, rd_rsp_data,
                            rd_rsp_last, wr_req_ready, wr_dat_ready, wr_cpl, wr_idle};

endmodule
