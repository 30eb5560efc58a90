"""Workloads: the code that runs on each rank, in a mode (artifact.rank.modes). The FSDP
implementations `--fsdp-impl` accepts are artifact.core.options.FSDP_IMPLS."""
