"""What every stage shares: models and presets, run options, errors, units, phase lists (no torch)."""
