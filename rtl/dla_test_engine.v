// Test engine (only with `define DLA_TEST_ENGINE; never in a product build): stands in for an
// engine to exercise the engine interface and the DMA end to end. On op_start it reads BEATS
// (= beats_m1 + 1, up to 16) bus words from src_addr into a buffer, then writes them to dst_addr
// with every byte incremented by 1, the last beat with strobes last_strb; once the writes are
// answered (wr_idle) it reports BEATS into status word STAT_WORD and pulses op_done.
`ifdef DLA_TEST_ENGINE
module dla_test_engine #(
    parameter AW        = 32,
    parameter DW        = 64,
    parameter LENW      = 16,
    parameter STAT_WORD = 0
) (
    input  wire            clk,
    input  wire            rstn,
    input  wire            op_start,
    output reg             op_done,
    input  wire [AW-1:0]   src_addr,
    input  wire [AW-1:0]   dst_addr,
    input  wire [3:0]      beats_m1,
    input  wire [DW/8-1:0] last_strb,
    output wire            stat_we,
    output wire [9:0]      stat_word,
    output wire [31:0]     stat_data,
    output wire            rd_req_valid,
    input  wire            rd_req_ready,
    output wire [AW-1:0]   rd_req_addr,
    output wire [LENW-1:0] rd_req_len,
    input  wire            rd_rsp_valid,
    output wire            rd_rsp_ready,
    input  wire [DW-1:0]   rd_rsp_data,
    input  wire            rd_rsp_last,
    output wire            wr_req_valid,
    input  wire            wr_req_ready,
    output wire [AW-1:0]   wr_req_addr,
    output wire [LENW-1:0] wr_req_len,
    output wire            wr_dat_valid,
    input  wire            wr_dat_ready,
    output wire [DW-1:0]   wr_dat_data,
    output wire [DW/8-1:0] wr_dat_strb,
    input  wire            wr_cpl,
    input  wire            wr_idle
);

localparam S_IDLE = 3'd0, S_RREQ = 3'd1, S_RDAT = 3'd2, S_WREQ = 3'd3, S_WDAT = 3'd4, S_WAIT = 3'd5,
           S_STAT = 3'd6;

reg [2:0]    state;
reg [AW-1:0] src;
reg [AW-1:0] dst;
reg [3:0]    last_idx;
reg [3:0]    idx;
reg [DW-1:0] buffer [0:15];

wire [DW-1:0] beat = buffer[idx];
genvar b;
generate
    for (b = 0; b < DW / 8; b = b + 1) begin : g_byte
        assign wr_dat_data[8*b +: 8] = beat[8*b +: 8] + 8'd1;
    end
endgenerate

assign rd_req_valid = (state == S_RREQ);
assign rd_req_addr  = src;
assign rd_req_len   = {{(LENW-4){1'b0}}, last_idx};
assign rd_rsp_ready = (state == S_RDAT);
assign wr_req_valid = (state == S_WREQ);
assign wr_req_addr  = dst;
assign wr_req_len   = {{(LENW-4){1'b0}}, last_idx};
assign wr_dat_valid = (state == S_WDAT);
assign wr_dat_strb  = (idx == last_idx) ? last_strb : {(DW/8){1'b1}};
assign stat_we      = (state == S_STAT);
assign stat_word    = STAT_WORD;
assign stat_data    = {28'd0, last_idx} + 32'd1;

integer i;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        state    <= S_IDLE;
        src      <= {AW{1'b0}};
        dst      <= {AW{1'b0}};
        last_idx <= 4'd0;
        idx      <= 4'd0;
        op_done  <= 1'b0;
        for (i = 0; i < 16; i = i + 1) buffer[i] <= {DW{1'b0}};
    end else begin
        op_done <= 1'b0;
        case (state)
            S_IDLE: if (op_start) begin
                src      <= src_addr;
                dst      <= dst_addr;
                last_idx <= beats_m1;
                idx      <= 4'd0;
                state    <= S_RREQ;
            end
            S_RREQ: if (rd_req_ready) state <= S_RDAT;
            S_RDAT: if (rd_rsp_valid) begin
                buffer[idx] <= rd_rsp_data;
                idx <= idx + 4'd1;
                if (rd_rsp_last) begin
                    idx   <= 4'd0;
                    state <= S_WREQ;
                end
            end
            S_WREQ: if (wr_req_ready) state <= S_WDAT;
            S_WDAT: if (wr_dat_ready) begin
                idx <= idx + 4'd1;
                if (idx == last_idx) state <= S_WAIT;
            end
            S_WAIT: if (wr_idle) state <= S_STAT;
            S_STAT: begin
                op_done <= 1'b1;
                state   <= S_IDLE;
            end
            default: state <= S_IDLE;
        endcase
    end
end

// completion is observed through wr_idle
wire unused_cpl = &{1'b0, wr_cpl};

endmodule
`endif
