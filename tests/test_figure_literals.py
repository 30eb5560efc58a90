"""Figure knowledge lives on the figure's spec (artifact/figures/): no module outside that
package names a figure as a string, and every kind a spec declares is one the report or
compare knows (issue 62, item 5)."""

import ast
from pathlib import Path

from artifact.figures import REGISTRY
from artifact.figures.names import figure_names

ARTIFACT = Path(__file__).resolve().parents[1] / "artifact"
# where figure names belong: the registry (expected/ and tests/ are outside artifact/)
FIGURES_PACKAGE = ARTIFACT / "figures"


def figure_literals(root: Path, names: set[str], skip: set[str]) -> list[str]:
    """'file:line: 'fig7'' for each string constant equal to a figure name under `root`,
    but in FIGURES_PACKAGE and the `skip` files (paths relative to `root`)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        if path.is_relative_to(FIGURES_PACKAGE) or where in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"artifact/{where}:{node.lineno}: {node.value!r}")
    return found


def test_no_figure_name_outside_the_figures_package():
    found = figure_literals(ARTIFACT, set(figure_names()), set())
    assert not found, (
        "a figure's name outside artifact/figures/: declare what the code does for it on "
        "its spec (FigureSpec) and look the spec up instead:\n" + "\n".join(found)
    )


def test_the_check_finds_a_name_put_back(tmp_path):
    """The walk sees a name in a comparison, a call and an f-string's expression alike."""
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "plots.py").write_text(
        'def f(fig, quick):\n    if fig == "fig7":\n        return spec_of("v2")\n'
        "    return f\"{quick['fig8']} x\"\n"
    )
    found = figure_literals(tmp_path, set(figure_names()), set())
    assert found == [
        "artifact/report/plots.py:2: 'fig7'",
        "artifact/report/plots.py:3: 'v2'",
        "artifact/report/plots.py:4: 'fig8'",
    ]
    assert figure_literals(tmp_path, set(figure_names()), {"report/plots.py"}) == []


def test_every_declared_kind_is_one_the_report_or_compare_knows():
    from artifact.judge.compare import CHECKS
    from artifact.report.build import SECTIONS
    from artifact.report.validations import VALIDATIONS

    for name, spec in REGISTRY.items():
        unknown = set(spec.report_sections) - set(SECTIONS) - set(VALIDATIONS)
        assert not unknown, f"{name}: report_sections {sorted(unknown)} unknown to the report"
        assert set(spec.checks) <= set(CHECKS), f"{name}: checks {spec.checks} unknown to compare"
