// Design constants of our RTL (not hardware-config sizes: those are in the generated dla_config.vh).
`ifndef DLA_DEFS_VH
`define DLA_DEFS_VH
// DMA request length field: req_len = beats - 1, so one request moves up to 2**16 beats.
`define DLA_DMA_LEN_WIDTH 16
// The one AXI ID used for every read and write burst.
`define DLA_AXI_ID 0
// DMA clients. Read: 0 PDP (PDP_RDMA); 1..4 SDP (SDP_RDMA: 1 MRDMA input, 2 BRDMA X1 operands,
// 3 NRDMA X2 operands, 4 ERDMA Y operands). Write: 0 PDP, 1 SDP.
`define DLA_SDP_RD_CLIENTS 4
`define DLA_DMA_RD_CLIENTS 5
`define DLA_DMA_WR_CLIENTS 2
`endif // DLA_DEFS_VH
