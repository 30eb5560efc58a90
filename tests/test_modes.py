"""The modes on real gloo collectives: 2 processes on CPU."""

import functools
import os
from collections import Counter
from itertools import pairwise

import pytest
import torch
import torch.distributed as dist

from artifact.measure import timing
from artifact.rank.modes import (
    DONE,
    Mode,
    balanced_order,
    collectives_for,
    install_collective_modes,
    williams_rows,
)
from tests.conftest import spawn_gloo

COUNTED = ("all_gather_into_tensor", "all_reduce", "reduce_scatter_tensor")


def _count_bytes(moved: Counter):
    """The seam: each counted collective's tensor bytes, by name, before the modes wrap it."""
    for name in COUNTED:
        original = getattr(dist, name)

        @functools.wraps(original)  # the modes bind arguments by the real signature
        def counting(*args, _original=original, _name=name, **kwargs):
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            moved[_name] += sum(t.numel() * t.element_size() for t in tensors)
            return _original(*args, **kwargs)

        setattr(dist, name, counting)


def _worker(rank: int, port: int, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    moved = Counter()
    _count_bytes(moved)
    install_collective_modes()
    cpu = torch.device("cpu")
    shard = torch.full((3,), float(rank + 1))
    out = {}
    for mode in (None, Mode.OVERLAP, Mode.SEQUENTIAL, Mode.NOCOMM,
                 "overlap_control", "sequential_control"):  # fmt: skip
        gathered = torch.zeros(6)
        summed = torch.full((2,), float(rank + 1))
        scattered = torch.zeros(3)
        moved.clear()
        syncs = timing.SYNC_CALLS[0]
        routing = collectives_for(mode, cpu) if mode else torch.no_grad()
        with routing:
            h = dist.all_gather_into_tensor(gathered, shard, async_op=True)
            h.wait()
            dist.all_reduce(summed)
            dist.reduce_scatter_tensor(scattered, torch.arange(6.0) * (rank + 1))
        out[str(mode)] = (
            gathered.tolist(), summed.tolist(), scattered.tolist(), h is DONE,
            sum(moved.values()), timing.SYNC_CALLS[0] - syncs,
        )  # fmt: skip
    results[rank] = out
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def mode_results():
    return spawn_gloo(_worker)


@pytest.mark.slow
def test_overlap_and_sequential_compute_the_real_collective(mode_results):
    for mode in ("None", "overlap", "sequential"):
        gathered, summed, scattered = mode_results[0][mode][:3]
        assert gathered == [1, 1, 1, 2, 2, 2]
        assert summed == [3, 3]
        assert scattered == [0, 3, 6]  # (0,1,2)*1 + (0,1,2)*2
    assert mode_results[1]["sequential"][2] == [9, 12, 15]
    assert mode_results[0]["sequential"][3]  # already finished: the handle is a done one


@pytest.mark.slow
def test_nocomm_leaves_realistic_local_values(mode_results):
    gathered, summed, scattered, done = mode_results[1]["nocomm"][:4]
    assert gathered == [2, 2, 2, 2, 2, 2]  # own shard in every slot, no peer data
    assert summed == [2, 2]  # in place: unchanged
    assert scattered == [6, 8, 10]  # own unreduced slice of (0..5)*2
    assert done


@pytest.mark.slow
def test_sequential_makes_no_device_wide_synchronisation(mode_results):
    """Stream order only: no mode calls the device-wide synchronisation (the counting seam
    in artifact.measure.timing), sequential and its control included."""
    for mode in ("overlap", "sequential", "nocomm", "overlap_control", "sequential_control"):
        assert mode_results[0][mode][5] == 0, mode


@pytest.mark.slow
def test_controls_move_zero_bytes_and_leave_nocomm_values(mode_results):
    """A control takes its mode's code path (the real collective is launched, on empty
    tensors) and fills the outputs as nocomm does; the real modes move the real bytes."""
    real = 4 * (3 + 6) + 4 * 2 + 4 * (3 + 6)  # gather in+out, all-reduce, scatter out+in
    assert mode_results[0]["sequential"][4] == real
    assert mode_results[0]["overlap"][4] == real
    for control in ("overlap_control", "sequential_control"):
        gathered, summed, scattered, _, moved, _ = mode_results[1][control]
        assert moved == 0
        assert (gathered, summed, scattered) == tuple(mode_results[1]["nocomm"][:3])


@pytest.mark.parametrize("n", [4, 5, 6, 7])
def test_the_phase_order_is_balanced(n):
    """Over 2n repetitions every phase runs first equally often, and every ordered pair of
    phases is adjacent equally often (the Williams design's carry-over balance)."""
    phases = tuple(f"p{i}" for i in range(n))
    orders = [balanced_order(phases, rep) for rep in range(2 * n)]
    assert all(sorted(o) == sorted(phases) for o in orders)
    firsts = Counter(o[0] for o in orders)
    assert set(firsts.values()) == {2}
    pairs = Counter(p for o in orders for p in pairwise(o))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) == 1
    assert len(williams_rows(n)) == (n if n % 2 == 0 else 2 * n)
