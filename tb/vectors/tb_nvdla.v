// Self-checking testbench for rtl/NV_nvdla: plays a vector file of CSB / memory / interrupt steps
// written by tb/vectors/__init__.py and checks every answer. Not synthesizable (simulation only).
//
// One step per line of +VECTORS=<file> ($readmemh, +NSTEPS=<lines>), 168 bits: {op[7:0], addr[31:0], data[63:0], mask[63:0]}
//   1 posted CSB write (addr = byte address, data[31:0])       2 non-posted write: wait wr_complete
//   3 CSB read, (rdata & mask) == (data & mask)                  4 poll: read until it matches (timeout)
//   5 wait until dla_intr == data[0] (timeout)                   6 idle data[31:0] cycles
//   7 memory write of 8 bytes at addr (little endian)           8 memory check of 8 bytes under mask
//   9 dla_intr == data[0] now                                    0 end
// The AXI slave serves a 1 MiB memory (address bits [19:0]) with random ready/valid delays
// (+SEED=n), several bursts in flight, and checks AXI rules: stable valid payloads, AW before W,
// wlast on the last beat, no burst across 4 KiB. Result: a line "TB PASS" or "TB FAIL <n errors>".
`timescale 1ns / 1ps
`include "dla_config.vh"

module tb_nvdla;

localparam AW = `DLA_MEM_ADDR_WIDTH;
localparam DW = `DLA_MEMIF_WIDTH;
localparam SW = `DLA_MEMIF_BYTES;
localparam MEM_BYTES = 1 << 20;
localparam MAX_STEPS = 16384;
localparam TIMEOUT = 20000;

reg clk = 1'b0;
always #5 clk = ~clk;
reg rstn = 1'b0;

// ---- DUT ----
reg         csb_valid = 1'b0;
wire        csb_ready;
reg  [15:0] csb_addr = 16'd0;
reg  [31:0] csb_wdat = 32'd0;
reg         csb_write = 1'b0;
reg         csb_nposted = 1'b0;
wire        rsp_valid;
wire [31:0] rsp_data;
wire        rsp_wr_complete;
wire        intr;

wire          awvalid;
reg           awready = 1'b0;
wire [7:0]    awid;
wire [3:0]    awlen;
wire [AW-1:0] awaddr;
wire          wvalid;
reg           wready = 1'b0;
wire [DW-1:0] wdata;
wire [SW-1:0] wstrb;
wire          wlast;
reg           bvalid = 1'b0;
wire          bready;
reg  [7:0]    bid = 8'd0;
wire          arvalid;
reg           arready = 1'b0;
wire [7:0]    arid;
wire [3:0]    arlen;
wire [AW-1:0] araddr;
reg           rvalid = 1'b0;
wire          rready;
reg  [7:0]    rid = 8'd0;
reg           rlast = 1'b0;
reg  [DW-1:0] rdata = {DW{1'b0}};

NV_nvdla dut (
    .dla_core_clk(clk), .dla_csb_clk(clk), .global_clk_ovr_on(1'b0),
    .tmc2slcg_disable_clock_gating(1'b0), .dla_reset_rstn(rstn), .direct_reset_(rstn), .test_mode(1'b0),
    .csb2nvdla_valid(csb_valid), .csb2nvdla_ready(csb_ready), .csb2nvdla_addr(csb_addr),
    .csb2nvdla_wdat(csb_wdat), .csb2nvdla_write(csb_write), .csb2nvdla_nposted(csb_nposted),
    .nvdla2csb_valid(rsp_valid), .nvdla2csb_data(rsp_data), .nvdla2csb_wr_complete(rsp_wr_complete),
    .nvdla_core2dbb_aw_awvalid(awvalid), .nvdla_core2dbb_aw_awready(awready),
    .nvdla_core2dbb_aw_awid(awid), .nvdla_core2dbb_aw_awlen(awlen), .nvdla_core2dbb_aw_awaddr(awaddr),
    .nvdla_core2dbb_w_wvalid(wvalid), .nvdla_core2dbb_w_wready(wready), .nvdla_core2dbb_w_wdata(wdata),
    .nvdla_core2dbb_w_wstrb(wstrb), .nvdla_core2dbb_w_wlast(wlast),
    .nvdla_core2dbb_b_bvalid(bvalid), .nvdla_core2dbb_b_bready(bready), .nvdla_core2dbb_b_bid(bid),
    .nvdla_core2dbb_ar_arvalid(arvalid), .nvdla_core2dbb_ar_arready(arready),
    .nvdla_core2dbb_ar_arid(arid), .nvdla_core2dbb_ar_arlen(arlen), .nvdla_core2dbb_ar_araddr(araddr),
    .nvdla_core2dbb_r_rvalid(rvalid), .nvdla_core2dbb_r_rready(rready), .nvdla_core2dbb_r_rid(rid),
    .nvdla_core2dbb_r_rlast(rlast), .nvdla_core2dbb_r_rdata(rdata),
    .dla_intr(intr),
    .nvdla_pwrbus_ram_c_pd(32'd0), .nvdla_pwrbus_ram_ma_pd(32'd0), .nvdla_pwrbus_ram_mb_pd(32'd0),
    .nvdla_pwrbus_ram_p_pd(32'd0), .nvdla_pwrbus_ram_o_pd(32'd0), .nvdla_pwrbus_ram_a_pd(32'd0)
);

integer errors = 0;
integer seed = 1;
integer cycle = 0;
always @(posedge clk) cycle <= cycle + 1;

task fail;
    input [8*160-1:0] msg;
    begin
        errors = errors + 1;
        if (errors <= 20) $display("ERROR @%0d: %0s", cycle, msg);
    end
endtask

// ---- memory ----
reg [7:0] mem [0:MEM_BYTES-1];
integer k;
initial for (k = 0; k < MEM_BYTES; k = k + 1) mem[k] = 8'd0;

// ---- AXI read slave: queue of bursts, served in order with random gaps ----
reg [AW-1:0] arq_addr [0:63];
reg [4:0]    arq_len  [0:63];
integer arq_wr = 0, arq_rd = 0, r_beat = 0, max_rd_outstanding = 0;
integer b;

always @(posedge clk) begin
    if (rstn) begin
        if (arvalid && arready) begin
            if (arid !== 8'd0) fail("arid is not the single ID 0");
            if ((araddr[11:0] + ((arlen + 1) * SW)) > 4096) fail("read burst crosses 4 KiB");
            if (arlen + 1 > `DLA_AXI_MAX_BURST) fail("read burst longer than DLA_AXI_MAX_BURST");
            if (araddr % SW != 0) fail("unaligned araddr");
            arq_addr[arq_wr % 64] = araddr;
            arq_len[arq_wr % 64] = arlen + 1;
            arq_wr = arq_wr + 1;
            if (arq_wr - arq_rd > max_rd_outstanding) max_rd_outstanding = arq_wr - arq_rd;
        end
        if (rvalid && rready) begin
            if (rlast) begin
                arq_rd = arq_rd + 1;
                r_beat = 0;
            end else begin
                r_beat = r_beat + 1;
            end
        end
        arready <= ($random(seed) % 4 != 0) && (arq_wr - arq_rd < 60);
        // present the next beat (or keep the current one until taken)
        if (!(rvalid && !rready)) begin
            if (arq_wr != arq_rd && ($random(seed) % 3 != 0)) begin
                rvalid <= 1'b1;
                for (b = 0; b < SW; b = b + 1)
                    rdata[8*b +: 8] <= mem[(arq_addr[arq_rd % 64] + r_beat * SW + b) % MEM_BYTES];
                rlast <= (r_beat + 1 == arq_len[arq_rd % 64]);
            end else begin
                rvalid <= 1'b0;
                rlast <= 1'b0;
            end
        end
    end
end

// ---- AXI write slave ----
reg [AW-1:0] awq_addr [0:63];
reg [4:0]    awq_len  [0:63];
integer awq_wr = 0, awq_rd = 0, w_beat = 0, b_pending = 0;

always @(posedge clk) begin
    if (rstn) begin
        if (awvalid && awready) begin
            if (awid !== 8'd0) fail("awid is not the single ID 0");
            if ((awaddr[11:0] + ((awlen + 1) * SW)) > 4096) fail("write burst crosses 4 KiB");
            if (awlen + 1 > `DLA_AXI_MAX_BURST) fail("write burst longer than DLA_AXI_MAX_BURST");
            if (awaddr % SW != 0) fail("unaligned awaddr");
            awq_addr[awq_wr % 64] = awaddr;
            awq_len[awq_wr % 64] = awlen + 1;
            awq_wr = awq_wr + 1;
        end
        if (wvalid && wready) begin
            if (awq_wr == awq_rd) fail("W beat before its AW");
            for (b = 0; b < SW; b = b + 1)
                if (wstrb[b]) mem[(awq_addr[awq_rd % 64] + w_beat * SW + b) % MEM_BYTES] = wdata[8*b +: 8];
            if (wlast !== (w_beat + 1 == awq_len[awq_rd % 64])) fail("wlast does not mark the burst's last beat");
            if (w_beat + 1 == awq_len[awq_rd % 64]) begin
                awq_rd = awq_rd + 1;
                w_beat = 0;
                b_pending = b_pending + 1;
            end else begin
                w_beat = w_beat + 1;
            end
        end
        if (bvalid && bready) b_pending = b_pending - 1;
        awready <= ($random(seed) % 4 != 0) && (awq_wr - awq_rd < 60);
        wready <= ($random(seed) % 4 != 0) && (awq_wr != awq_rd);
        if (!(bvalid && !bready)) bvalid <= (b_pending > (bvalid && bready ? 1 : 0)) && ($random(seed) % 2 == 0);
    end
end

// ---- AXI stability: a valid payload must hold until taken ----
reg          ar_hold = 1'b0, aw_hold = 1'b0, w_hold = 1'b0;
reg [AW-1:0] ar_addr_q, aw_addr_q;
reg [3:0]    ar_len_q, aw_len_q;
reg [DW-1:0] w_data_q;
reg [SW-1:0] w_strb_q;
always @(posedge clk) begin
    if (rstn) begin
        if (ar_hold && (!arvalid || araddr !== ar_addr_q || arlen !== ar_len_q)) fail("AR changed before arready");
        if (aw_hold && (!awvalid || awaddr !== aw_addr_q || awlen !== aw_len_q)) fail("AW changed before awready");
        if (w_hold && (!wvalid || wdata !== w_data_q || wstrb !== w_strb_q)) fail("W changed before wready");
        ar_hold <= arvalid && !arready;
        aw_hold <= awvalid && !awready;
        w_hold  <= wvalid && !wready;
        ar_addr_q <= araddr; ar_len_q <= arlen;
        aw_addr_q <= awaddr; aw_len_q <= awlen;
        w_data_q <= wdata; w_strb_q <= wstrb;
    end
end

// ---- CSB answers: count them, every one must be expected ----
integer reads_sent = 0, reads_answered = 0, np_sent = 0, np_answered = 0;
reg [31:0] last_rdata;
always @(posedge clk) begin
    if (rsp_valid) begin
        reads_answered = reads_answered + 1;
        last_rdata = rsp_data;
    end
    if (rsp_wr_complete) np_answered = np_answered + 1;
    if (rsp_valid && rsp_wr_complete) fail("read answer and write completion in one cycle");
end

task csb_send;
    input [31:0] byte_addr;
    input [31:0] wdat;
    input        write;
    input        nposted;
    begin
        csb_valid <= 1'b1;
        csb_addr <= byte_addr[17:2];
        csb_wdat <= wdat;
        csb_write <= write;
        csb_nposted <= nposted;
        @(posedge clk);
        while (!csb_ready) @(posedge clk);
        csb_valid <= 1'b0;
        if (!write) reads_sent = reads_sent + 1;
        if (write && nposted) np_sent = np_sent + 1;
    end
endtask

task csb_read;
    input  [31:0] byte_addr;
    output [31:0] value;
    integer t;
    begin
        csb_send(byte_addr, 32'd0, 1'b0, 1'b0);
        t = 0;
        while (reads_answered != reads_sent && t < TIMEOUT) begin
            @(posedge clk);
            t = t + 1;
        end
        if (t >= TIMEOUT) fail("CSB read not answered");
        value = last_rdata;
    end
endtask

// ---- the player ----
reg [167:0] steps [0:MAX_STEPS-1];
reg [167:0] step;
reg [7:0]   op;
reg [31:0]  addr;
reg [63:0]  data;
reg [63:0]  mask;
reg [31:0]  value;
reg [63:0]  word;
reg [8*160-1:0] msg;
integer n, t, i, done, nsteps;
reg [8*512-1:0] vectors;

initial begin
    if (!$value$plusargs("VECTORS=%s", vectors)) begin
        $display("TB FAIL no +VECTORS");
        $finish;
    end
    if (!$value$plusargs("SEED=%d", seed)) seed = 1;
    if (!$value$plusargs("NSTEPS=%d", nsteps) || nsteps > MAX_STEPS) nsteps = MAX_STEPS;
    for (n = 0; n < MAX_STEPS; n = n + 1) steps[n] = 168'd0;
    $readmemh(vectors, steps, 0, nsteps - 1);
    repeat (5) @(posedge clk);
    rstn <= 1'b1;
    repeat (3) @(posedge clk);
    done = 0;
    for (n = 0; n < MAX_STEPS && !done; n = n + 1) begin
        step = steps[n];
        op = step[167:160];
        addr = step[159:128];
        data = step[127:64];
        mask = step[63:0];
        case (op)
            8'd0: done = 1;
            8'd1: csb_send(addr, data[31:0], 1'b1, 1'b0);
            8'd2: begin
                csb_send(addr, data[31:0], 1'b1, 1'b1);
                t = 0;
                while (np_answered != np_sent && t < TIMEOUT) begin
                    @(posedge clk);
                    t = t + 1;
                end
                if (t >= TIMEOUT) fail("non-posted write not completed");
            end
            8'd3: begin
                csb_read(addr, value);
                if ((value & mask[31:0]) !== (data[31:0] & mask[31:0])) begin
                    $sformat(msg, "step %0d: read %08h = %08h, expected %08h (mask %08h)", n, addr, value,
                             data[31:0], mask[31:0]);
                    fail(msg);
                end
            end
            8'd4: begin
                t = 0;
                csb_read(addr, value);
                while ((value & mask[31:0]) !== (data[31:0] & mask[31:0]) && t < 500) begin
                    csb_read(addr, value);
                    t = t + 1;
                end
                if (t >= 500) begin
                    $sformat(msg, "step %0d: poll %08h = %08h, never %08h (mask %08h)", n, addr, value,
                             data[31:0], mask[31:0]);
                    fail(msg);
                end
            end
            8'd5: begin
                t = 0;
                while (intr !== data[0] && t < TIMEOUT) begin
                    @(posedge clk);
                    t = t + 1;
                end
                if (t >= TIMEOUT) begin
                    $sformat(msg, "step %0d: dla_intr never became %0d", n, data[0]);
                    fail(msg);
                end
            end
            8'd6: repeat (data[31:0]) @(posedge clk);
            8'd7: for (i = 0; i < 8; i = i + 1) mem[(addr + i) % MEM_BYTES] = data[8*i +: 8];
            8'd8: begin
                for (i = 0; i < 8; i = i + 1) word[8*i +: 8] = mem[(addr + i) % MEM_BYTES];
                if ((word & mask) !== (data & mask)) begin
                    $sformat(msg, "step %0d: memory %08h = %016h, expected %016h (mask %016h)", n, addr,
                             word, data, mask);
                    fail(msg);
                end
            end
            8'd9: if (intr !== data[0]) begin
                $sformat(msg, "step %0d: dla_intr is %0d, expected %0d", n, intr, data[0]);
                fail(msg);
            end
            default: begin
                $sformat(msg, "step %0d: unknown op %0d", n, op);
                fail(msg);
            end
        endcase
    end
    repeat (10) @(posedge clk);
    if (reads_answered != reads_sent) fail("read answers do not match reads");
    if (np_answered != np_sent) fail("write completions do not match non-posted writes");
    $display("TB STATS steps=%0d cycles=%0d reads=%0d nposted=%0d rd_bursts=%0d wr_bursts=%0d max_rd_outstanding=%0d",
             n, cycle, reads_sent, np_sent, arq_wr, awq_wr, max_rd_outstanding);
    if (errors == 0) $display("TB PASS");
    else $display("TB FAIL %0d errors", errors);
    $finish;
end

endmodule
