"""The layer contract (pyproject.toml's [tool.importlinter], docs/design.md section 2,
"Layers") names every module of artifact/: `lint-imports` (nox -s lint) checks only the
modules its layers name, so a new module outside them would escape it."""

import tomllib
from pathlib import Path

from tests.conftest import ROOT


def layered(layers: list[str]) -> list[str]:
    """Every module or package the layers name, highest layer first."""
    return [m.strip() for layer in layers for m in layer.replace("|", ":").split(":")]


def unlayered(package: Path, named: list[str]) -> list[str]:
    """The modules under `package` that no named module or package covers (a package's
    bare __init__.py, which imports nothing, need not be named)."""
    left = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if any(name == n or name.startswith(n + ".") for n in named):
            continue
        if parts[-1] == "__init__" and not _imports_anything(path):
            continue
        left.append(name)
    return left


def _imports_anything(path: Path) -> bool:
    return any(line.startswith(("import ", "from ")) for line in path.read_text().splitlines())


def test_every_module_is_in_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = layered(layers)
    assert len(named) == len(set(named)), "a module named in two layers"
    assert unlayered(ROOT / "artifact", named) == []


def test_a_module_left_out_is_named(tmp_path):
    pkg = tmp_path / "artifact"
    (pkg / "rank").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""docstring only"""\n')
    (pkg / "rank" / "__init__.py").write_text("")
    (pkg / "rank" / "worker.py").write_text("")
    (pkg / "rank" / "new.py").write_text("from artifact.rank import worker\n")
    assert unlayered(pkg, ["artifact.rank.worker"]) == ["artifact.rank.new"]
