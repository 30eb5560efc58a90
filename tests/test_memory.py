"""The memory estimate the capability check uses, against peaks measured on an H200.

results/h200x1/all-quick holds every training configuration's measured peak
(`peak_memory_gib`, torch.cuda.max_memory_allocated) beside the estimate the run
used to decide whether it fits (`memory_estimate_gib` in configs.json)."""

import dataclasses
import functools
import importlib.util
import json
import re

import pandas as pd
import pytest

from artifact.core.config import get_model
from artifact.estimate import memory
from tests.conftest import ROOT, run_benchmark

RUN = ROOT / "results" / "h200x1" / "all-quick"


def _measured():
    summary = pd.read_csv(RUN / "summary.csv")
    peaks = summary[(summary["metric"] == "peak_memory_gib") & (summary["mode"] == "overlap")]
    configs = json.loads((RUN / "configs.json").read_text())
    return [
        pytest.param(configs[r.config_id], r.mean, id=f"{r.figure}-{r.config_id}")
        for r in peaks.itertuples()
        if configs[r.config_id].get("parallelism") in ("fsdp", "pipeline")
    ]


def _estimate(config) -> float:
    model = dataclasses.replace(get_model(config["model"]), seq_len=config["seq_len"])
    if config["parallelism"] == "pipeline":
        needed = memory.pipeline_bytes(
            model,
            config["micro_batch"],
            config["num_microbatches"],
            config["precision"],
            config["stages"],
            materialised_attention=config["attention"] == "local",
        )
    else:
        needed = memory.fsdp_bytes(
            model, config["micro_batch"], config["precision"], config["world_size"]
        )
    return needed / memory.GIB


def test_the_h200_run_has_training_peaks():
    assert {p.values[0]["parallelism"] for p in _measured()} == {"fsdp", "pipeline"}
    assert {p.values[0]["precision"] for p in _measured()} == {"fp32", "tf32", "fp16", "bf16"}


@pytest.mark.parametrize("config,peak", _measured())
def test_estimate_within_3_percent_for_zero3_and_15_for_the_pipeline(config, peak):
    """What the plan's footer states (ZeRO-3's terms are counted, the pipeline's are
    Korthikanti's: 13 % over on the one H200 peak)."""
    estimate = _estimate(config)
    if config["parallelism"] == "pipeline":  # what the run used (FSDP's was recounted since)
        assert estimate == pytest.approx(config["memory_estimate_gib"], rel=1e-9)
    off = 0.03 if config["parallelism"] == "fsdp" else 0.15
    assert estimate == pytest.approx(peak, rel=off), (config["model"], config["precision"])


def _benchmark(name: str):
    """benchmarks/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "name,precision,micro_batch,recompute",
    [
        ("gpt3-1.3b", "fp16", 8, False),
        ("gpt3-1.3b", "fp32", 8, False),
        ("gpt3-1.3b", "fp16", 16, True),  # recomputed on 80 GB cards since the fit margin
        ("gpt3-2.7b", "fp16", 32, True),
        ("llama2-13b", "bf16", 8, True),
        ("llama2-13b", "fp32", 8, True),  # the one where a recomputed block outweighs the loss
    ],
)
@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_the_fsdp_estimate_holds_what_the_model_holds(name, precision, micro_batch, recompute):
    """The estimate's activation and loss terms against DecoderLM's own step, counted on the
    meta device (paper shapes, the GPU's attention and RMSNorm kernels): within 4 %. The
    earlier terms (Korthikanti's, with dropout; 10 bytes a logit) were 14 to 18 % over for
    LLaMA-2 13B with recomputation."""
    count = _benchmark("activation_count")
    model = get_model(name)
    held = count.held_bytes(model, micro_batch, precision, recompute)
    estimated = memory.activation_bytes(model, micro_batch, precision, recompute)
    assert estimated == pytest.approx(held, rel=0.04)


@functools.cache
def _zero3(precision: str) -> str:
    """benchmarks/zero3_memory.py's report, rank 0 of 4, two blocks (run once a precision)."""
    out = run_benchmark("zero3_memory", "--world", "4", "--layers", "2", "--precision", precision)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("precision,per_param", [("bf16", 16), ("fp32", 20)])
def test_the_zero3_states_are_what_deepspeed_allocates(precision, per_param):
    """DeepSpeed ZeRO-3 on the CPU, rank 0 of 4 under the fake group, every allocation
    counted (benchmarks/zero3_memory.py): the states at rest are the estimate's bytes a
    parameter of the shard, within 1 % (before session 13 the estimate said 16 in FP32)."""
    states = float(re.search(r"states at rest: ([\d.]+) bytes", _zero3(precision)).group(1))
    assert states == pytest.approx(per_param, rel=0.01)
    assert memory.states_bytes(get_model("gpt3-1.3b"), 1, precision) / memory.total_params(
        get_model("gpt3-1.3b")
    ) == pytest.approx(per_param)


def test_the_estimate_at_w4_holds_the_emulated_gpu_peak():
    """The one peak measured at W > 1: session 12's emulated fig4 on one H200 (GPT-3 1.3B
    ZeRO-3 FP16, rank 0 of 4). Within 2 % with the gathered parameters ZeRO-3 keeps for the
    backward pass; the estimate the run used (before session 13) was 9 % low."""
    run = ROOT / "results" / "h200x1" / "session12" / "emulated-w4"
    summary = pd.read_csv(run / "summary.csv")
    (config_id,) = json.loads((run / "configs.json").read_text())
    config = json.loads((run / "configs.json").read_text())[config_id]
    rows = summary[(summary["metric"] == "peak_memory_gib") & (summary["mode"] == "overlap")]
    peak = float(rows["mean"].iloc[0])
    model = dataclasses.replace(get_model(config["model"]), seq_len=config["seq_len"])
    estimate = memory.fsdp_bytes(model, config["micro_batch"], config["precision"], 4)
    assert peak / config["memory_estimate_gib"] > 1.09  # the run's own estimate
    assert estimate / memory.GIB == pytest.approx(peak, rel=0.02)


PAPER_W4 = ROOT / "results" / "h200x1" / "session17" / "emulated_memory.json"


def test_the_estimate_holds_the_paper_presets_w4_peaks_measured_on_an_h200():
    """benchmarks/emulated_memory.py on one H200 (sessions 14, 15 and 17, rank 0 of 4, paper
    preset, PAPER_W4): every configuration that ran within 10 % of today's estimate
    (issue 31's bound; they read x1.00 to x1.05), by precision."""
    import torch

    from artifact.core.config import get_preset

    em = _benchmark("emulated_memory")
    measured = {r["config_id"]: r for r in json.loads(PAPER_W4.read_text())["rows"]}
    points = em.configurations(get_preset("paper"), 4, list(em.FIGURES), torch.device("cpu"))
    ran = 0
    for point, figures in points:
        row = measured.get(point.config_id)
        if row and row["status"] == "ran":
            estimate = em.row_of(point, figures, 4)["estimate_gib"]
            assert estimate == pytest.approx(row["peak_allocated_gib"], rel=0.10), point.config_id
            ran += 1
    precisions = {r["precision"] for r in measured.values() if r["status"] == "ran"}
    # 32 ran; GPT-3 1.3B FP16 at micro-batch 16 (74.7 GiB) now recomputes on 80 GB cards
    # (memory.fits), so its measured row is not one of today's configurations
    assert ran == 31 and precisions == {"fp16", "bf16", "fp32", "tf32"}


def test_the_fit_rule_separates_what_ran_on_an_h200_from_what_ran_out_of_memory():
    """On one H200 the rows up to 114.2 GiB ran and the one at 134.2 GiB (4 % below the
    device's 139.8) ran out of memory: memory.fits, with its margin, says so of each; the
    bare estimate (need <= memory) would have run the latter. Any margin from 4.2 to 22.4 %
    passes: the table bounds the margin, it does not measure it."""
    doc = json.loads(PAPER_W4.read_text())
    device = doc["gpu_memory_gib"] * memory.GIB
    outcomes = {r["config_id"]: r for r in doc["rows"] if r["status"] in ("ran", "oom")}
    assert {r["status"] for r in outcomes.values()} == {"ran", "oom"}
    for cid, row in outcomes.items():
        need = row["estimate_gib"] * memory.GIB
        assert memory.fits(need, device) == (row["status"] == "ran"), cid
    assert any(r["status"] == "oom" and r["estimate_gib"] * memory.GIB <= device
               for r in outcomes.values())  # fmt: skip


@pytest.mark.slow
def test_the_gathered_parameters_are_those_zero3_keeps():
    """As a backward pass begins, rank 0 of 4 on the CPU still holds gathered every
    parameter of a small model (all within stage3_max_reuse_distance): the estimate's
    gathered_params counts the same, within 1 % (the persistent norms and biases aside)."""
    held, estimate = map(
        float,
        re.search(
            r"begins: ([\d.]+) M parameters \(estimate: ([\d.]+) M\)", _zero3("bf16")
        ).groups(),
    )
    assert estimate == pytest.approx(held, rel=0.01)
