"""Workloads: the code that runs on each rank, in a mode (artifact.run.modes)."""

# FSDP's implementations (`run --fsdp-impl`): DeepSpeed ZeRO-3, the paper's and the
# default, and torch's FSDP2 (artifact.workloads.fsdp2). Here, so the CLI checks the flag
# before torch loads.
FSDP_IMPLS: tuple[str, ...] = ("deepspeed", "fsdp2")
PAPER_FSDP_IMPL = FSDP_IMPLS[0]


def beyond_paper(config: dict) -> bool:
    """Whether a configuration ran an FSDP implementation other than the paper's: the
    report shows its rows, compare judges no item of the paper on them."""
    return config.get("fsdp_impl", PAPER_FSDP_IMPL) != PAPER_FSDP_IMPL
