"""Measurement: trace -> kernel table, timers, the GPU device layer, power telemetry, power caps."""
