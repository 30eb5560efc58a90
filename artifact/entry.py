"""The CLI's entry (`python -m artifact`, `.venv/bin/artifact`): the figure registry loads
when artifact.cli is imported, so a bad ARTIFACT_FIGURES_DIR or figure file is caught here,
one line and exit 2, on every command, `--help` included."""

import sys

from artifact.core.errors import ArtifactError


def main() -> int:
    try:
        from artifact.cli import main as cli_main
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return cli_main()
