// Operation control of one engine (golden.dla's firing and completion rules; rtl/README.md).
// - go (computed by the caller from the consumer groups: every unit the operation needs is armed
//   and the configuration can run) starts an operation when the engine is idle: op_start pulses
//   one cycle later, and whether the RDMA unit was armed at that moment is remembered.
// - op_done (a one-cycle pulse from the engine, any time after op_start) ends it: the next cycle
//   core_complete (and rdma_complete if the RDMA was armed) pulse, so the register file clears
//   OP_EN of those consumer groups and toggles their consumer pointers, and intr_set raises the
//   engine's GLB done bit of the core unit's consumer group (DONE_BIT + group).
// - busy covers op_start .. completion; go is ignored meanwhile.
module dla_op_ctl #(
    parameter INTR_BITS = 22,
    parameter DONE_BIT  = 0
) (
    input  wire                 clk,
    input  wire                 rstn,
    input  wire                 go,
    input  wire                 core_consumer,
    input  wire                 rdma_armed,
    output reg                  op_start,
    input  wire                 op_done,
    output wire                 busy,
    output wire                 core_complete,
    output wire                 rdma_complete,
    output wire [INTR_BITS-1:0] intr_set
);

reg busy_q;
reg done_q;
reg rdma_used_q;

assign busy          = busy_q;
assign core_complete = done_q;
assign rdma_complete = done_q & rdma_used_q;
assign intr_set      = done_q ? ({{(INTR_BITS-2){1'b0}}, core_consumer, ~core_consumer} << DONE_BIT)
                              : {INTR_BITS{1'b0}};

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        busy_q      <= 1'b0;
        done_q      <= 1'b0;
        rdma_used_q <= 1'b0;
        op_start    <= 1'b0;
    end else begin
        op_start <= 1'b0;
        done_q   <= 1'b0;
        if (!busy_q) begin
            if (go) begin
                busy_q      <= 1'b1;
                op_start    <= 1'b1;
                rdma_used_q <= rdma_armed;
            end
        end else if (done_q) begin
            busy_q <= 1'b0;
        end else if (op_done) begin
            done_q <= 1'b1;
        end
    end
end

endmodule
