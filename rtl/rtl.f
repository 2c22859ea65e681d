// Our RTL (rtl/README.md). Paths are relative to this file. dla_config.vh is generated per build
// (tools/gen_rtl_headers.py) and must be on the include path as well.
+incdir+.
+incdir+generated
--top-module NV_nvdla
NV_nvdla.v
dla_reset_sync.v
dla_csb_slave.v
generated/dla_regfile.v
dla_lut_access.v
dla_op_ctl.v
dla_rr_arb.v
dla_fifo.v
dla_burst_len.v
dla_axi_rd.v
dla_axi_wr.v
dla_test_engine.v
engines/dla_pdp.v
engines/dla_sdp.v
engines/dla_sdp_rd.v
engines/dla_sdp_wr.v
engines/dla_sdp_walk.v
engines/dla_sdp_lane.v
engines/dla_sdp_x.v
engines/dla_sdp_rha.v
