// Cycle-exact check of the CSB timing documented in rtl/README.md: back-to-back requests, every
// read answered 2 cycles after acceptance, non-posted writes completed 2 cycles after acceptance,
// posted writes never answered. Prints "TB PASS" or "TB FAIL".
`timescale 1ns / 1ps
`include "dla_config.vh"
`include "nvdla_regs.vh"

module tb_csb_timing;

reg clk = 1'b0;
always #5 clk = ~clk;
reg rstn = 1'b0;

reg         valid = 1'b0;
wire        ready;
reg  [15:0] addr = 16'd0;
reg  [31:0] wdat = 32'd0;
reg         write = 1'b0;
reg         nposted = 1'b0;
wire        rsp_valid;
wire [31:0] rsp_data;
wire        wr_complete;
wire        intr;

NV_nvdla dut (
    .dla_core_clk(clk), .dla_csb_clk(clk), .global_clk_ovr_on(1'b0), .tmc2slcg_disable_clock_gating(1'b0),
    .dla_reset_rstn(rstn), .direct_reset_(1'b1), .test_mode(1'b0),
    .csb2nvdla_valid(valid), .csb2nvdla_ready(ready), .csb2nvdla_addr(addr), .csb2nvdla_wdat(wdat),
    .csb2nvdla_write(write), .csb2nvdla_nposted(nposted),
    .nvdla2csb_valid(rsp_valid), .nvdla2csb_data(rsp_data), .nvdla2csb_wr_complete(wr_complete),
    .nvdla_core2dbb_aw_awvalid(), .nvdla_core2dbb_aw_awready(1'b1), .nvdla_core2dbb_aw_awid(),
    .nvdla_core2dbb_aw_awlen(), .nvdla_core2dbb_aw_awaddr(),
    .nvdla_core2dbb_w_wvalid(), .nvdla_core2dbb_w_wready(1'b1), .nvdla_core2dbb_w_wdata(),
    .nvdla_core2dbb_w_wstrb(), .nvdla_core2dbb_w_wlast(),
    .nvdla_core2dbb_b_bvalid(1'b0), .nvdla_core2dbb_b_bready(), .nvdla_core2dbb_b_bid(8'd0),
    .nvdla_core2dbb_ar_arvalid(), .nvdla_core2dbb_ar_arready(1'b1), .nvdla_core2dbb_ar_arid(),
    .nvdla_core2dbb_ar_arlen(), .nvdla_core2dbb_ar_araddr(),
    .nvdla_core2dbb_r_rvalid(1'b0), .nvdla_core2dbb_r_rready(), .nvdla_core2dbb_r_rid(8'd0),
    .nvdla_core2dbb_r_rlast(1'b0), .nvdla_core2dbb_r_rdata({`DLA_MEMIF_WIDTH{1'b0}}),
    .dla_intr(intr),
    .nvdla_pwrbus_ram_c_pd(32'd0), .nvdla_pwrbus_ram_ma_pd(32'd0), .nvdla_pwrbus_ram_mb_pd(32'd0),
    .nvdla_pwrbus_ram_p_pd(32'd0), .nvdla_pwrbus_ram_o_pd(32'd0), .nvdla_pwrbus_ram_a_pd(32'd0)
);

localparam [17:0] GLB = `DLA_GLB_BASE;
function [15:0] word;
    input [17:0] byte_addr;
    word = byte_addr[17:2];
endfunction

integer cycle = 0;
integer errors = 0;
// expected answer per cycle: 0 none, 1 read data, 2 write complete
reg [1:0]  expect_kind [0:63];
reg [31:0] expect_data [0:63];
integer i;
initial for (i = 0; i < 64; i = i + 1) begin expect_kind[i] = 2'd0; expect_data[i] = 32'd0; end

always @(posedge clk) begin
    cycle <= cycle + 1;
    if (cycle < 64) begin
        if (rsp_valid !== (expect_kind[cycle] == 2'd1) || wr_complete !== (expect_kind[cycle] == 2'd2)) begin
            $display("ERROR cycle %0d: valid=%b wr_complete=%b, expected kind %0d", cycle, rsp_valid,
                     wr_complete, expect_kind[cycle]);
            errors = errors + 1;
        end
        if (expect_kind[cycle] == 2'd1 && rsp_data !== expect_data[cycle]) begin
            $display("ERROR cycle %0d: data %08h, expected %08h", cycle, rsp_data, expect_data[cycle]);
            errors = errors + 1;
        end
    end
end

// one request per cycle from cycle `start`; ready must be 1 by then
task request;
    input integer at;
    input [17:0] byte_addr;
    input [31:0] data;
    input is_write;
    input is_nposted;
    begin
        while (cycle != at) @(negedge clk);
        if (!ready) begin
            $display("ERROR cycle %0d: csb2nvdla_ready low", cycle);
            errors = errors + 1;
        end
        valid = 1'b1; addr = word(byte_addr); wdat = data; write = is_write; nposted = is_nposted;
        @(negedge clk);
        valid = 1'b0;
    end
endtask

initial begin
    repeat (3) @(negedge clk);
    rstn = 1'b1;
    // accepted at cycle c -> answered during cycle c + 2
    expect_kind[12] = 2'd1; expect_data[12] = `NVDLA_GLB_S_NVDLA_HW_VERSION_RESET;
    expect_kind[13] = 2'd2;                                   // non-posted write of S_INTR_MASK
    expect_kind[15] = 2'd1; expect_data[15] = 32'h3;          // S_INTR_MASK
    expect_kind[16] = 2'd1; expect_data[16] = 32'h1;          // S_INTR_STATUS (set by cycle 12's write)
    expect_kind[17] = 2'd2;                                   // non-posted write to a hole
    expect_kind[18] = 2'd1; expect_data[18] = 32'h0;          // read of a hole
    request(10, GLB + `NVDLA_GLB_S_NVDLA_HW_VERSION_OFFSET, 32'd0, 1'b0, 1'b0);
    request(11, GLB + `NVDLA_GLB_S_INTR_MASK_OFFSET, 32'h3, 1'b1, 1'b1);
    request(12, GLB + `NVDLA_GLB_S_INTR_SET_OFFSET, 32'h1, 1'b1, 1'b0);   // posted: no answer at 14
    request(13, GLB + `NVDLA_GLB_S_INTR_MASK_OFFSET, 32'd0, 1'b0, 1'b0);
    request(14, GLB + `NVDLA_GLB_S_INTR_STATUS_OFFSET, 32'd0, 1'b0, 1'b0);
    request(15, GLB + 18'h0ff0, 32'hffff_ffff, 1'b1, 1'b1);
    request(16, GLB + 18'h0ff0, 32'd0, 1'b0, 1'b0);
    while (cycle < 40) @(negedge clk);
    if (intr !== 1'b0) begin
        $display("ERROR: dla_intr high although the only status bit is masked");
        errors = errors + 1;
    end
    if (errors == 0) $display("TB PASS");
    else $display("TB FAIL %0d errors", errors);
    $finish;
end

endmodule
