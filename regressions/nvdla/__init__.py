"""NVDLA loadable round trips: NVDLA's register-level traces re-expressed as kmd descriptor sets,
written as NVDLA flatbuffer loadables and run through the firmware model."""
