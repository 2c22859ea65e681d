"""Convolution programming (the firmware's ``conv.c``): one op programs the whole pipeline, written
back to front (CACC, CMAC_A and CMAC_B, CSC, then CDMA; CBUF has no registers) and enabled in the same
order, with CDMA, the unit that starts fetching, last. There is no RDMA, and every unit shares the
group id.

Firmware behaviour worth knowing:

* every "size" register holds ``n - 1``, so a 0 in any of those descriptor fields is refused (ours:
  the firmware would write an all-ones field);
* CSC's IN_PRECISION is programmed from ``out_precision`` (CDMA's from ``in_precision``);
* CSC stride and padding are zero in Winograd mode, CDMA's are not;
* CACC only has a 32-bit output address (the high word is dropped);
* the output converter supports truncation only (``out_cvt.truncate`` -> CACC D_CLIP_CFG): scale must
  be 1 and offset 0;
* ``dla_conv_program`` unmasks no interrupt (CACC and CDMA done rely on the reset mask of 0).

Not emitted: the D_PERF_ENABLE write of ``dla_conv_enable`` (statistics are disabled in our runs).
Not emulated (they read hardware state, and ``FirmwareStep`` only writes): the five S_STATUS reads by which
``processor_conv_program`` asserts that the group is idle in CACC/CMAC_A/CMAC_B/CSC/CDMA, and the
busy-wait on CDMA S_CBUF_FLUSH_STATUS.FLUSH_DONE that ``dla_conv_enable`` performs before enabling.
Atom-alignment checks of addresses are DEBUG-only asserts compiled out of the firmware and not made.
"""
from __future__ import annotations

from golden.errors import RegisterError
from golden.intr import done_bit
from runtime.nvdla.descriptors import MEM_CV, OP_CONV, ConvOpDesc, ConvSurfaceDesc, DataCube
from runtime.nvdla.engines import Programmer, Group, FirmwareStep, hi32, lo32, register

CONV_MODE_DIRECT, CONV_MODE_WINOGRAD = 0, 1
WEIGHT_FORMAT_COMPRESSED = 1
MEAN_FORMAT_ENABLE = 1
FORMAT_FEATURE = 36  # data_format 0..35 are pixel formats (CDMA PIXEL_FORMAT T_*), 36 a feature cube

_CONV = ("DIRECT", "WINOGRAD")
_PRECISION = ("INT8", "INT16", "FP16")
_WEIGHT_FORMAT = ("UNCOMPRESSED", "COMPRESSED")
_RAM = ("MCIF", "CVIF")  # indexed by cube type (MEM_MC, MEM_CV)
_MEAN = ("DISABLE", "ENABLE")


def _m1(p: FirmwareStep, name: str, value: int) -> int:
    """``value - 1`` for a register that holds a count minus one (ours: 0 is refused)."""
    if value < 1:
        raise p.fail(f"{name} {value} must be >= 1 (the firmware programs {name} - 1)")
    return value - 1


def _address(p: FirmwareStep, cube: DataCube) -> int:
    """``dla_get_dma_cube_address``: the address-list entry plus the cube's offset."""
    return p.address_of(cube.address, getattr(cube, "offset", 0))


def _validate(p: FirmwareStep, op: ConvOpDesc, s: ConvSurfaceDesc) -> None:
    """Ours: descriptor values the firmware uses as table indices, and configuration limits."""
    checks = (("conv_mode", op.conv_mode, len(_CONV)), ("in_precision", op.in_precision, len(_PRECISION)),
              ("out_precision", op.out_precision, len(_PRECISION)),
              ("weight_format", op.weight_format, len(_WEIGHT_FORMAT)), ("mean_format", op.mean_format, len(_MEAN)),
              ("data_format", op.data_format, FORMAT_FEATURE + 1), ("pixel_mapping", op.pixel_mapping, 1))
    for name, value, limit in checks:
        if value >= limit:
            raise p.fail(f"{name} {value} out of range (0..{limit - 1})")
    if op.conv_mode == CONV_MODE_WINOGRAD and not p.hw.winograd:
        raise p.fail(f"conv_mode winograd but {p.hw.name} has no Winograd")
    if s.src_data.type > MEM_CV:
        raise p.fail(f"src_data.type {s.src_data.type}: convolution input must be in memory (MC or CV)")
    if s.weight_data.type > MEM_CV:
        raise p.fail(f"weight_data.type {s.weight_data.type}: weights must be in memory (MC or CV)")


def program(p: FirmwareStep, g: Group) -> None:
    try:
        _program(p, g)
    except RegisterError as exc:  # a descriptor value wider than its register field
        if "does not fit" not in str(exc):
            raise
        raise p.fail(f"descriptor value out of range: {exc}") from None


def _program(p: FirmwareStep, g: Group) -> None:
    op: ConvOpDesc = g.op
    s: ConvSurfaceDesc = g.surface
    _validate(p, op, s)
    atom = p.hw.memory_atomic_size  # the firmware's config_data->atom_size (8 on nv_small, 32 on full/large)
    src, dst = s.src_data, s.dst_data

    # firmware validation and address resolution, in the firmware's order
    wmb_addr = wgs_addr = weight_addr = out_addr = 0
    if op.weight_format == WEIGHT_FORMAT_COMPRESSED:
        if not p.hw.weight_compression:  # config_data->weight_compress_support
            raise p.fail(f"weight_format compressed but {p.hw.name} has no weight compression")
        if s.wmb_data.address == -1:
            raise p.fail("weight_format compressed but wmb_data has no address (address index -1)")
        wmb_addr = _address(p, s.wmb_data)
        if s.wgs_data.address == -1:
            raise p.fail("weight_format compressed but wgs_data has no address (address index -1)")
        wgs_addr = _address(p, s.wgs_data)
    if s.weight_data.address != -1:  # no weight address: 0 is programmed
        weight_addr = _address(p, s.weight_data)
    if dst.address != -1:  # no output address (on-the-fly into SDP): 0 is programmed
        out_addr = _address(p, dst)
    in_addr = p.cube_address(src, "src_data")  # dla_read_input_address (dynamic ROI not supported)
    if op.out_cvt.scale != 1:
        raise p.fail(f"out_cvt.scale {op.out_cvt.scale} must be 1 (the output converter only truncates)")
    if op.out_cvt.offset != 0:
        raise p.fail(f"out_cvt.offset {op.out_cvt.offset} must be 0 (the output converter only truncates)")

    conv_mode = _CONV[op.conv_mode]
    proc = _PRECISION[op.out_precision]
    batch = _m1(p, "batch", op.batch)
    out_w, out_h, out_c = (_m1(p, f"dst_data.{n}", getattr(dst, n)) for n in ("width", "height", "channel"))

    # ---- CACC
    p.reg("CACC", "D_MISC_CFG", CONV_MODE=conv_mode, PROC_PRECISION=proc)
    p.reg("CACC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=out_w, DATAOUT_HEIGHT=out_h)
    p.reg("CACC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=out_c)
    p.reg("CACC", "D_DATAOUT_ADDR", lo32(out_addr))
    p.reg("CACC", "D_BATCH_NUMBER", BATCHES=batch)
    p.reg("CACC", "D_LINE_STRIDE", dst.line_stride)
    p.reg("CACC", "D_SURF_STRIDE", dst.surf_stride)
    if dst.width == 1 and dst.height == 1:
        if dst.line_stride != dst.width * atom:
            raise p.fail(f"dst_data is 1x1 but line_stride {dst.line_stride} != width * atom size {atom}")
        p.reg("CACC", "D_DATAOUT_MAP", LINE_PACKED="TRUE", SURF_PACKED="TRUE")
    else:
        p.reg("CACC", "D_DATAOUT_MAP", LINE_PACKED="FALSE", SURF_PACKED="FALSE")
    p.reg("CACC", "D_CLIP_CFG", CLIP_TRUNCATE=op.out_cvt.truncate)

    # ---- CMAC (A and B get the same word)
    for unit in ("CMAC_A", "CMAC_B"):
        p.reg(unit, "D_MISC_CFG", CONV_MODE=conv_mode, PROC_PRECISION=proc)

    # ---- CSC
    reuse = dict(DATA_REUSE=op.data_reuse, WEIGHT_REUSE=op.weight_reuse, SKIP_DATA_RLS=op.skip_data_rls,
                 SKIP_WEIGHT_RLS=op.skip_weight_rls)
    datain_format = "PIXEL" if op.data_format < FORMAT_FEATURE else "FEATURE"
    p.reg("CSC", "D_MISC_CFG", CONV_MODE=conv_mode, IN_PRECISION=proc, PROC_PRECISION=proc, **reuse)
    p.reg("CSC", "D_DATAIN_FORMAT", DATAIN_FORMAT=datain_format)
    p.reg("CSC", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=_m1(p, "input_width_csc", op.input_width_csc),
          DATAIN_HEIGHT_EXT=_m1(p, "input_height_csc", op.input_height_csc))
    p.reg("CSC", "D_DATAIN_SIZE_EXT_1", DATAIN_CHANNEL_EXT=_m1(p, "input_channel_csc", op.input_channel_csc))
    p.reg("CSC", "D_BATCH_NUMBER", BATCHES=batch)
    p.reg("CSC", "D_POST_Y_EXTENSION", Y_EXTENSION=op.post_extension)
    entries = _m1(p, "entry_per_slice", op.entry_per_slice)
    p.reg("CSC", "D_ENTRY_PER_SLICE", ENTRIES=entries)
    p.reg("CSC", "D_WEIGHT_FORMAT", WEIGHT_FORMAT=_WEIGHT_FORMAT[op.weight_format])
    p.reg("CSC", "D_WEIGHT_SIZE_EXT_0", WEIGHT_WIDTH_EXT=_m1(p, "kernel_width_csc", op.kernel_width_csc),
          WEIGHT_HEIGHT_EXT=_m1(p, "kernel_height_csc", op.kernel_height_csc))
    p.reg("CSC", "D_WEIGHT_SIZE_EXT_1", WEIGHT_CHANNEL_EXT=_m1(p, "kernel_channel_csc", op.kernel_channel_csc),
          WEIGHT_KERNEL=out_c)
    p.reg("CSC", "D_WEIGHT_BYTES", s.weight_data.size)
    p.reg("CSC", "D_WMB_BYTES", s.wmb_data.size)  # written even for uncompressed weights
    p.reg("CSC", "D_DATAOUT_SIZE_0", DATAOUT_WIDTH=_m1(p, "input_width_cmac", op.input_width_cmac),
          DATAOUT_HEIGHT=_m1(p, "input_height_cmac", op.input_height_cmac))
    p.reg("CSC", "D_DATAOUT_SIZE_1", DATAOUT_CHANNEL=out_c)
    p.reg("CSC", "D_ATOMICS", ATOMICS=dst.width * dst.height - 1)
    p.reg("CSC", "D_RELEASE", RLS_SLICES=_m1(p, "release", op.release))
    stride_x = _m1(p, "conv_stride_x", op.conv_stride_x)
    stride_y = _m1(p, "conv_stride_y", op.conv_stride_y)
    if op.conv_mode == CONV_MODE_DIRECT:
        p.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=stride_x, CONV_Y_STRIDE_EXT=stride_y)
    else:  # Winograd: CSC sees a stride-1, unpadded problem
        p.reg("CSC", "D_CONV_STRIDE_EXT", CONV_X_STRIDE_EXT=0, CONV_Y_STRIDE_EXT=0)
    p.reg("CSC", "D_DILATION_EXT", X_DILATION_EXT=_m1(p, "dilation_x", op.dilation_x),
          Y_DILATION_EXT=_m1(p, "dilation_y", op.dilation_y))
    direct = op.conv_mode == CONV_MODE_DIRECT
    p.reg("CSC", "D_ZERO_PADDING", PAD_LEFT=op.pad_x_left if direct else 0, PAD_TOP=op.pad_y_top if direct else 0)
    p.reg("CSC", "D_ZERO_PADDING_VALUE", PAD_VALUE=op.pad_val & 0xFFFF)
    data_bank = _m1(p, "data_bank", op.data_bank)
    weight_bank = _m1(p, "weight_bank", op.weight_bank)
    p.reg("CSC", "D_BANK", DATA_BANK=data_bank, WEIGHT_BANK=weight_bank)
    p.reg("CSC", "D_PRA_CFG", op.pra_truncate)

    # ---- CDMA
    p.reg("CDMA", "D_MISC_CFG", CONV_MODE=conv_mode, IN_PRECISION=_PRECISION[op.in_precision], PROC_PRECISION=proc,
          **reuse)
    # a feature cube (36): entry 36 of the firmware's map_img_fmt holds DATAIN_FORMAT's FEATURE encoding, 0
    pixel_format = op.data_format if op.data_format < FORMAT_FEATURE else 0
    p.reg("CDMA", "D_DATAIN_FORMAT", DATAIN_FORMAT=datain_format, PIXEL_FORMAT=pixel_format,
          PIXEL_MAPPING="PITCH_LINEAR", PIXEL_SIGN_OVERRIDE=op.pixel_override)
    p.reg("CDMA", "D_DATAIN_SIZE_0", DATAIN_WIDTH=_m1(p, "src_data.width", src.width),
          DATAIN_HEIGHT=_m1(p, "src_data.height", src.height))
    p.reg("CDMA", "D_DATAIN_SIZE_1", DATAIN_CHANNEL=_m1(p, "src_data.channel", src.channel))
    p.reg("CDMA", "D_DATAIN_SIZE_EXT_0", DATAIN_WIDTH_EXT=op.input_width_csc - 1,
          DATAIN_HEIGHT_EXT=op.input_height_csc - 1)
    p.reg("CDMA", "D_DAIN_RAM_TYPE", DATAIN_RAM_TYPE=_RAM[src.type])
    p.reg("CDMA", "D_DAIN_ADDR_HIGH_0", hi32(in_addr))
    p.reg("CDMA", "D_DAIN_ADDR_LOW_0", lo32(in_addr))
    uv_addr = (in_addr + s.offset_u) & 0xFFFF_FFFF_FFFF_FFFF
    p.reg("CDMA", "D_DAIN_ADDR_HIGH_1", hi32(uv_addr))
    p.reg("CDMA", "D_DAIN_ADDR_LOW_1", lo32(uv_addr))
    p.reg("CDMA", "D_LINE_STRIDE", src.line_stride)
    p.reg("CDMA", "D_SURF_STRIDE", src.surf_stride)
    p.reg("CDMA", "D_LINE_UV_STRIDE", s.in_line_uv_stride)
    p.reg("CDMA", "D_DAIN_MAP", LINE_PACKED=int(src.line_stride == src.width * atom),
          SURF_PACKED=int(src.surf_stride == src.width * src.height * atom))
    p.reg("CDMA", "D_BATCH_NUMBER", BATCHES=batch)
    p.reg("CDMA", "D_BATCH_STRIDE", op.batch_stride)
    p.reg("CDMA", "D_ENTRY_PER_SLICE", ENTRIES=entries)
    p.reg("CDMA", "D_FETCH_GRAIN", GRAINS=_m1(p, "fetch_grain", op.fetch_grain))
    p.reg("CDMA", "D_WEIGHT_FORMAT", WEIGHT_FORMAT=_WEIGHT_FORMAT[op.weight_format])
    p.reg("CDMA", "D_WEIGHT_SIZE_0", BYTE_PER_KERNEL=_m1(p, "bytes_per_kernel", op.bytes_per_kernel))
    p.reg("CDMA", "D_WEIGHT_SIZE_1", WEIGHT_KERNEL=out_c)
    p.reg("CDMA", "D_WEIGHT_RAM_TYPE", WEIGHT_RAM_TYPE=_RAM[s.weight_data.type])
    p.reg("CDMA", "D_WEIGHT_ADDR_HIGH", hi32(weight_addr))
    p.reg("CDMA", "D_WEIGHT_ADDR_LOW", lo32(weight_addr))
    p.reg("CDMA", "D_WEIGHT_BYTES", s.weight_data.size)
    if op.weight_format == WEIGHT_FORMAT_COMPRESSED:
        p.reg("CDMA", "D_WGS_ADDR_HIGH", hi32(wgs_addr))
        p.reg("CDMA", "D_WGS_ADDR_LOW", lo32(wgs_addr))
        p.reg("CDMA", "D_WMB_ADDR_HIGH", hi32(wmb_addr))
        p.reg("CDMA", "D_WMB_ADDR_LOW", lo32(wmb_addr))
        p.reg("CDMA", "D_WMB_BYTES", s.wmb_data.size)
    p.reg("CDMA", "D_MEAN_FORMAT", MEAN_FORMAT=_MEAN[op.mean_format])
    if op.mean_format == MEAN_FORMAT_ENABLE:
        p.reg("CDMA", "D_MEAN_GLOBAL_0", MEAN_RY=op.mean_ry & 0xFFFF, MEAN_GU=op.mean_gu & 0xFFFF)
        p.reg("CDMA", "D_MEAN_GLOBAL_1", MEAN_BV=op.mean_bv & 0xFFFF, MEAN_AX=op.mean_ax & 0xFFFF)
    if op.in_cvt.enable:
        p.reg("CDMA", "D_CVT_CFG", CVT_EN="ENABLE", CVT_TRUNCATE=op.in_cvt.truncate)
        p.reg("CDMA", "D_CVT_OFFSET", op.in_cvt.offset)
        p.reg("CDMA", "D_CVT_SCALE", op.in_cvt.scale)
    else:
        p.reg("CDMA", "D_CVT_CFG", CVT_EN="DISABLE")
    p.reg("CDMA", "D_CONV_STRIDE", CONV_X_STRIDE=stride_x, CONV_Y_STRIDE=stride_y)
    p.reg("CDMA", "D_ZERO_PADDING", PAD_LEFT=op.pad_x_left, PAD_RIGHT=op.pad_x_right, PAD_TOP=op.pad_y_top,
          PAD_BOTTOM=op.pad_y_bottom)
    p.reg("CDMA", "D_ZERO_PADDING_VALUE", PAD_VALUE=op.pad_val & 0xFFFF)
    p.reg("CDMA", "D_BANK", WEIGHT_BANK=weight_bank, DATA_BANK=data_bank)


#: the order in which the firmware enables (and points) the pipeline's units
UNITS = ("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA")


def enable(p: FirmwareStep, g: Group) -> None:
    for unit in UNITS:
        p.reg(unit, "D_OP_ENABLE", OP_EN="ENABLE")


def set_producer(p: FirmwareStep, group: int, rdma_group: int) -> None:
    for unit in UNITS:  # no RDMA: rdma_group is unused
        p.reg(unit, "S_POINTER", PRODUCER=group)


CONV = register(Programmer(
    op_type=OP_CONV, name="CONV", pointer_unit="CACC", rdma_pointer_unit=None, done_bit=done_bit("CACC"),
    set_producer=set_producer, program=program, enable=enable,
    rdma_needed=lambda op, surface: False,
    is_ready=lambda group, other: True,
    extra_events=((16, 5), (18, 4)),
    intr_mask_fields=(),
    # conv.c checks the chosen group idle in every sub-unit before programming, and waits for the CBUF
    # flush (after reset) before enabling
    idle_units=("CACC", "CMAC_A", "CMAC_B", "CSC", "CDMA"),
    enable_poll=("CDMA", "S_CBUF_FLUSH_STATUS", "FLUSH_DONE")))
