"""`pip check` as the images' build step, judged for the Python the locks were resolved for.

    python requirements/pip_check.py --python 3.12

Where this Python is that version (the real base images) it is plain `python -m pip
check`. Where it is not (check-image.sh's stand-in bases hold CPython 3.11), plain pip
check reports requirements that only hold below 3.12 (`jupyter-server requires
overrides`: overrides is needed on Python < 3.12 only, so the 3.12 lock leaves it out)
and would fail every stand-in build for a gap the real image does not have. There, pip's
own check runs with the environment markers of the target Python instead, and says so:
a real gap (a package the lock forgot, a version two packages disagree on) still fails.
Exit status: pip check's (0 clean, 1 broken requirements); 2 for a bad --python.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys


def target_markers(version: str) -> dict[str, str]:
    """The marker variables that differ on Python `version` ('3.12'): the rest stay this host's."""
    return {"python_version": version, "python_full_version": f"{version}.0"}


def check_as(version: str) -> int:
    """pip's check with `version`'s markers: pip evaluates a requirement's marker through
    packaging's default_environment(), which is replaced for the run."""
    from pip._internal.cli.main import main as pip_main
    from pip._vendor.packaging import markers

    native = markers.default_environment

    def environment():
        env = native()
        env.update(target_markers(version))
        return env

    markers.default_environment = environment
    try:
        return pip_main(["check"])
    finally:
        markers.default_environment = native


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python requirements/pip_check.py")
    p.add_argument("--python", required=True, help="the locks' Python, MAJOR.MINOR (3.12)")
    args = p.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python):
        print(f"--python {args.python!r}: expected MAJOR.MINOR, e.g. 3.12", file=sys.stderr)
        return 2
    here = ".".join(platform.python_version_tuple()[:2])
    if here == args.python:
        return subprocess.call([sys.executable, "-m", "pip", "check"])
    print(
        f"pip check: this Python is {platform.python_version()}, the locks are for "
        f"{args.python}: requirements judged with Python {args.python}'s markers",
        flush=True,
    )
    return check_as(args.python)


if __name__ == "__main__":
    sys.exit(main())
