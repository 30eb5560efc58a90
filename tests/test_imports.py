"""No import cycles inside artifact/ (docs/design.md section 2: data flows one way).

The graph is read from the source with ast: every `import` and `from ... import` of an
artifact module, at module level and inside functions alike (a function-level import
hides a cycle from the interpreter, not from the design). Imports under
`if TYPE_CHECKING:` are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "artifact"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST):
    """Every import statement, skipping the bodies of `if TYPE_CHECKING:`."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            todo.append(child)


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The artifact modules `name` imports: `from a.b import c` is a.b.c where that is a
    module, else a.b; relative imports are resolved against the module's package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in known:
                out.add(sub)
            elif base in known:
                out.add(base)
    return out - {name}


def import_graph() -> nx.DiGraph:
    found = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(found)
    for name, path in found.items():
        graph.add_edges_from((name, other) for other in imported(name, path, set(found)))
    return graph


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module."""
    out = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            cycle = nx.find_cycle(graph.subgraph(component))
            out.append([a for a, _ in cycle] + [cycle[0][0]])
    return sorted(out)


def test_artifact_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_walk_sees_function_level_imports_and_names_a_cycle(tmp_path):
    """The check can fail: two modules that import each other inside functions."""
    graph = import_graph()
    assert graph.has_edge("artifact.__main__", "artifact.entry")  # the walk sees the package
    assert graph.has_edge("artifact.entry", "artifact.cli")  # a function-level import
    a = "def f():\n    from artifact import b\n"
    b = "import artifact.a\n"
    paths = {"artifact.a": tmp_path / "a.py", "artifact.b": tmp_path / "b.py"}
    paths["artifact.a"].write_text(a)
    paths["artifact.b"].write_text(b)
    fake = nx.DiGraph()
    for name, path in paths.items():
        fake.add_edges_from((name, o) for o in imported(name, path, set(paths)))
    assert cycles(fake) == [["artifact.a", "artifact.b", "artifact.a"]]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from . import kernels\n", {"artifact.measure.kernels"}),
        ("from .kernels import kernel_table\n", {"artifact.measure.kernels"}),
        # a name that is no module is the package's own (its __init__ runs)
        (
            "from artifact.measure import kernels, FIELDS\n",
            {"artifact.measure.kernels", "artifact.measure"},
        ),
        ("if TYPE_CHECKING:\n    from artifact.measure import kernels\n", set()),
    ],
)
def test_imports_resolve_to_modules(tmp_path, source, expected):
    path = tmp_path / "timing.py"
    path.write_text(source)
    known = {"artifact.measure", "artifact.measure.kernels", "artifact.measure.timing"}
    assert imported("artifact.measure.timing", path, known) == expected
