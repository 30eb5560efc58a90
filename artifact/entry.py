"""The CLI's entry (`python -m artifact`, `.venv/bin/artifact`).

- The figure registry loads when artifact.cli is imported, so a bad ARTIFACT_FIGURES_DIR
  or figure file is caught here: one line and exit 2, on every command, `--help` included.
- A stdout whose reader has gone (`artifact all | head -3`) stops taking output and the
  run goes on to its end, with one line on stderr saying so: a closed pipe is no reason
  to lose a run (it ended `all` after 6 s, and a `run` exited 1 with every record written).
"""

import contextlib
import io
import os
import sys

from artifact.core.errors import ArtifactError


class ReaderGone(io.TextIOBase):
    """sys.stdout that, once its reader has gone (BrokenPipeError), writes nowhere."""

    def __init__(self, stream):
        self.stream, self.gone = stream, False

    def _drop(self) -> None:
        if not self.gone:
            self.gone = True
            # the interpreter's last flush must not meet the broken pipe either
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return self.stream.encoding


def main() -> int:
    guard = sys.stdout = ReaderGone(sys.stdout)
    try:
        from artifact.cli import main as cli_main
    except ArtifactError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a Ctrl-C during the imports: nothing had started
        print("interrupted by Ctrl-C while starting: nothing was run", file=sys.stderr)
        return 130
    rc = cli_main()
    from artifact.procs import SUITE_LOCK_ENV

    if guard.gone and SUITE_LOCK_ENV not in os.environ:  # under `all`, `all` says it once
        print(
            "note: stdout was closed by its reader (a pipe ended); the run went on, and its "
            "output from then on is in its folder's logs and report",
            file=sys.stderr,
        )
    return rc
