"""cocotb testbench: NVDLA traces on RTL under Icarus and Verilator.

Parts (each small, composed by ``bench.Testbench``):
- ``csb``: CSB master driver (``csb2nvdla_*`` / ``nvdla2csb_*``);
- ``memory``: cocotbext-axi ``AxiRam`` per NVDLA memory port, storing into a ``golden.memory.Memory``;
- ``interrupt``: monitor of the level interrupt ``dla_intr``;
- ``target``: ``RtlTarget``, the ``runtime.target.Target`` protocol over those;
- ``engines``: what a trace needs and what the DUT's CFGROM advertises (N/A rule);
- ``bench``: wiring, reset, watchdog, one trace job -> one result file;
- ``trace_test``: the cocotb test module (one cocotb test per trace);
- ``runner``: content-hashed builds and simulations over ``cocotb_tools.runner``;
- ``suite``: ``dla trace --target icarus|verilator``;
- ``network``, ``network_test``: ``dla run --target icarus|verilator`` (whole loadables, CFGROM probe,
  golden fallback for missing engines) and its cocotb test module;
- ``filelist``, ``results``: file lists and the job/result file formats.
"""
