"""NVDLA loadable round trips: NVDLA's register-level traces re-expressed as kmd descriptor sets,
written as NVDLA flatbuffer loadables and run through the firmware model."""
from regressions.nvdla import inverse_sdp_conv  # noqa: F401  (registers the SDP and CONV inverses)
