// One SDP X stage (X1 = BS or X2 = BN) for one lane, bit-exact to golden/engines/sdp.py x_stage
// (cmod sdp_x.cpp). Three cycles, registers move every cycle:
//   1 ALU: operand sat32(op16 << min(ALU_SHIFT, 32)); MAX / MIN (32 bits) or SUM (33 bits; algo 3
//          acts as SUM); bypassed: x.
//   2 MUL: v * op16 (49 bits).
//   3 truncate: sat32(rha(MUL ? product : v, MUL_SHIFT[5:0])) -- also with MUL bypassed; PReLU (MUL
//          not bypassed): v >= 0 passes as its low 32 bits (no truncation); ReLU: max(., 0) unless
//          bypassed. A bypassed stage passes x unchanged.
// cfg = {bypass, alu_bypass, alu_algo[1:0], alu_shift[5:0], mul_bypass, mul_prelu, mul_shift[5:0],
//        relu_bypass}
module dla_sdp_x (
    input  wire        clk,
    input  wire        rstn,
    input  wire [18:0] cfg,
    input  wire [31:0] x_in,     // signed 32 bits
    input  wire [15:0] alu_op,   // signed 16 bits
    input  wire [15:0] mul_op,   // signed 16 bits
    output reg  [31:0] x_out     // 3 cycles later
);

wire       bypass      = cfg[18];
wire       alu_bypass  = cfg[17];
wire [1:0] alu_algo    = cfg[16:15];
wire [5:0] alu_shift   = cfg[14:9];
wire       mul_bypass  = cfg[8];
wire       mul_prelu   = cfg[7];
wire [5:0] mul_shift   = cfg[6:1];
wire       relu_bypass = cfg[0];

// ---- cycle 1: ALU ----
// |op16| << 32 < 2**47, so 48 bits hold every shift up to 32; larger shifts saturate anyway.
wire [5:0]  alu_sh   = (alu_shift > 6'd32) ? 6'd32 : alu_shift;
wire [47:0] op_sh    = {{32{alu_op[15]}}, alu_op} << alu_sh;
wire        op_fits  = (op_sh[47:31] == {17{op_sh[31]}});
wire [31:0] op32     = op_fits ? op_sh[31:0] : (op_sh[47] ? 32'h8000_0000 : 32'h7fff_ffff);
wire        x_lt_op  = $signed(x_in) < $signed(op32);
wire [32:0] alu_sum  = {x_in[31], x_in} + {op32[31], op32};
reg  [32:0] alu_res;
always @(*) begin
    case (alu_algo)
        2'd0:    alu_res = x_lt_op ? {op32[31], op32} : {x_in[31], x_in};   // MAX
        2'd1:    alu_res = x_lt_op ? {x_in[31], x_in} : {op32[31], op32};   // MIN
        default: alu_res = alu_sum;                                        // SUM (2, 3)
    endcase
end
wire [32:0] v1 = alu_bypass ? {x_in[31], x_in} : alu_res;

reg [32:0] v1_q;
reg [15:0] mul_op_q;
reg [31:0] x1_q;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        v1_q     <= 33'd0;
        mul_op_q <= 16'd0;
        x1_q     <= 32'd0;
    end else begin
        v1_q     <= v1;
        mul_op_q <= mul_op;
        x1_q     <= x_in;
    end
end

// ---- cycle 2: MUL, 33 x 16 bits ----
wire signed [48:0] prod = $signed({{16{v1_q[32]}}, v1_q}) * $signed({{33{mul_op_q[15]}}, mul_op_q});

reg [48:0] prod_q;
reg [32:0] v2_q;
reg [31:0] x2_q;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        prod_q <= 49'd0;
        v2_q   <= 33'd0;
        x2_q   <= 32'd0;
    end else begin
        prod_q <= prod;
        v2_q   <= v1_q;
        x2_q   <= x1_q;
    end
end

// ---- cycle 3: truncate, PReLU, ReLU ----
wire [48:0] trt_in = mul_bypass ? {{16{v2_q[32]}}, v2_q} : prod_q;
wire [49:0] trt_rnd;
dla_sdp_rha #(.W(49)) u_rha (.v(trt_in), .s(mul_shift), .r(trt_rnd));
wire        trt_fits = (trt_rnd[49:31] == {19{trt_rnd[31]}});
wire [31:0] trt      = trt_fits ? trt_rnd[31:0] : (trt_rnd[49] ? 32'h8000_0000 : 32'h7fff_ffff);
wire [31:0] mul_res  = (!mul_bypass && mul_prelu && !v2_q[32]) ? v2_q[31:0] : trt;
wire [31:0] relu_res = (!relu_bypass && mul_res[31]) ? 32'd0 : mul_res;

always @(posedge clk or negedge rstn) begin
    if (!rstn) x_out <= 32'd0;
    else       x_out <= bypass ? x2_q : relu_res;
end

endmodule
