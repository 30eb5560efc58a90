"""The appendix-style report: report/appendix.{md,html,tex} and report/figures/."""

from artifact.report.build import write_report

__all__ = ["write_report"]
