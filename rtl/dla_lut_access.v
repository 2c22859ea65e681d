// The LUT behind a unit's S_LUT_ACCESS_CFG / S_LUT_ACCESS_DATA registers (SDP, CDP), as golden.dla:
// - a write to S_LUT_ACCESS_CFG sets the access address, table (LE/LO) and mode (read/write);
// - every write to S_LUT_ACCESS_DATA is an access: in write mode it stores the low 16 bits;
// - a read of S_LUT_ACCESS_DATA in read mode returns the entry and is an access (in write mode the
//   register file returns the last written data word instead, and nothing moves);
// - each access moves the address to min(address + 1, depth - 1);
// - an access past the end of the table (a ConfigError in golden.dla) changes nothing and reads 0.
// Entries reset to 0, as in the golden model.
module dla_lut_access #(
    parameter ADDR_BITS = 10,
    parameter LE_DEPTH  = 65,
    parameter LO_DEPTH  = 257
) (
    input  wire                 clk,
    input  wire                 rstn,
    input  wire                 cfg_we,
    input  wire [ADDR_BITS-1:0] cfg_addr,
    input  wire                 cfg_table,   // 0 LE, 1 LO
    input  wire                 cfg_write,   // 0 read, 1 write
    input  wire                 data_we,
    input  wire                 data_re,
    input  wire [15:0]          data_wdat,
    output wire [15:0]          data_rdat,
    output wire                 write_mode
);

localparam LE_BITS = $clog2(LE_DEPTH);
localparam LO_BITS = $clog2(LO_DEPTH);
localparam [ADDR_BITS-1:0] LE_LAST = LE_DEPTH - 1;
localparam [ADDR_BITS-1:0] LO_LAST = LO_DEPTH - 1;

reg [ADDR_BITS-1:0] addr;
reg                 table_lo;
reg                 wmode;
reg [15:0]          le [0:LE_DEPTH-1];
reg [15:0]          lo [0:LO_DEPTH-1];

wire [ADDR_BITS-1:0] last   = table_lo ? LO_LAST : LE_LAST;
wire                 in_range = addr <= last;
wire [LE_BITS-1:0]   le_idx = addr[LE_BITS-1:0];
wire [LO_BITS-1:0]   lo_idx = addr[LO_BITS-1:0];
wire                 access = data_we | (data_re & ~wmode);

assign data_rdat  = !in_range ? 16'd0 : (table_lo ? lo[lo_idx] : le[le_idx]);
assign write_mode = wmode;

integer i;
always @(posedge clk or negedge rstn) begin
    if (!rstn) begin
        addr     <= {ADDR_BITS{1'b0}};
        table_lo <= 1'b0;
        wmode    <= 1'b0;
        for (i = 0; i < LE_DEPTH; i = i + 1) le[i] <= 16'd0;
        for (i = 0; i < LO_DEPTH; i = i + 1) lo[i] <= 16'd0;
    end else if (cfg_we) begin
        addr     <= cfg_addr;
        table_lo <= cfg_table;
        wmode    <= cfg_write;
    end else if (access && in_range) begin
        if (data_we && wmode) begin
            if (table_lo) lo[lo_idx] <= data_wdat;
            else          le[le_idx] <= data_wdat;
        end
        if (addr != last) addr <= addr + 1'b1;
    end
end

endmodule
