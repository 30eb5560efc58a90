"""Workloads: the code that runs on each rank, in a mode (artifact.modes)."""
