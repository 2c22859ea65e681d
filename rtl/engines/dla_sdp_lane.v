// SDP int8 datapath of one lane (one channel of an atom): X1 (BS) -> X2 (BN) -> output CVT,
// bit-exact to golden/engines/sdp.py (x_stage, output_cvt). Fixed latency LATENCY = 8 cycles, no
// stall: every register moves every cycle; dla_sdp.v tracks which cycles carry data.
//
//   X stage (3 cycles, dla_sdp_x): ALU (33 bits) | MUL (49 bits) | truncate, PReLU, ReLU (32 bits)
//   output CVT (2 cycles):         (x - offset) * scale (49 bits) | sat8(sat17(rha(., shift)))
//
// The X2 operands are delayed by the X1 latency so they meet their data. `sat` is the cmod's
// D_PERF_OUT_SATURATION condition: |(v >> shift) - sat17(rha(v, shift))| > 1.
module dla_sdp_lane (
    input  wire        clk,
    input  wire        rstn,
    // X1 (BS) and X2 (BN) configuration: {bypass, alu_bypass, alu_algo[1:0], alu_shift[5:0],
    // mul_bypass, mul_prelu, mul_shift[5:0], relu_bypass}
    input  wire [18:0] bs_cfg,
    input  wire [18:0] bn_cfg,
    input  wire [31:0] cvt_offset,
    input  wire [15:0] cvt_scale,
    input  wire [5:0]  cvt_shift,
    // data entering this cycle
    input  wire [7:0]  x_in,        // int8 input element
    input  wire [15:0] bs_alu_op,   // X1 operands (register or memory), signed 16 bits
    input  wire [15:0] bs_mul_op,
    input  wire [15:0] bn_alu_op,   // X2 operands, delayed here by the X1 latency
    input  wire [15:0] bn_mul_op,
    // LATENCY cycles later
    output reg  [7:0]  y_out,
    output reg         sat
);

localparam X_LAT = 3;

// ---- X1 ----
wire [31:0] x1_out;
dla_sdp_x u_x1 (
    .clk(clk), .rstn(rstn), .cfg(bs_cfg),
    .x_in({{24{x_in[7]}}, x_in}), .alu_op(bs_alu_op), .mul_op(bs_mul_op), .x_out(x1_out)
);

// ---- X2 operands wait for X1 ----
reg [31:0] bn_ops [0:X_LAT-1];
integer k;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        for (k = 0; k < X_LAT; k = k + 1) bn_ops[k] <= 32'd0;
    end else begin
        bn_ops[0] <= {bn_mul_op, bn_alu_op};
        for (k = 1; k < X_LAT; k = k + 1) bn_ops[k] <= bn_ops[k-1];
    end
end

// ---- X2 ----
wire [31:0] x2_out;
dla_sdp_x u_x2 (
    .clk(clk), .rstn(rstn), .cfg(bn_cfg),
    .x_in(x1_out), .alu_op(bn_ops[X_LAT-1][15:0]), .mul_op(bn_ops[X_LAT-1][31:16]), .x_out(x2_out)
);

// ---- output CVT, cycle 1: (x - offset) * scale, 33 x 16 bits ----
wire signed [32:0] cvt_diff = $signed({x2_out[31], x2_out}) - $signed({cvt_offset[31], cvt_offset});
wire signed [48:0] cvt_prod = $signed({{16{cvt_diff[32]}}, cvt_diff}) * $signed({{33{cvt_scale[15]}}, cvt_scale});
reg  [48:0] prod_q;
always @(posedge clk or negedge rstn) begin
    if (!rstn) prod_q <= 49'd0;
    else       prod_q <= cvt_prod;
end

// ---- output CVT, cycle 2: rounding shift, saturation, saturation count condition ----
wire [49:0] rounded;   // rha(prod_q, cvt_shift), signed
dla_sdp_rha #(.W(49)) u_rha (.v(prod_q), .s(cvt_shift), .r(rounded));
wire        fits17 = (rounded[49:16] == {34{rounded[16]}});
wire [16:0] t17    = fits17 ? rounded[16:0] : (rounded[49] ? 17'h10000 : 17'h0ffff);
wire        fits8  = (t17[16:7] == {10{t17[7]}});
wire [7:0]  t8     = fits8 ? t17[7:0] : (t17[16] ? 8'h80 : 8'h7f);
wire signed [48:0] floor_shift = $signed(prod_q) >>> cvt_shift;
wire signed [49:0] sat_diff = $signed({floor_shift[48], floor_shift}) - $signed({{33{t17[16]}}, t17});
wire        sat_now = (sat_diff > 50'sd1) || (sat_diff < -50'sd1);

always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        y_out <= 8'd0;
        sat   <= 1'b0;
    end else begin
        y_out <= t8;
        sat   <= sat_now;
    end
end

endmodule
