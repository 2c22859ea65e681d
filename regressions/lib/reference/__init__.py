"""Independent reference math for the NVDLA int8 datapaths.

Plain, slow, loop-per-element implementations of the rules in
``NVDLA_NOTES.md`` section 4 (and the public cmod they were checked against).
They take mathematical parameters (signed Python ints, numpy arrays in C, H, W
order), never registers or memory, and are used to cross-check the vectorised
golden engines on small random configurations.

Modules: ``arith`` (rounding/saturation helpers), ``conv`` (CDMA input
conversion, CSC+CMAC+CACC direct convolution), ``sdp``, ``pdp``, ``cdp``.

Nothing here imports the golden model, the runtime or the unit tests, with one exception: the LUT
parameter container ``golden.lut.LutRegisters``, which is data only (the lookup arithmetic is written
here again), so sharing it cannot make the reference agree with a golden bug.
"""
