"""The modes on real gloo collectives: 2 processes on CPU."""

import os

import pytest
import torch
import torch.distributed as dist

from artifact.modes import DONE, Mode, collectives_in, install_collective_modes
from tests.conftest import spawn_gloo


def _worker(rank: int, port: int, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    install_collective_modes()
    cpu = torch.device("cpu")
    shard = torch.full((3,), float(rank + 1))
    out = {}
    for mode in (None, Mode.OVERLAP, Mode.SEQUENTIAL, Mode.NOCOMM):
        gathered = torch.zeros(6)
        summed = torch.full((2,), float(rank + 1))
        scattered = torch.zeros(3)
        with collectives_in(mode, cpu) if mode else torch.no_grad():
            h = dist.all_gather_into_tensor(gathered, shard, async_op=True)
            h.wait()
            dist.all_reduce(summed)
            dist.reduce_scatter_tensor(scattered, torch.arange(6.0) * (rank + 1))
        out[str(mode)] = (gathered.tolist(), summed.tolist(), scattered.tolist(), h is DONE)
    results[rank] = out
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def mode_results():
    return spawn_gloo(_worker, 29000)


@pytest.mark.slow
def test_overlap_and_sequential_compute_the_real_collective(mode_results):
    for mode in ("None", "overlap", "sequential"):
        gathered, summed, scattered, _ = mode_results[0][mode]
        assert gathered == [1, 1, 1, 2, 2, 2]
        assert summed == [3, 3]
        assert scattered == [0, 3, 6]  # (0,1,2)*1 + (0,1,2)*2
    assert mode_results[1]["sequential"][2] == [9, 12, 15]
    assert mode_results[0]["sequential"][3]  # already finished: the handle is a done one


@pytest.mark.slow
def test_nocomm_leaves_realistic_local_values(mode_results):
    gathered, summed, scattered, done = mode_results[1]["nocomm"]
    assert gathered == [2, 2, 2, 2, 2, 2]  # own shard in every slot, no peer data
    assert summed == [2, 2]  # in place: unchanged
    assert scattered == [6, 8, 10]  # own unreduced slice of (0..5)*2
    assert done
