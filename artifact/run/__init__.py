"""Stage 1, run: the CLI's launch of the ranks and what every rank does (docs/design.md section 2)."""
