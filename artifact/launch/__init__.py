"""Stage 1, the launcher: `run FIG` in the CLI process, up to and around torchrun
(docs/design.md section 2). The ranks' side is artifact.rank; neither package imports the
other: the launcher names the worker's module to torchrun as a string."""
