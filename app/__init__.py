"""The application on top of every layer: the ``dla`` command line, which wires the compiler, the runtime
and the testbench together (``app.targets`` registers the simulators with the runtime)."""
