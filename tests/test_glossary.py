"""The glossary covers every term of art the report and README use (issue 47): the terms
are extracted from the text (abbreviations, and the artifact's phrases where they occur),
and one without an entry fails."""

import re

from artifact.report.glossary import GLOSSARY
from tests.conftest import ROOT
from tests.test_report import h100_run  # noqa: F401 (a fixture)

# names of things, not terms of art (products, companies, libraries defined by their own
# documentation, file and shell placeholders, units): a reader looks them up by name
_NAMES = (
    "GPU GPUs CPU CPUs NVIDIA AMD CUDA ROCm HIP ACM PEP README CLI ETA JSON CSV HTML "
    "PDF PNG YAML API OS UTC SIGINT SIGTERM HTTP SSH PCIe NVLink NVLS DMA DIR FIG OUT "
    "NNN HOST PORT PWD STAGE GB GiB MiB KiB TB TFLOP FLOP FLOPs MB USDT DOI LICENSE "
    "AVG HBM HBM3 HBM3e GPT AE II III IV VI OK URL ID CI's EPYC"
)
NAMES = set(_NAMES.split())
GPU_NAME = re.compile(r"^(H|A|B|MI|R|L)\d+[A-Z]?$")  # H200, A100, MI250, R580
# the artifact's own phrases: where the report or README uses one, the glossary defines it
PHRASES = (
    "sequential penalty",
    "overlap fraction",
    "zero-byte control",
    "negative control",
    "scaled MAD",
    "copy engine",
    "phase",
    "noise floor",
    "A/A check",
    "settling",
    "interleaved rounds",
    "Williams design",
    "same records as",
    "of the paper's grid",
    "Sidak",
    "delta method",
    "proxy",
    "round-adjusted",
    "profiled pass",
    "timed pass",
    "stopping rule",
    "micro-batch",
    "recomputation",
    "world size",
    "GPT-3 XL",
    "TDP",
    "V1",
    "V2",
    "V3",
    "contention map",
    "not applicable",
    "not run",
    "vs nocomm",
    "compute beside communication",
    "interval sweep",
    "dress rehearsal",
    "functional check",
    "ranks per GPU",
)


def _words_of_terms() -> set[str]:
    return {w for term, _ in GLOSSARY for w in re.findall(r"[A-Za-z0-9/-]+", term)}


def _abbreviations(text: str) -> set[str]:
    """Words in capitals (with digits: V1, E2E, FP16), less names and GPU models."""
    found = set(re.findall(r"(?<![\w/.-])([A-Z][A-Z0-9]+[a-z]?)(?![\w/-])", text))
    return {w for w in found if w not in NAMES and not GPU_NAME.match(w)}


def _missing(text: str) -> list[str]:
    terms = " ".join(term for term, _ in GLOSSARY).lower()
    words = _words_of_terms()
    missing = sorted(
        a for a in _abbreviations(text) if a not in words and a.rstrip("s") not in words
    )
    missing += [p for p in PHRASES if p.lower() in text.lower() and p.lower() not in terms]
    return missing


def test_every_term_the_report_and_readme_use_is_in_the_glossary(h100_run):  # noqa: F811
    report = (h100_run / "report" / "appendix.md").read_text()
    body = report[: report.index("# I. Glossary")]  # the glossary itself is not a use
    missing = _missing(body)
    assert not missing, f"the report uses terms the glossary lacks: {', '.join(missing)}"
    missing = _missing((ROOT / "README.md").read_text())
    assert not missing, f"README uses terms the glossary lacks: {', '.join(missing)}"


def test_the_extraction_fails_on_a_term_without_an_entry():
    text = "The XPU's zero-byte control reads 0; the overlap fraction is 0.3 (V3)."
    assert _missing(text) == ["XPU"]
    assert _missing("a copy engine and a wombat phase") == []
    assert _missing("the GCD count") == ["GCD"]
