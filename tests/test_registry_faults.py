"""A figure registry that cannot load is one line, exit 2, on every command (issue 61
item 8): a missing ARTIFACT_FIGURES_DIR, a figure file that does not import or has no
SPEC, a spec whose default repetitions are below 1."""

import pytest

from tests.conftest import run_cli
from tests.test_registry import THROWAWAY_SPEC

CASES = {
    "missing": (None, "is not a folder"),
    "syntax": ("SPEC = (\n", "does not import (SyntaxError at line 1"),
    "raises": ("raise ValueError('no')\n", "does not import (ValueError"),
    "no_spec": ("x = 1\n", "defines no SPEC"),
    "fp8": (
        "from artifact.figures import derived\nfrom artifact.figures.spec import TRAINING_OPTIONS, FigureSpec\n"
        "SPEC = FigureSpec(name='fig99', title='t', experiment='precision_sweep', "
        "options=TRAINING_OPTIONS, params={'precisions': ('fp32', 'fp8')})\n",
        "params precisions has 'fp8'; accepted: fp32, tf32, fp16, bf16",
    ),
    "no_reps": (
        THROWAWAY_SPEC.replace(
            'expected="fig99.yaml",', 'expected="fig99.yaml", default_reps=lambda p: -1,'
        ),
        "default_reps gives -1 at preset tiny",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("argv", [("--help",), ("run", "fig8", "--preset", "tiny")])
def test_a_registry_that_cannot_load_is_one_line(tmp_path, case, argv):
    source, said = CASES[case]
    folder = tmp_path / "figures"
    if source is not None:
        folder.mkdir()
        (folder / "fig99.py").write_text(source)
    out = tmp_path / "out"
    extra = ("--out", str(out)) if argv[0] == "run" else ()
    res = run_cli(*argv, *extra, env={"ARTIFACT_FIGURES_DIR": str(folder)}, timeout=120)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and lines[0].startswith("error:") and said in lines[0], res.stderr
    assert not out.exists()
