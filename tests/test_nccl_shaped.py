"""The NCCL-shaped stand-in (artifact.workloads.nccl_shaped) on CPU: its Triton kernel under
Triton's interpreter, its pacing through a clock seam, and --stand-in nccl-shaped under
--emulate-world."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from artifact.core.errors import ArtifactError
from artifact.core.options import RunOptions
from artifact.workloads import nccl_shaped as ns
from tests.conftest import ROOT, spawn_gloo

# The ring's HBM bytes at rank 0 per collective of W chunks of c bytes, written out here
# (not taken from the module): a send reads, a receive writes, a reduction reads two and
# writes one; a gather also copies its own shard, a reduce-scatter starts with one copy.
FORMULA = {
    "all_gather": lambda w: (w, w),
    "reduce_scatter": lambda w: (2 * w - 1, w),
    "all_reduce": lambda w: (3 * w - 2, 2 * w - 1),
}

_INTERPRETED = textwrap.dedent(
    """
    import json, torch
    from artifact.workloads import nccl_shaped as ns
    out, c, ctas = {}, 3000, 3
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        for w in (2, 4):
            x = torch.randn(c if kind == "all_gather" else w * c)
            orig = x.clone()
            if kind == "all_gather":
                bufs = {"in": x, "out": torch.empty(w * c)}
            elif kind == "reduce_scatter":
                bufs = {"in": x, "out": torch.empty(c)}
            else:
                bufs = {"out": x}
            bufs["fifo"] = torch.empty(c)
            r, wr, seen = ns.launch(bufs, ns.plan(kind, w), c, ctas).read()
            if kind == "all_gather":
                ok = torch.equal(bufs["out"].view(w, -1), orig.expand(w, -1))
            elif kind == "reduce_scatter":
                ok = torch.allclose(bufs["out"], orig.view(w, -1).sum(0), atol=1e-5)
            else:
                ok = torch.allclose(x.view(w, -1), orig.view(w, -1).sum(0).expand(w, -1), atol=1e-5)
            out[f"{kind}/{w}"] = [r, wr, seen, bool(ok)]
    spin = ns.launch({"out": torch.randn(4 * c), "fifo": torch.empty(c)},
                     ns.plan("all_reduce", 4), c, 5, move_bytes=False).read()
    print(json.dumps({"rows": out, "spin": spin}))
    """
)


@pytest.fixture(scope="module")
def interpreted():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _INTERPRETED],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
@pytest.mark.parametrize("kind", sorted(FORMULA))
@pytest.mark.parametrize("w", [2, 4])
def test_the_kernel_counts_the_rings_bytes_and_launches_c_ctas(interpreted, kind, w):
    reads, writes, seen, correct = interpreted["rows"][f"{kind}/{w}"]
    r, wr = FORMULA[kind](w)
    assert (reads, writes) == (r * 3000 * 4, wr * 3000 * 4)  # counted by the kernel's atomics
    assert seen == 3  # every one of C CTAs ran
    assert correct  # gathers replicate the shard; reductions equal torch's sum of the W chunks


def test_a_spinning_kernel_holds_its_ctas_and_moves_nothing(interpreted):
    assert interpreted["spin"] == [0, 0, 5]


def test_the_torch_path_moves_the_same_bytes_as_the_kernel():
    """Without Triton (a CPU run), the plan runs as torch ops counted by the same formula."""
    w, c = 4, 1000
    x = torch.randn(w * c)
    orig = x.clone()
    r, wr, seen = ns.launch(
        {"out": x, "fifo": torch.empty(c)}, ns.plan("all_reduce", w), c, 8
    ).read()
    assert (r, wr) == (10 * c * 4, 7 * c * 4) and seen == 0  # no CTA ran on a CPU
    assert torch.allclose(x.view(w, -1)[2], orig.view(w, -1).sum(0), atol=1e-5)


def test_average_divides_the_final_sum_by_w():
    w, c = 4, 10
    x, out = torch.arange(1.0, w * c + 1), torch.empty(c)
    ns.launch(
        {"in": x, "out": out, "fifo": torch.empty(c)},
        ns.plan("reduce_scatter", w, average=True),
        c,
        1,
    )
    assert torch.allclose(out, x.view(w, -1).mean(0))


def test_deadlines_spread_the_collectives_time_over_its_steps():
    assert ns.deadlines(4, 1000) == [250, 500, 750, 1000]
    assert ns.deadlines(3, 10) == [3, 6, 10]  # the last step ends at the collective's time
    assert ns.deadlines(0, 1000) == []


def test_pacing_waits_for_each_deadline_on_the_clock_it_is_given():
    """A fake clock that advances 7 ns a reading: each step is released at the first
    reading at or past its deadline, never before; the steps run in order."""
    now = [0]

    def clock():
        now[0] += 7
        return now[0]

    ran = []
    released = ns.pace(100, 4, ran.append, clock)
    assert ran == [0, 1, 2, 3]
    assert all(r >= d for r, d in zip(released, ns.deadlines(4, 100), strict=True))
    assert all(r - d < 7 + 7 for r, d in zip(released, ns.deadlines(4, 100), strict=True))


def test_a_plan_for_an_unknown_collective_is_refused():
    with pytest.raises(ValueError, match="all_to_all"):
        ns.plan("all_to_all", 4)


# --- --stand-in and --comm-ctas ---------------------------------------------------------


@pytest.mark.parametrize(
    "flags, named",
    [
        ({"stand_in": "nccl"}, "--stand-in 'nccl'"),
        ({"stand_in": "nccl-shaped"}, "needs --emulate-world"),
        ({"emulate_world": "4", "stand_in": "copy", "comm_ctas": "16"}, "--comm-ctas"),
        ({"emulate_world": "4", "stand_in": "nccl-shaped", "comm_ctas": "0"}, "--comm-ctas '0'"),
        ({"colocate": "1"}, "--colocate '1'"),
    ],
)
def test_bad_stand_in_flags_are_one_line_naming_the_value(flags, named):
    with pytest.raises(ArtifactError) as e:
        RunOptions.from_flags(**flags)
    assert named in str(e.value) and "\n" not in str(e.value)


def test_the_default_stand_in_is_left_out_so_old_plans_resume():
    assert RunOptions.from_flags(emulate_world="4", stand_in="copy").as_json() == {
        "emulate_world": 4
    }
    shaped = RunOptions.from_flags(emulate_world="4", stand_in="nccl-shaped", comm_ctas="8")
    assert shaped.as_json() == {"emulate_world": 4, "stand_in": "nccl-shaped", "comm_ctas": 8}


def _shaped_rank(rank: int, port: int, results):
    import torch.distributed as dist

    from artifact.rank import emulation
    from artifact.rank.modes import Mode, collectives_for, install_collective_modes

    emulation.join(4, torch.device("cpu"), stand_in="nccl-shaped")
    install_collective_modes()
    with collectives_for(Mode.OVERLAP.value, torch.device("cpu")):
        t = torch.arange(1.0, 4 * 1024 + 1)
        dist.all_reduce(t)
        gathered = torch.zeros(4 * 1024)
        dist.all_gather_into_tensor(gathered, torch.ones(1024))
        dist.all_reduce(torch.ones(4, dtype=torch.int64))  # an integer flag: the copies
    results["traffic"] = dict(emulation.TRAFFIC)
    results["hbm"] = list(emulation.shaped_bytes(torch.device("cpu")))
    results["sum"] = t.view(4, -1)[0].tolist()[:3]
    results["gathered"] = gathered.unique().tolist()
    results["fallbacks"] = dict(emulation.FALLBACKS)
    dist.destroy_process_group()


@pytest.mark.slow  # over 1.5 s on 2 cores (a CLI process, or a long simulation)
def test_emulated_nccl_shaped_traffic_counts_the_link_bytes_the_copies_count():
    """Rank 0 of 4: the link bytes (TRAFFIC) are the copies' (2(W-1)/W for an all-reduce,
    (W-1)/W for a gather); the memory traffic is the ring's; an integer all-reduce falls
    back to the copies and is counted as such."""
    r = spawn_gloo(_shaped_rank, nprocs=1)
    n, size = 4 * 1024, 4
    assert r["traffic"]["all_reduce"] == 2 * 3 * n * size // 4 + 2 * 3 * 1 * 8  # + the int flag
    assert r["traffic"]["all_gather"] == 3 * n * size // 4
    c = 1024 * size
    assert r["hbm"][:2] == [
        10 * c + 4 * c,
        7 * c + 4 * c,
    ]  # all-reduce (3W-2, 2W-1) + gather (W, W)
    assert r["sum"] == [1 + 1025 + 2049 + 3073, 2 + 1026 + 2050 + 3074, 3 + 1027 + 2051 + 3075]
    assert r["gathered"] == [1.0]
    assert r["fallbacks"] == {"all_reduce: not a floating-point dtype": 1}
