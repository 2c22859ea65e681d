"""Robustness of every reader: hypothesis mutates real files of each input format (NVDLA traces, ONNX and
Caffe models, our loadable, NVDLA flatbuffer loadables) and checks that the real parser either accepts them
or refuses them with one of our error types naming the file, never an uncaught exception.

``mutate`` holds the mutators, ``formats`` the per-format seeds and harnesses, ``throughput`` the examples/s
figures the suite prints, and ``test_parser_fuzz`` the tests (``ROBUSTNESS_EXAMPLES`` in total per run).
"""
