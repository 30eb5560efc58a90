"""requirements/check_lock.py: the CUDA lock fits the oldest driver the image accepts (R580, CUDA 13.0)."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_lock", ROOT / "requirements/check_lock.py")
check_lock = importlib.util.module_from_spec(spec)
sys.modules["check_lock"] = check_lock  # dataclasses look their module up there
spec.loader.exec_module(check_lock)

LOCK = (ROOT / "requirements/lock-cuda.txt").read_text()


def planted(old: str, new: str) -> str:
    """The real lock with one line changed (the line must be there)."""
    assert re.search(old, LOCK, re.M), old
    return re.sub(old, new, LOCK, count=1, flags=re.M)


def test_the_real_lock_fits_r580(capsys):
    assert check_lock.min_driver() == 580
    assert check_lock.main([str(ROOT / "requirements/lock-cuda.txt")]) == 0
    out = capsys.readouterr().out
    # 17 CUDA packages; the two of a newer minor (13.5) are the allowed ones, and only they
    assert "17 CUDA packages run on driver R580 (CUDA 13.0)" in out
    assert "newer minor allowed: cuda-bindings, nvidia-nvjitlink" in out


def test_the_lock_is_parsed_with_what_brought_each_package():
    by_name = {p.name: p for p in check_lock.parse_lock(LOCK)}
    assert by_name["nvidia-cufft"].version == "12.0.0.61"
    assert by_name["nvidia-cufft"].via == {"cuda-toolkit"}
    assert {"cuda-toolkit", "nvidia-cufft", "nvidia-cusolver", "nvidia-cusparse"} == (
        by_name["nvidia-nvjitlink"].via
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # a 14.x package: a newer major is never covered
        (
            r"^nvidia-nvjitlink==13\.5\.37",
            "nvidia-nvjitlink==14.0.2",
            "nvidia-nvjitlink==14.0.2 needs CUDA 14.0, newer than CUDA 13.0",
        ),
        # a newer minor of a package that may need the newer driver: refused
        (
            r"^nvidia-cuda-runtime==13\.0\.96",
            "nvidia-cuda-runtime==13.2.51",
            "nvidia-cuda-runtime==13.2.51 needs CUDA 13.2, newer than CUDA 13.0",
        ),
        (
            r"^cuda-toolkit==13\.0\.3\.0",
            "cuda-toolkit==13.1.0.0",
            "cuda-toolkit==13.1.0.0 needs CUDA 13.1, newer than CUDA 13.0",
        ),
        (
            r"^nvidia-nccl-cu13==",
            "nvidia-nccl-cu14==",
            "nvidia-nccl-cu14==2.29.7 is built for CUDA 14, newer than CUDA 13.0",
        ),
        (
            r"^nvidia-cufft==12\.0\.0\.61 \\\n((?:    --hash.*\n)+)    # via cuda-toolkit",
            r"nvidia-cufft==12.0.0.61 \\\n\1    # via torch",
            "nvidia-cufft==12.0.0.61: cannot tell which CUDA it needs",
        ),
        # an unknown package that cuda-toolkit does not pin
        (
            r"^nvidia-nvtx==13\.0\.85 \\\n((?:    --hash.*\n)+)    # via cuda-toolkit",
            r"nvidia-nvfoo==1.0.0 \\\n\1    # via torch",
            "nvidia-nvfoo==1.0.0: cannot tell which CUDA it needs",
        ),
    ],
)
def test_a_planted_newer_or_unknown_cuda_package_fails_by_name(tmp_path, capsys, old, new, message):
    lock = tmp_path / "lock-cuda.txt"
    lock.write_text(planted(old, new))
    assert check_lock.main([str(lock)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"lock-cuda.txt: {message}"), err


def test_a_newer_minor_is_allowed_only_where_the_rule_says_why():
    pkgs = check_lock.parse_lock(
        "nvidia-nvjitlink==13.5.37\ncuda-bindings==13.5.0\nnvidia-nvtx==13.5.1\n"
    )
    assert check_lock.problems(pkgs, (13, 0)) == [
        "nvidia-nvtx==13.5.1 needs CUDA 13.5, newer than CUDA 13.0"
    ]
    assert check_lock.problems(pkgs, (13, 5)) == []  # a newer driver takes all three
    # NVML's binding and the pure-Python finder hold no CUDA code
    assert check_lock.problems(check_lock.parse_lock("nvidia-ml-py==14.900.1\n"), (13, 0)) == []


def test_a_bad_argument_exits_2(tmp_path):
    assert check_lock.main([str(tmp_path / "missing.txt")]) == 2
