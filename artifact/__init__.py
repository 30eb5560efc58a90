"""overlap-artifact: reproduce arXiv 2507.03114 (compute-communication overlap)."""

__version__ = "0.1.0"
