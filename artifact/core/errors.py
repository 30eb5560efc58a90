"""The one error family the CLI turns into a one-line message and exit code 2."""

from collections.abc import Iterable


class ArtifactError(Exception):
    """A user-facing error: one line naming the bad value and, where it helps, the accepted ones."""


class Terminated(Exception):
    """SIGTERM (a job scheduler, `timeout`, `docker stop`), raised where the CLI waits."""


def interrupted_by(e: BaseException) -> str:
    """The signal behind a Terminated or KeyboardInterrupt, as the CLI names it."""
    return "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C (SIGINT)"


def check_positive(flag: str, value: float | None) -> None:
    """`--reps must be at least 1, got 0` (None: the flag was not given)."""
    if value is not None and value < 1:
        raise ArtifactError(f"{flag} must be at least 1, got {value:g}")


def bad_choice(what: str, value: object, accepted: Iterable[object]) -> ArtifactError:
    """`unknown preset 'huge'; accepted: tiny, quick, paper`."""
    names = ", ".join(str(a) for a in accepted)
    return ArtifactError(f"unknown {what} {value!r}; accepted: {names}")
