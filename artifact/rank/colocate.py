"""`--colocate W`: W real NCCL ranks on one GPU, in one process, one thread a rank.

NCCL 2.30 and later can place several ranks on one GPU (NCCL_MULTI_RANK_GPU_ENABLE=1,
experimental; NVLS off). Each rank gets its own communicator (a ProcessGroupNCCL over an
in-process store), its own thread and stream and its own buffer; rank 0's thread is the
caller's, which also runs the compute. So NCCL's own kernels, with their CTAs, protocol
and memory traffic, run beside the matmul: the ground truth the NCCL-shaped stand-in is
validated against (artifact.workloads.nccl_shaped). The total CTAs are capped at C across
the ranks (C // W a communicator, NCCL's min = max CTA setting). Nothing changes the
GPU's settings and no MPS daemon is started: threads share one CUDA context.

On a CPU the same harness runs gloo groups (the tests' path). What NCCL chose (version,
algorithm, protocol, channels) is read from its own log by `probe`, in a process of its
own so that the measured run does not log a line per collective.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from artifact import env
from artifact.core.errors import ArtifactError
from artifact.placement import nccl_refusal

# set before NCCL initialises (the worker does, for the figures that co-locate). NVLS needs
# several GPUs, so on one it is off anyway; the worker sets nothing that provenance records
# (env.COMM_ENV_VARS), or a folder's figures would differ in environment
NCCL_ENV = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
_TIMEOUT = datetime.timedelta(seconds=600)


def nccl_version() -> tuple[int, ...]:
    """The NCCL loaded in this process (the seam the tests replace): env.nccl_loaded."""
    return env.nccl_loaded()


def refusal(version: tuple[int, ...] | None = None) -> str | None:
    """Why co-located NCCL ranks cannot run here (one line), or None where they can."""
    return nccl_refusal(version if version is not None else nccl_version())


# NCCL's communicator CTA policies (ncclConfig_t.CTAPolicy; NCCL 2.27 efficiency, 2.28 zero).
# NCCL reads its NCCL_CTA_POLICY variable once a process, so a row sets it on its own
# communicators, through the field torch's ProcessGroupNCCL.Options().config may bind
POLICIES = {"default": 0, "efficiency": 1, "zero": 2}
POLICY_SINCE = {"efficiency": (2, 27), "zero": (2, 28)}
_POLICY_FIELDS = ("cta_policy", "CTAPolicy", "ctaPolicy")


def _policy_field(config) -> str | None:
    return next((f for f in _POLICY_FIELDS if hasattr(config, f)), None)


def policy_refusal(policy: str, version: tuple[int, ...] | None = None, config=None) -> str | None:
    """Why NCCL's CTA policy `policy` cannot be set here (one line), or None where it can.
    `config`: a ProcessGroupNCCL.Options().config (the seam the tests replace)."""
    if policy not in POLICIES:
        return f"unknown NCCL CTA policy {policy!r}; accepted: {', '.join(POLICIES)}"
    version = version if version is not None else nccl_version()
    since = POLICY_SINCE.get(policy, (0, 0))
    if tuple(version[:2]) < since:
        have = ".".join(str(v) for v in version)
        return (
            f"NCCL's CTA policy {policy} needs NCCL {since[0]}.{since[1]} or newer; "
            f"this torch loads NCCL {have}"
        )
    if config is None:
        if not hasattr(torch.distributed, "ProcessGroupNCCL"):
            return "this torch has no NCCL (ProcessGroupNCCL)"
        config = torch.distributed.ProcessGroupNCCL.Options().config
    if _policy_field(config) is None:
        return (
            f"torch {torch.__version__}'s ProcessGroupNCCL.Options().config has no CTA policy "
            f"field (looked for {', '.join(_POLICY_FIELDS)}), and NCCL reads NCCL_CTA_POLICY "
            "once a process"
        )
    return None


def nccl_options(ctas: int | None = None, cap: int = 0, policy: str = ""):
    """ProcessGroupNCCL options: exactly `ctas` CTAs (min = max), or at most `cap`, and
    NCCL's CTA `policy` (checked by policy_refusal first)."""
    opts = torch.distributed.ProcessGroupNCCL.Options()
    if ctas:
        opts.config.min_ctas = ctas
        opts.config.max_ctas = ctas
    if cap:
        opts.config.max_ctas = cap
    if policy:
        setattr(opts.config, _policy_field(opts.config), POLICIES[policy])
    return opts


def ctas_per_rank(total: int | None, world: int) -> int | None:
    """Each communicator's CTAs so that the ranks together hold at most `total`."""
    return None if total is None else max(1, total // world)


class Colocated:
    """W ranks of one backend (nccl on a GPU, gloo on a CPU) in this process."""

    def __init__(
        self,
        world: int,
        device: torch.device,
        ctas_total: int | None = None,
        cap_ctas: int = 0,
        policy: str = "",
    ):
        if world < 2:
            raise ArtifactError(f"--colocate {world}: accepted: an integer of 2 or more (ranks)")
        self.world, self.device = world, device
        self.cuda = device.type == "cuda"
        self.ctas = ctas_per_rank(ctas_total, world) if self.cuda else None
        self.cap_ctas, self.policy = cap_ctas, policy
        if self.cuda:
            for k, v in NCCL_ENV.items():
                os.environ.setdefault(k, v)
        # one thread a peer rank, so each rank's collectives are issued in order
        self._threads = [
            ThreadPoolExecutor(1, initializer=self._bind, thread_name_prefix=f"rank{r}")
            for r in range(1, world)
        ]
        self._streams = [torch.cuda.Stream(device) for _ in range(world)] if self.cuda else []
        self._buffers: dict[tuple, list[torch.Tensor]] = {}
        store = dist.HashStore()
        futures = [t.submit(self._group, store, r) for r, t in enumerate(self._threads, 1)]
        self.groups = [self._group(store, 0)] + [f.result() for f in futures]

    def _bind(self) -> None:
        if self.cuda:
            torch.cuda.set_device(self.device)

    def _group(self, store, rank: int):
        prefix = dist.PrefixStore("colocate", store)
        if not self.cuda:
            return dist.ProcessGroupGloo(prefix, rank, self.world, _TIMEOUT)
        opts = nccl_options(self.ctas, self.cap_ctas, self.policy)
        return dist.ProcessGroupNCCL(prefix, rank, self.world, opts)

    def _peer_buffer(self, rank: int, like: torch.Tensor) -> torch.Tensor:
        key = (like.numel(), like.dtype)
        if key not in self._buffers:  # each peer's own data, as a real rank has
            self._buffers[key] = [torch.randn_like(like) for _ in range(1, self.world)]
        return self._buffers[key][rank - 1]

    def all_reduce(self, buf: torch.Tensor, full: torch.Tensor | None = None) -> _Work:
        """Every rank all-reduces (SUM) its buffer of `buf`'s size; returns rank 0's handle,
        whose wait() waits for every rank. `full`: the buffer `buf` is a slice of (a
        zero-byte control), so the peers' buffers are allocated once at full size."""
        like = full if full is not None else buf
        event = None
        if self.cuda:  # each rank starts after what the caller's stream queued, as rank 0 does
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
        futures = [
            t.submit(self._peer, r, self._peer_buffer(r, like)[: buf.numel()], event)
            for r, t in enumerate(self._threads, 1)
        ]
        work = self.groups[0].allreduce([buf], _sum())
        return _Work(work, [f.result() for f in futures], self.cuda)

    def _peer(self, rank: int, buf: torch.Tensor, event):
        group = self.groups[rank]
        if not self.cuda:
            return group.allreduce([buf], _sum())
        stream = self._streams[rank]
        stream.wait_event(event)
        with torch.cuda.stream(stream):
            group.allreduce([buf], _sum()).wait()  # this stream waits for the collective
            done = torch.cuda.Event()
            done.record(stream)
        return done

    def close(self) -> None:
        for t in self._threads:
            t.shutdown()


def _sum():
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    return opts


class _Work:
    """Rank 0's work handle; wait() also waits for the peers (their events on a GPU)."""

    def __init__(self, work, peers: list, cuda: bool):
        self.work, self.peers, self.cuda = work, peers, cuda

    def wait(self, timeout=None) -> bool:
        self.work.wait()
        for p in self.peers:
            if self.cuda:
                torch.cuda.current_stream().wait_event(p)
            else:
                p.wait()
        return True


# --- what NCCL chose, from its own log ------------------------------------------------

ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOS = ("LL", "LL128", "Simple")
_VERSION = re.compile(r"NCCL version ([0-9.]+)")
_CHANNELS = re.compile(r"(\d+) coll channels")
# "... Bytes -> Algo 1 proto 2" (indices) or, as 2.32 writes it, "Algo RING proto SIMPLE"
_TUNING = re.compile(r"(\d+) Bytes -> Algo (\w+) proto (\w+)")


def _named(value: str, names: tuple[str, ...]) -> str:
    if value.isdigit():
        return names[int(value)] if int(value) < len(names) else value
    return next((n for n in names if n.lower() == value.lower()), value)


def parse_log(text: str, nbytes: int) -> dict:
    """NCCL's version, ring channels a rank, and the algorithm and protocol it chose for an
    all-reduce of `nbytes` (the last such line), from an INFO log (INIT and TUNING)."""
    version = _VERSION.search(text)
    channels = [int(c) for c in _CHANNELS.findall(text)]
    chosen = [(a, p) for b, a, p in _TUNING.findall(text) if int(b) == nbytes]
    algo, proto = chosen[-1] if chosen else (None, None)
    return {
        "nccl_version": version.group(1) if version else None,
        "nccl_channels": max(channels) if channels else None,
        "nccl_algo": None if algo is None else _named(algo, ALGOS),
        "nccl_proto": None if proto is None else _named(proto, PROTOS),
    }


def probe(world: int, ctas_total: int | None, nbytes: int, timeout_s: float = 120) -> dict:
    """What NCCL chooses for W co-located ranks and this all-reduce: one all-reduce in a
    process of its own with NCCL's INFO log on (INIT, TUNING), parsed. A failure is data:
    {'nccl_probe_error': why}."""
    env = {
        **os.environ,
        **NCCL_ENV,
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,TUNING",
    }
    cmd = [
        sys.executable,
        "-m",
        "artifact.rank.colocate",
        str(world),
        str(ctas_total or 0),
        str(nbytes),
    ]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"nccl_probe_error": f"no answer in {timeout_s:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return {"nccl_probe_error": f"exit {done.returncode}: {last[:200]}"}
    found = parse_log(done.stdout + done.stderr, nbytes)
    if found["nccl_algo"] is None:  # its log said no choice for this size: keep what it said
        lines = [x for x in (done.stdout + done.stderr).splitlines() if "NCCL INFO" in x]
        found["nccl_log_tail"] = lines[-12:]
    return found


def _probe_main(argv: list[str]) -> None:
    world, ctas, nbytes = (int(a) for a in argv)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    ranks = Colocated(world, device, ctas or None)
    buf = torch.ones(nbytes // 4, device=device)
    ranks.all_reduce(buf).wait()
    torch.cuda.synchronize(device)
    print(json.dumps({"sum_ok": bool((buf == world).all())}))
    ranks.close()


if __name__ == "__main__":
    _probe_main(sys.argv[1:])
