"""Float kernels shared by the compiler (calibration, the float reference) and the runtime (CPU tasks)."""
