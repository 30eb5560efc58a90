"""Stage 2, analyze: records -> summary.csv, and the statistics of every number (docs/design.md section 2)."""
