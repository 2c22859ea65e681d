// Synchronous FIFO, 2**DEPTH_LOG2 entries, registered storage, first-word-fall-through read.
// Every entry is reset (the FIFOs here are small bookkeeping queues).
module dla_fifo #(
    parameter WIDTH      = 8,
    parameter DEPTH_LOG2 = 4
) (
    input  wire             clk,
    input  wire             rstn,
    input  wire             push,
    input  wire [WIDTH-1:0] push_data,
    input  wire             pop,
    output wire [WIDTH-1:0] head,
    output wire             empty,
    output wire             full
);

localparam DEPTH = 1 << DEPTH_LOG2;

reg [WIDTH-1:0]      mem [0:DEPTH-1];
reg [DEPTH_LOG2-1:0] wptr;
reg [DEPTH_LOG2-1:0] rptr;
reg [DEPTH_LOG2:0]   count;

wire do_push = push & ~full;
wire do_pop  = pop & ~empty;

assign head  = mem[rptr];
assign empty = (count == {(DEPTH_LOG2+1){1'b0}});
assign full  = count[DEPTH_LOG2];

integer i;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        for (i = 0; i < DEPTH; i = i + 1) mem[i] <= {WIDTH{1'b0}};
        wptr  <= {DEPTH_LOG2{1'b0}};
        rptr  <= {DEPTH_LOG2{1'b0}};
        count <= {(DEPTH_LOG2+1){1'b0}};
    end else begin
        if (do_push) mem[wptr] <= push_data;
        if (do_push) wptr <= wptr + 1'b1;
        if (do_pop)  rptr <= rptr + 1'b1;
        case ({do_push, do_pop})
            2'b10:   count <= count + 1'b1;
            2'b01:   count <= count - 1'b1;
            default: ;
        endcase
    end
end

endmodule
