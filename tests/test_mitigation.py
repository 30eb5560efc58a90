"""The contention map's order and mitigation axes: their rows and ids, the knobs' refusals,
the kernel footprints read from a trace, and the report's "What frees the compute"."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from artifact.core.config import get_preset
from artifact.core.errors import ArtifactError
from artifact.core.mechanisms import MITIGATION_CAPS, mechanisms
from artifact.core.options import RunOptions
from artifact.experiments.contention import KNOB_FIELDS, knob_refusal
from artifact.measure import kernels
from artifact.rank import colocate

H100 = "NVIDIA H100 80GB HBM3"


def _axis(mechs, axis):
    return [m.parallelism for m in mechs if m.axis == axis]


def test_one_gpu_has_an_order_row_per_holder_and_a_knob_row_per_colocated_world():
    one = mechanisms(1, "cuda", (0, 8), H100)
    order = _axis(one, "order")
    assert order == [f"sm-held-{c}cta-compute-first" for c in (4, 8, 16, 24, 32)] + [
        "coloc-nccl-default-w2-compute-first",
        "coloc-nccl-default-w4-compute-first",
    ]
    knobs = ["default", "policy-efficiency", "policy-zero"]
    # H100: 16 channels; co-located ranks stay capped, so a total of 16 is the default's row
    knobs += [f"max{c}cta" for c in MITIGATION_CAPS if c != 16] + ["carveout16"]
    assert _axis(one, "mitigation") == [f"coloc-nccl-{k}-w{w}" for w in (2, 4) for k in knobs]
    # every new row at the map's one size, beside the GEMMs; the base axis unchanged
    assert not any(m.every_size for m in one if m.axis != "base")
    assert len([m for m in one if m.axis == "base"]) == 12
    carve = next(m for m in one if m.parallelism == "coloc-nccl-carveout16-w4")
    assert carve.spec == {"ranks": 4, "max_ctas": 16, "carveout": 16} and carve.knob == "carveout"


def test_several_gpus_turn_the_knobs_on_the_real_all_reduce_and_an_unknown_gpu_refuses_the_carve_out():
    four = mechanisms(4, "cuda", (0, 2), "Some GPU")
    mit = {m.parallelism: m for m in four if m.axis == "mitigation"}
    assert list(mit) == [
        "allreduce-policy-efficiency",
        "allreduce-policy-zero",
        "allreduce-max4cta",
        "allreduce-max8cta",
        "allreduce-max16cta",
        "allreduce-carveout0",
    ]
    assert mit["allreduce-max8cta"].spec == {"cap_ctas": 8}
    assert "no NCCL channel count known" in mit["allreduce-carveout0"].refused
    assert mechanisms(4, "cpu", (0,), None)[0].axis == "base"  # gloo: no knobs


def test_quick_runs_the_base_axis_and_axes_chooses_and_a_bad_axis_is_refused_in_one_line():
    from artifact.figures.sweeps import Where, mechanisms_here

    def here(preset, options):
        return Where(get_preset(preset), 1, "cuda", H100, options)

    quick = mechanisms_here(here("quick", RunOptions()))
    assert {m.axis for m in quick} == {"base"}
    chosen = mechanisms_here(here("quick", RunOptions(axes="order,mitigation")))
    # quick's narrowing (W = 4; SMs held at 16 and 32): 2 + 1 compute-first twins, and
    # W = 4's default, 2 policies, caps 4 and 8 (16 is the default's) and the carve-out
    assert {m.axis for m in chosen} == {"order", "mitigation"} and len(chosen) == 9
    w2 = mechanisms_here(here("quick", RunOptions(axes="mitigation", colocate=2)))
    assert {m.spec["ranks"] for m in w2} == {2} and len(w2) == 6
    assert {m.axis for m in mechanisms_here(here("paper", RunOptions()))} == {
        "base",
        "order",
        "mitigation",
    }
    with pytest.raises(
        ArtifactError, match=r"unknown --axes axis 'waves'; accepted: base, order, mitigation"
    ):
        RunOptions(axes="base,waves")


def test_a_knob_the_loaded_nccl_or_torch_lacks_is_refused_with_its_reason():
    class Config:  # a ProcessGroupNCCL config as a torch that binds the policy has it
        cta_policy = 0

    assert colocate.policy_refusal("zero", (2, 32, 3), Config()) is None
    old = colocate.policy_refusal("zero", (2, 27, 7), Config())
    assert old == "NCCL's CTA policy zero needs NCCL 2.28 or newer; this torch loads NCCL 2.27.7"
    unbound = colocate.policy_refusal("efficiency", (2, 32, 3), object())
    assert "has no CTA policy field" in unbound and "NCCL_CTA_POLICY once a process" in unbound
    assert "accepted: default, efficiency, zero" in colocate.policy_refusal(
        "fast", (2, 32), Config()
    )
    no = knob_refusal({"carveout": 16}, has_carveout=False)
    assert no.endswith("has no SM carve-out (torch._C._set_sm_carveout_experimental)")
    assert knob_refusal({"carveout": 16}, has_carveout=True) is None
    assert knob_refusal({"cap_ctas": 8}) is None  # NCCL's max_ctas: every NCCL torch loads


def test_the_carve_out_holds_inside_its_block_and_is_put_back_after():
    from artifact.workloads.microbench import sm_carveout

    before = torch._C._get_sm_carveout_experimental()
    with sm_carveout(16):
        assert torch._C._get_sm_carveout_experimental() == 16
    assert torch._C._get_sm_carveout_experimental() == before
    with sm_carveout(0):  # no knob: nothing set
        assert torch._C._get_sm_carveout_experimental() == before


def _kernel(name, ts, dur, grid, block, regs, smem, corr):
    args = {"grid": grid, "block": block, "registers per thread": regs, "shared memory": smem}
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "ts": ts,
        "dur": dur,
        "args": args | {"correlation": corr},
    }


def test_footprints_and_launch_order_come_from_the_kernels_launch_records():
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1"
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    events = [
        _kernel(gemm, 100, 50, [132, 1, 1], [384, 1, 1], 168, 232448, 1),  # started first
        _kernel(nccl, 120, 60, [16, 1, 1], [640, 1, 1], 96, 0, 2),  # beside it: GEMM first
        _kernel(nccl, 190, 40, [16, 1, 1], [640, 1, 1], 96, 0, 3),
        _kernel(gemm, 200, 50, [132, 1, 1], [384, 1, 1], 168, 232448, 4),  # holder first
    ]
    trace = {"traceEvents": events, "deviceProperties": [{"id": 0, "numSms": 132}]}
    got = kernels.footprints(trace)
    assert got == {
        "gpu_sms": 132.0,
        "compute_threads_per_cta": 384.0,
        "compute_grid_ctas": 132.0,
        "compute_regs_per_thread": 168.0,
        "compute_smem_per_cta_bytes": 232448.0,
        "comm_threads_per_cta": 640.0,
        "comm_grid_ctas": 16.0,
        "comm_regs_per_thread": 96.0,
        "comm_smem_per_cta_bytes": 0.0,
    }
    table = kernels.kernel_table(trace)
    # pairs side by side: (nccl 120, gemm 100): GEMM first; (nccl 190, gemm 200): holder
    # first; (nccl 120-180, gemm 200): not side by side
    assert kernels.holder_first_fraction(table) == 0.5
    assert kernels.footprints({"traceEvents": [e | {"args": {}} for e in events]}) == {}
    assert pd.isna(kernels.holder_first_fraction(table[table["category"] == "compute"]))


def _planted():
    """The two axes as a run on one H100 would leave them in summary.csv and configs.json:
    at W = 4 the carve-out frees the compute at little cost, the caps do not."""
    from artifact.experiments.contention import KNOB_FIELDS as fields

    configs, rows = {}, []
    numbers = {  # row -> (Eq. 1 slowdown, collective ms beside the compute)
        "coloc-nccl-default-w4": (0.20, 80.0),
        "coloc-nccl-policy-efficiency-w4": (0.19, 82.0),
        "coloc-nccl-max4cta-w4": (0.05, 160.0),
        "coloc-nccl-carveout16-w4": (0.03, 88.0),
        "coloc-nccl-default-w4-compute-first": (0.21, 79.0),
    }
    mechs = {m.parallelism: m for m in mechanisms(1, "cuda", (0,), H100)}
    for par, (slow, ms) in numbers.items():
        m, cid = mechs[par], f"gemm-bf16_{par}_1048576KiB_w1"
        configs[cid] = {"comm": m.comm, "ranks": 4, "note": m.note, "axis": m.axis, "world_size": 1}
        configs[cid] |= {"knob": m.knob} if m.knob else {}
        configs[cid] |= {k: m.spec[k] for k in fields if k in m.spec}
        for metric, value in (("slowdown", slow), ("slowdown_vs_nocomm", slow - 0.1)):
            rows.append(_row(cid, "derived", metric, value))
        rows.append(_row(cid, "overlap", "communication_ms", ms))
        rows.append(_row(cid, "comm_alone", "communication_ms", 68.0))
        for metric, value in (
            ("compute_grid_ctas", 1024.0),
            ("gpu_sms", 132.0),
            ("holder_first_fraction", 0.9),
        ):
            rows.append(_row(cid, "overlap", metric, value))
    return pd.DataFrame(rows), configs


def _row(cid, mode, metric, mean):
    row = {"figure": "contention", "config_id": cid, "mode": mode, "metric": metric}
    return row | {"mean": mean, "ci_low": mean * 0.95, "ci_high": mean * 1.05, "n": 5}


def test_what_frees_the_compute_tables_each_knob_names_the_one_that_frees_it_and_reads_the_grids(
    tmp_path,
):
    from artifact.report import mitigation
    from artifact.report.document import Doc, to_markdown

    summary, configs = _planted()
    assert set(KNOB_FIELDS) >= {"order", "carveout"}
    doc = Doc(title="t")
    made = mitigation.section(doc, summary, configs, tmp_path)
    text = to_markdown(doc)
    assert made and made[0].is_file()  # the plot: slowdown against the collective's time
    table = [
        line
        for line in text.splitlines()
        if line.startswith("| mitigation") or line.startswith("| order")
    ]
    assert [line.split(" | ")[1] for line in table] == [
        "default",  # NCCL's defaults first: each knob reads against it
        "carveout",
        "max4cta",
        "policy-efficiency",
        "coloc-nccl-default-w4-compute-first",
    ]
    assert table[1].startswith(
        "| mitigation | carveout | 4 | 5 | +3.0 % | [+2.8, +3.1] | -7.0 % | 88.00 |"
    )
    # the grid alone where only it was read; no collective grid, so no stand-in to name
    assert table[0].endswith("| 0.90 | 1024 CTAs | - | - |")
    found = mitigation.findings(mitigation.rows(summary, configs))
    assert found[0].startswith("At W = 4, torch's SM carve-out of 16 SMs for the matmuls")
    assert "1.10x its time at the defaults" in found[0]
    assert not any("max_ctas 4" in f for f in found)  # it frees the compute, at 2x the time
    assert found[-1].startswith("The GEMM's kernel ran 1024 CTAs on 132 SMs: 8 waves")
    empty = Doc(title="t")
    assert mitigation.section(empty, summary.iloc[:0], {}, tmp_path) == []
    assert "--axes order,mitigation" in to_markdown(empty)


def test_a_rows_collective_grid_names_the_stand_in_flags_that_emulate_it():
    """The knob's recorded collective grid maps onto the emulation: C CTAs a rank ->
    the NCCL-shaped stand-in on C; none (copy engines) -> the copy stand-in."""
    from types import SimpleNamespace

    from artifact.report.mitigation import emulated_by

    assert emulated_by(SimpleNamespace(comm_grid_ctas=4.0)) == (
        "--stand-in nccl-shaped --comm-ctas 4"
    )
    assert emulated_by(SimpleNamespace(comm_grid_ctas=0.0)) == "--stand-in copy"
    assert emulated_by(SimpleNamespace(comm_grid_ctas=float("nan"))) == "-"


def test_a_recorded_h100_trace_gives_nccls_and_the_gemms_footprints():
    """The kernel records of one overlap pass on one H100 (GEMM bf16 8192^3 beside 4
    co-located NCCL 2.32.3 ranks, results/h100x1/waves-6481339): the GEMM is persistent
    (a CTA an SM) and no GEMM CTA fits beside an NCCL CTA, by registers or shared memory."""
    import gzip
    import json
    from pathlib import Path

    path = Path(__file__).parent / "data" / "h100-coloc-w4-overlap-kernels.json.gz"
    trace = json.loads(gzip.decompress(path.read_bytes()))
    got = kernels.footprints(trace)
    assert got["gpu_sms"] == got["compute_grid_ctas"] == 132  # one wave
    assert (got["compute_threads_per_cta"], got["compute_regs_per_thread"]) == (384, 168)
    assert (got["comm_grid_ctas"], got["comm_threads_per_cta"], got["comm_regs_per_thread"]) == (
        4,
        544,
        96,
    )
    regs = 65536  # an H100 SM's register file
    gemm = got["compute_threads_per_cta"] * got["compute_regs_per_thread"]
    nccl = got["comm_threads_per_cta"] * got["comm_regs_per_thread"]
    assert (
        gemm + nccl > regs
        and got["compute_smem_per_cta_bytes"] + got["comm_smem_per_cta_bytes"] > 228 * 1024
    )
    first = kernels.holder_first_fraction(kernels.kernel_table(trace))
    assert 0.5 < first <= 1.0  # the map queues the collective first, and the GPU ran it so
    # the occupancy rules on the trace's own SM limits: one GEMM CTA an SM, none beside NCCL's
    assert (got["compute_ctas_per_sm"], got["compute_ctas_beside_comm"]) == (1, 0)


def test_occupancy_counts_the_ctas_an_sm_holds_beside_another_kernels_cta():
    """CUDA's rules on an H100 SM (65,536 registers, 228 KiB shared memory, 2,048 threads):
    registers go a warp at a time in units of 256, and the driver keeps 1 KiB a CTA. A light
    GEMM CTA fits beside a 512-thread CTA of few registers and no shared memory, but not
    beside NCCL's ring CTA (544 threads, 96 registers, 116 KiB): such a holder would
    understate what NCCL's CTA takes from that GEMM."""
    from artifact.measure.occupancy import Footprint, Sm, ctas_fit

    h100 = Sm(65536, 233472, 2048)
    assert Footprint(32, 100, 0).registers() == 3328  # 3,200 rounded up to 13 x 256
    assert Footprint(544, 96, 119040).registers() == 17 * 3072
    light = Footprint(256, 128, 100 * 1024)
    nccl, thin = Footprint(544, 96, 119040), Footprint(512, 32, 0)
    assert ctas_fit(h100, light) == 2  # registers: 65,536 / 32,768
    assert ctas_fit(h100, light, thin) == 1
    assert ctas_fit(h100, light, nccl) == 0  # 13,312 registers left
    persistent = Footprint(384, 168, 188636)  # cuBLAS's nvjet GEMM on the H100
    assert (ctas_fit(h100, persistent), ctas_fit(h100, persistent, thin)) == (1, 0)
    assert ctas_fit(h100, Footprint(1024, 16, 0), Footprint(1536, 16, 0)) == 0  # threads
