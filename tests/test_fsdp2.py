"""FSDP2 (torch's fully_shard) beside DeepSpeed ZeRO-3, on CPU over 2 gloo processes:
the same losses as ZeRO-3, every mode, what reaches gloo in each mode, and the CLI."""

import functools
import inspect
import itertools
import json
import math
import os
import re
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import torch.distributed as dist

from artifact.core.config import get_model, get_preset
from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.estimate import memory
from artifact.measure import kernels
from tests.conftest import run_cli, spawn_gloo

STEPS = 3
MODES = ("overlap", "sequential", "nocomm")


def _fsdp2_calls(cls: str) -> str:
    """The torch.distributed function FSDP2's default `cls` calls on this torch: 2.13's
    all_gather_single / reduce_scatter_single, 2.10's all_gather_into_tensor /
    reduce_scatter_tensor (2.10 has no *_single). Read from its source, so the spy below
    watches the name FSDP2 really calls, and a rename fails here, by name."""
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    calls = set(re.findall(r"\bdist\.(\w+)\(", inspect.getsource(getattr(_fsdp_collectives, cls))))
    assert len(calls) == 1, (
        f"{cls} calls {sorted(calls)}: expected one torch.distributed collective"
    )
    return calls.pop()


GATHER = _fsdp2_calls("DefaultAllGather")
SCATTER = _fsdp2_calls("DefaultReduceScatter")
SPIED = (GATHER, SCATTER, "all_reduce")
# ZeRO-3 and FSDP2 side by side: (model, precision)
PAIRS = (("gpt-tiny", "fp32"), ("llama-tiny", "fp32"), ("gpt-tiny", "bf16"))


class _Watched:
    """A work handle that logs its wait()."""

    def __init__(self, work, name, log):
        self._work, self._name, self._log = work, name, log

    def wait(self, *args, **kwargs):
        self._log.append(("wait", self._name))
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self._work, attr)


def _spy(name: str, log: list) -> None:
    """Log every call that reaches torch.distributed's `name` (installed before the modes'
    wrappers, so it sees only what a mode lets through to gloo) and every wait on it."""
    original = getattr(dist, name)
    signature = inspect.signature(original)

    @functools.wraps(original)  # the modes' wrapper binds the original's signature
    def spy(*args, **kwargs):
        async_op = signature.bind(*args, **kwargs).arguments.get("async_op", False)
        log.append(("issue", name, async_op))
        work = original(*args, **kwargs)
        return _Watched(work, name, log) if work is not None else None

    setattr(dist, name, spy)


def _losses(trainer, mode, steps=STEPS):
    return [float(trainer.step(mode)) for _ in range(steps)]


def _pairs(rank: int) -> dict:
    """3 steps of ZeRO-3 and of FSDP2 from the same weights and data."""
    from artifact.rank.modes import Mode
    from artifact.workloads import fsdp2
    from artifact.workloads.fsdp_deepspeed import FsdpSpec, FsdpTrainer

    cpu, out = torch.device("cpu"), {}
    for model, precision in PAIRS:
        for impl, make in (("deepspeed", FsdpTrainer), ("fsdp2", fsdp2.Fsdp2Trainer)):
            trainer = make(FsdpSpec(get_model(model), 2, precision, impl=impl), cpu, rank)
            out[(model, precision, impl)] = (_losses(trainer, Mode.OVERLAP), trainer.params)
            trainer.close()
    # ZeRO-3 hooked per submodule (DeepSpeed's default) instead of per block (ours)
    from deepspeed.utils import get_z3_leaf_modules

    from artifact.workloads import fsdp_deepspeed

    spec = FsdpSpec(get_model("gpt-tiny"), 2, "fp32")
    for leaves in ((), fsdp_deepspeed.LEAF_MODULES):
        saved, fsdp_deepspeed.LEAF_MODULES = fsdp_deepspeed.LEAF_MODULES, leaves
        trainer = FsdpTrainer(spec, cpu, rank)
        leaf_names = sorted(type(m).__name__ for m in get_z3_leaf_modules(trainer.engine.module))
        out[("leaves", len(leaves))] = (_losses(trainer, Mode.OVERLAP), leaf_names)
        trainer.close()
        fsdp_deepspeed.LEAF_MODULES = saved
    # the control: FSDP2 without gradient clipping (the step ZeRO-3 also clips)
    saved, fsdp2.CLIP_NORM = fsdp2.CLIP_NORM, math.inf
    trainer = fsdp2.Fsdp2Trainer(
        FsdpSpec(get_model("gpt-tiny"), 2, "fp32", impl="fsdp2"), cpu, rank
    )
    out["unclipped"] = _losses(trainer, Mode.OVERLAP)
    fsdp2.CLIP_NORM = saved
    return out


def _modes(rank: int, log: list) -> dict:
    """A fresh FSDP2 trainer a mode, 2 steps; the second one profiled and logged."""
    from torch.profiler import profile

    from artifact.rank.modes import Mode
    from artifact.workloads.fsdp2 import Fsdp2Trainer
    from artifact.workloads.fsdp_deepspeed import FsdpSpec

    out = {}
    for mode in MODES:
        trainer = Fsdp2Trainer(
            FsdpSpec(get_model("gpt-tiny"), 2, "fp32", impl="fsdp2"), torch.device("cpu"), rank
        )
        first = float(trainer.step(Mode(mode)))
        log.clear()
        with profile() as prof:
            second = float(trainer.step(Mode(mode)))
        names = {e.name for e in prof.events() if e.name.startswith(("gloo:", "c10d::"))}
        out[mode] = ([first, second], list(log), sorted(names))
    return out


def _variants(rank: int, log: list) -> dict:
    """FSDP2's fp16 path (loss scaler) and its GPU path (built on the meta device), on CPU."""
    from artifact.rank.modes import Mode
    from artifact.workloads.fsdp2 import Fsdp2Trainer
    from artifact.workloads.fsdp_deepspeed import FsdpSpec

    cpu = torch.device("cpu")
    log.clear()
    fp16 = Fsdp2Trainer(FsdpSpec(get_model("gpt-tiny"), 2, "fp16", impl="fsdp2"), cpu, rank)
    out = {"fp16": (_losses(fp16, Mode.OVERLAP), fp16.scaler.get_scale(), list(log))}
    spec = FsdpSpec(get_model("gpt-tiny"), 2, "fp32", impl="fsdp2")
    meta = Fsdp2Trainer(spec, cpu, rank, on_meta=True)
    qkv = meta.model.blocks[0].qkv.weight
    out["meta"] = (_losses(meta, Mode.OVERLAP), float(qkv.full_tensor().detach().std()))
    return out


def _worker(rank: int, port: int, results) -> None:
    # DeepSpeed asks for torchrun's variables
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    log: list = []
    for name in SPIED:
        _spy(name, log)
    results[rank] = {
        "pairs": _pairs(rank),
        "modes": _modes(rank, log),
        "variants": _variants(rank, log),
    }
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks():
    return spawn_gloo(_worker)


@pytest.mark.slow
def test_zero3_gathers_a_block_as_one_unit(ranks):
    """Each transformer block is one ZeRO-3 leaf (one gather and one pair of hooks, as
    FSDP2 shards it); the losses are those of DeepSpeed's per-submodule hooks, bit for bit."""
    for rank in (0, 1):
        per_block, blocks = ranks[rank]["pairs"][("leaves", 1)]
        per_submodule, none = ranks[rank]["pairs"][("leaves", 0)]
        assert blocks == ["Block"] * get_model("gpt-tiny").layers and none == []
        assert per_block == per_submodule and per_block[-1] < per_block[0]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt-tiny", "llama-tiny"])
def test_fp32_losses_match_zero3(ranks, model):
    """FP32: the same arithmetic in both (the gradient average over 2 ranks is exact in
    binary; only the summation order of the global gradient norm differs), so the losses
    agree to 2e-7 relative, about two float32 ulps at a loss of 6. Measured: identical."""
    for rank in (0, 1):
        pairs = ranks[rank]["pairs"]
        zero3, n_zero3 = pairs[(model, "fp32", "deepspeed")]
        fsdp2, n_fsdp2 = pairs[(model, "fp32", "fsdp2")]
        assert n_fsdp2 == n_zero3 > 100_000  # the same model, counted the same way
        assert fsdp2[-1] < fsdp2[0]  # it trains
        assert fsdp2 == pytest.approx(zero3, rel=2e-7)


@pytest.mark.slow
def test_fp32_comparison_sees_a_missing_clip(ranks):
    """The tolerance is tight enough to catch a real difference: without clipping at 1.0
    the third loss moves by about 1.3e-6 relative (6 ulps)."""
    zero3, _ = ranks[0]["pairs"][("gpt-tiny", "fp32", "deepspeed")]
    unclipped = ranks[0]["pairs"]["unclipped"]
    assert unclipped[0] == zero3[0]  # clipping acts after the first forward
    assert unclipped != pytest.approx(zero3, rel=2e-7)


@pytest.mark.slow
def test_bf16_losses_match_zero3(ranks):
    """BF16: the first step computes with the same bf16 weights, so its loss is the same.
    After it, ZeRO-3's FP32 master weights started from bf16-rounded weights (its engine
    casts the module to bf16 before copying the masters; up to 2^-9 relative), FSDP2's from
    the FP32 ones, so the losses drift apart: measured 7.6e-4 and 9.8e-4 relative. The
    tolerance, 5e-3, is a sixth of one step's loss decrease (about 3 %), so a skipped or
    doubled update still fails."""
    for rank in (0, 1):
        zero3, _ = ranks[rank]["pairs"][("gpt-tiny", "bf16", "deepspeed")]
        fsdp2, _ = ranks[rank]["pairs"][("gpt-tiny", "bf16", "fsdp2")]
        assert fsdp2[0] == pytest.approx(zero3[0], rel=1e-6)
        assert fsdp2 == pytest.approx(zero3, rel=5e-3)
        assert all((a - b) / a > 0.02 for a, b in itertools.pairwise(zero3))  # the decrease


def _issued(log, names=(GATHER, SCATTER)):
    return [e for e in log if e[0] == "issue" and e[1] in names]


@pytest.mark.slow
def test_overlap_runs_fsdp2s_own_collectives(ranks):
    losses, log, names = ranks[0]["modes"]["overlap"]
    gathers = [e for e in _issued(log) if e[1] == GATHER]
    scatters = [e for e in _issued(log) if e[1] == SCATTER]
    # 2 blocks + root gathered for the forward, the 2 blocks again for the backward;
    # one reduce-scatter a unit
    assert (len(gathers), len(scatters)) == (5, 3)
    assert "gloo:all_gather" in names and "c10d::_reduce_scatter_base_" in names


@pytest.mark.slow
def test_sequential_waits_for_every_collective(ranks):
    overlap = ranks[0]["modes"]["overlap"]
    for rank in (0, 1):
        losses, log, names = ranks[rank]["modes"]["sequential"]
        issued = [e for e in log if e[0] == "issue"]
        assert len(_issued(log)) == len(_issued(overlap[1])) == 8
        assert all(async_op for _, _, async_op in issued)  # issued as async, then waited
        # each collective is waited for before anything else is issued
        assert log == [e for i in issued for e in (i, ("wait", i[1]))]
        assert "gloo:all_gather" in names
    assert ranks[0]["modes"]["sequential"][0] == overlap[0]  # the same arithmetic


@pytest.mark.slow
def test_nocomm_runs_no_collective(ranks):
    for rank in (0, 1):
        losses, log, names = ranks[rank]["modes"]["nocomm"]
        assert log == []  # nothing reached torch.distributed's collectives
        assert names == []  # and the profiler saw no gloo or c10d collective
        assert all(math.isfinite(x) for x in losses)


@pytest.mark.slow
def test_fp16_loss_scaler(ranks):
    losses, scale, log = ranks[0]["variants"]["fp16"]
    assert losses[-1] < losses[0] and all(math.isfinite(x) for x in losses)
    assert scale == 2.0**12  # DeepSpeed's initial scale, no overflow in 3 steps
    # the overflow flag and the gradient norm: two all-reduces a step, through the modes
    assert len([e for e in log if e[:2] == ("issue", "all_reduce")]) == 2 * STEPS


@pytest.mark.slow
def test_meta_device_build_initialises_every_shard(ranks):
    losses, std = ranks[0]["variants"]["meta"]
    assert losses[-1] < losses[0] and all(math.isfinite(x) for x in losses)
    # nn.Linear's default init, U(+-1/sqrt(fan_in)): std 1/sqrt(3 * 64)
    assert std == pytest.approx(1 / math.sqrt(3 * 64), rel=0.05)
    assert losses[0] == pytest.approx(math.log(get_model("gpt-tiny").vocab), rel=0.05)


def _ctx(**options):
    return SimpleNamespace(
        preset=get_preset("tiny"),
        world_size=2,
        device=torch.device("cpu"),
        provenance={},
        options=RunOptions(**options),
    )


def test_config_ids_and_records_name_the_implementation():
    from artifact.experiments import fsdp

    config_id, config, spec = fsdp.config_for(_ctx(), "gpt-tiny", 2, "fp32")
    assert config_id == "gpt-tiny_fsdp_fp32_mb2_w2"  # unchanged: the output contract
    assert (config["fsdp_impl"], config["framework"], spec.impl) == (
        "deepspeed",
        "deepspeed-zero3",
        "deepspeed",
    )
    config_id, config, spec = fsdp.config_for(_ctx(), "gpt-tiny", 2, "fp32", "fsdp2")
    assert config_id == "gpt-tiny_fsdp2_fp32_mb2_w2"
    assert (config["fsdp_impl"], config["framework"], config["parallelism"]) == (
        "fsdp2",
        "torch-fsdp2",
        "fsdp",
    )
    # the same activations; DeepSpeed adds its gradient bucket, the gathered parameters it
    # keeps for the backward pass and, in FP32, 4 bytes a parameter (20 against FSDP2's 16)
    ds = fsdp.config_for(_ctx(), "gpt-tiny", 2, "fp32")[2]
    kept = memory.DEEPSPEED_REDUCE_BUCKET + memory.gathered_params(spec.model)
    extra = kept * 4 + 4 * memory.total_params(spec.model) / 2
    assert memory.estimate(ds, 2) - memory.estimate(spec, 2) == pytest.approx(extra)
    assert memory.estimate(spec, 2) > 0


def test_side_by_side_runs_each_point_through_each_implementation():
    """`--fsdp-impl deepspeed,fsdp2`: every point twice, one implementation after the other
    (the sweep, artifact.figures.sweeps; the experiment builds each through fsdp.config_for);
    the default runs DeepSpeed alone."""
    from artifact.experiments import fsdp
    from artifact.figures.sweeps import Where, precision_sweep

    def configs_for(ctx):
        points = precision_sweep(Where.of(ctx), ("fp32",))
        return [fsdp.config_for(ctx, p.model, p.micro_batch, p.precision, p.impl) for p in points]

    both = configs_for(_ctx(fsdp_impl="deepspeed,fsdp2"))
    assert [c.config_id for c in both] == [
        "gpt-tiny_fsdp_fp32_mb2_w2",
        "llama-tiny_fsdp_fp32_mb2_w2",
        "gpt-tiny_fsdp2_fp32_mb2_w2",
        "llama-tiny_fsdp2_fp32_mb2_w2",
    ]
    assert [c.spec.impl for c in both] == ["deepspeed"] * 2 + ["fsdp2"] * 2
    assert [c.spec.impl for c in configs_for(_ctx())] == ["deepspeed"] * 2


def test_unknown_implementation_is_one_line():
    from artifact.workloads.fsdp_deepspeed import FsdpSpec

    with pytest.raises(
        ArtifactError, match="unknown FSDP implementation 'zero3'; accepted: deepspeed, fsdp2"
    ):
        FsdpSpec(get_model("gpt-tiny"), 2, "fp32", impl="zero3")


# --- the CLI --------------------------------------------------------------------------

CONFIG = "gpt-tiny_fsdp2_fp32_mb2_w2"
RUN = ("run", "fig4", "--preset", "tiny", "--models", "gpt-tiny", "--parallelisms", "fsdp")


@pytest.fixture(scope="module")
def fig4_fsdp2(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig4-fsdp2")
    res = run_cli(*RUN, "--fsdp-impl", "fsdp2", "--reps", "1", "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


@pytest.mark.slow
def test_cli_fig4_fsdp2_writes_records(fig4_fsdp2):
    for mode in MODES:
        rec = json.loads((fig4_fsdp2 / f"records/fig4/{CONFIG}/{mode}/rep-000.json").read_text())
        assert rec["config"]["fsdp_impl"] == "fsdp2"
        assert rec["config"]["framework"] == "torch-fsdp2"
        assert rec["metrics"]["e2e_ms"] > 0
    assert sorted(p.name for p in (fig4_fsdp2 / "records/fig4").iterdir()) == [CONFIG]
    df = pd.read_csv(fig4_fsdp2 / "summary.csv")
    rows = df[df["config_id"] == CONFIG].set_index(["mode", "metric"])
    assert rows.loc[("nocomm", "communication_ms"), "mean"] == 0
    assert rows.loc[("overlap", "communication_ms"), "mean"] > 0
    assert rows.loc[("derived", "slowdown"), "kind"] == "derived"
    plan = json.loads((fig4_fsdp2 / "plan.json").read_text())
    assert plan["figures"]["fig4"]["options"]["fsdp_impl"] == "fsdp2"


@pytest.mark.slow
def test_cli_fig4_fsdp2_traces(fig4_fsdp2):
    tables = {
        m: kernels.kernel_table(
            kernels.load_trace(fig4_fsdp2 / "traces" / "fig4" / f"{CONFIG}-{m}-rank0.json")
        )
        for m in MODES
    }
    comm = {m: int((t["category"] == "communication").sum()) for m, t in tables.items()}
    assert comm["overlap"] == comm["sequential"] > 0 and comm["nocomm"] == 0
    gemms = {m: int((t["category"] == "compute").sum()) for m, t in tables.items()}
    assert len(set(gemms.values())) == 1 and gemms["overlap"] > 0  # the same compute


@pytest.mark.slow
def test_cli_refuses_another_implementation_in_the_same_plan(fig4_fsdp2):
    res = run_cli(*RUN, "--out", str(fig4_fsdp2))
    assert res.returncode == 2
    assert "ran fig4 with other options (--fsdp-impl" in res.stderr


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_cli_bad_implementation(tmp_path):
    res = run_cli(*RUN, "--fsdp-impl", "zero3", "--out", str(tmp_path / "x"))
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "error: unknown FSDP implementation 'zero3'; accepted: deepspeed, fsdp2"
    )
    assert not (tmp_path / "x").exists()
    res = run_cli("run", "fig8", "--preset", "tiny", "--fsdp-impl", "fsdp2")
    assert res.returncode == 2
    assert "fig8 does not take --fsdp-impl" in res.stderr


@pytest.mark.slow
def test_mfu_benchmark_runs_on_cpu():
    """benchmarks/fsdp_mfu.py with the tiny model (FSDP2 only here: DeepSpeed's one-time
    CPU op load would add about a minute; its path is the same but for the trainer)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    res = subprocess.run(
        [sys.executable, "benchmarks/fsdp_mfu.py", "--device", "cpu", "--model", "gpt-tiny"]
        + ["--impls", "fsdp2", "--warmup", "1", "--iters", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout)
    assert (out["model"], out["seq"], out["micro_batch"], out["precision"]) == (
        "gpt-tiny",
        32,
        2,
        "fp32",
    )
    r = out["fsdp2"]
    assert r["params"] > 100_000 and r["step_ms"] > 0
    assert r["mfu"] == pytest.approx(r["tflops_per_gpu"] / out["peak_tflops"])
    # 6 x parameters x tokens a step over the step time
    tokens = out["micro_batch"] * out["seq"]
    assert r["tflops_per_gpu"] == pytest.approx(6 * r["params"] * tokens / r["step_ms"] / 1e9)
    assert r["loss_first_last"][1] < r["loss_first_last"][0]


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_mfu_benchmark_keeps_stdout_for_its_json():
    """What libraries print on file descriptor 1 while the benchmark runs (torch 2.10's gloo
    prints "[Gloo] Rank 0 is connected ..." from C++) goes to stderr, so that stdout is the
    JSON alone (`> mfu.json`); afterwards stdout is stdout again."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import os, sys; sys.path.insert(0, 'benchmarks'); from fsdp_mfu import json_stdout\n"
        "print('before')\n"
        "with json_stdout() as out:\n"
        "    os.write(1, b'[Gloo] from C++\\n'); print('from Python')\n"
        "    print('{\"k\": 1}', file=out)\n"
        "print('after')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.splitlines() == ["before", '{"k": 1}', "after"]
    assert res.stderr.splitlines() == ["[Gloo] from C++", "from Python"]
