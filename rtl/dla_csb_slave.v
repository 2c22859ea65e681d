// CSB slave: NVDLA's csb2nvdla / nvdla2csb protocol (rtl/README.md, "CSB timing").
// - A request is taken on csb2nvdla_valid & csb2nvdla_ready; ready is 1 from the first cycle after
//   reset, so one request per cycle is accepted (no back-pressure).
// - Cycle after acceptance: the register file is accessed (writes take effect at the end of it).
// - Cycle after that: a read answers with nvdla2csb_valid for one cycle and nvdla2csb_data (held
//   until the next read answer); a non-posted write answers with a one-cycle nvdla2csb_wr_complete;
//   a posted write gets no answer. Answers come back in request order, 2 cycles after acceptance.
// csb2nvdla_nposted is ignored for reads (every read is answered), as in NVDLA.
module dla_csb_slave (
    input  wire        clk,
    input  wire        rstn,
    // CSB request
    input  wire        csb_valid,
    output wire        csb_ready,
    input  wire [15:0] csb_addr,     // word address
    input  wire [31:0] csb_wdat,
    input  wire        csb_write,
    input  wire        csb_nposted,
    // CSB response
    output reg         rsp_valid,
    output reg  [31:0] rsp_data,
    output reg         rsp_wr_complete,
    // register file access
    output reg         req_valid,
    output reg         req_write,
    output reg  [15:0] req_addr,
    output reg  [31:0] req_wdat,
    input  wire [31:0] req_rdat
);

reg ready_q;
reg req_nposted;

assign csb_ready = ready_q;

wire accept = csb_valid & ready_q;

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        ready_q         <= 1'b0;
        req_valid       <= 1'b0;
        req_write       <= 1'b0;
        req_nposted     <= 1'b0;
        req_addr        <= 16'd0;
        req_wdat        <= 32'd0;
        rsp_valid       <= 1'b0;
        rsp_data        <= 32'd0;
        rsp_wr_complete <= 1'b0;
    end else begin
        ready_q   <= 1'b1;
        req_valid <= accept;
        if (accept) begin
            req_write   <= csb_write;
            req_nposted <= csb_nposted;
            req_addr    <= csb_addr;
            req_wdat    <= csb_wdat;
        end
        rsp_valid       <= req_valid & ~req_write;
        rsp_wr_complete <= req_valid & req_write & req_nposted;
        if (req_valid & ~req_write) rsp_data <= req_rdat;
    end
end

endmodule
