"""What one rank moves over the link, by the formulas a ring collective and a pipeline's
point-to-point transfers follow. Torch-free: the ranks count their collectives with it
(artifact.rank.modes, under the rehearsal) and the rehearsal's checks
(artifact/judge/rehearsal.py) read the counts against it.

A ring (NCCL's algorithm for large buffers) of W ranks: an all-gather or a reduce-scatter
moves (W-1)/W of the full (gathered) buffer a rank, an all-reduce 2(W-1)/W of its buffer
(a reduce-scatter, then an all-gather), a broadcast or a reduce the buffer once: the
bytes `--emulate-world` copies for rank 0 (artifact.rank.emulation).
"""

from __future__ import annotations

GATHERS = ("all_gather_into_tensor", "_all_gather_base", "all_gather_single", "all_gather")
SCATTERS = (
    "reduce_scatter_tensor",
    "_reduce_scatter_base",
    "reduce_scatter_single",
    "reduce_scatter",
)


def ring_bytes(name: str, numel: int, itemsize: int, world: int) -> int:
    """The bytes one rank of `world` moves for collective `name` on `numel` elements of
    `itemsize` bytes (the gathered buffer of a gather or a scatter, the buffer of the
    others). An all-reduce's buffer goes round in chunks of ceil(numel / W), as the
    emulation copies it, so a buffer W does not divide moves its last chunk short."""
    if world <= 1:
        return 0
    if name in GATHERS or name in SCATTERS:
        return (world - 1) * (numel // world) * itemsize
    if name == "all_reduce":
        chunk = -(-numel // world)
        pieces = (min(chunk, max(0, numel - (k % world) * chunk)) for k in range(2 * (world - 1)))
        return sum(pieces) * itemsize
    return numel * itemsize  # broadcast, reduce


def pipeline_p2p_bytes(
    stage: int, stages: int, microbatches: int, activation_bytes: int
) -> tuple[int, int]:
    """(sent, received) by one stage of a 1F1B pipeline in one step: each micro-batch's
    activation goes forward over every boundary, and its gradient (the same size) back."""
    boundaries = (stage < stages - 1) + (stage > 0)  # a first or last stage has one
    per_direction = microbatches * activation_bytes * boundaries
    return per_direction, per_direction


def busbw_factor(world_size: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n."""
    return 2 * (world_size - 1) / world_size if world_size > 1 else 0.0
