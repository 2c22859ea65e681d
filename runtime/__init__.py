"""Runtime: the trace format and player, the loadable executor, the Target protocol and targets."""
