"""Measurement: trace -> kernel table, timers, power telemetry, power/clock caps."""
