"""NVDLA loadable round trips: NVDLA's register-level traces re-expressed as kmd descriptor sets,
written as NVDLA flatbuffer loadables and run through the firmware model."""
from runtime.nvdla import inverse  # noqa: F401  (registers every engine's inverse)
