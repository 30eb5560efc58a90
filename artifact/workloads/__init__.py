"""Workloads: the code that runs on each rank, in a mode (artifact.modes)."""

# FSDP's implementations (`run --fsdp-impl`): DeepSpeed ZeRO-3, the paper's and the
# default, and torch's FSDP2 (artifact.workloads.fsdp2). Here, so the CLI checks the flag
# before torch loads.
FSDP_IMPLS: tuple[str, ...] = ("deepspeed", "fsdp2")
