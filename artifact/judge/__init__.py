"""Stage 3, judge: summary.csv + expected/ -> verdicts.csv; the only stage that judges (docs/design.md section 2)."""
