"""Estimate the `paper` preset's wall time and per-GPU memory from rates measured on one H200.

Method: a training step costs 6 x parameters x tokens FLOPs (MFU's numerator); divided by
the TFLOP/s a GPU achieved in results/h200x1/all-quick (GPT-3 1.3B, sequence 1024, one
GPU), it gives the step time, assumed to hold on 4 GPUs (no communication cost added, so
a lower bound). A configuration runs warm-up x 3 modes + 2 passes x iterations x 3 modes x
repetitions steps, plus its power windows and about 20 s of set-up (as measured on the
H200). Memory per GPU is artifact.memory's estimate, which is within 20 % of every peak
measured on the H200 (tests/test_memory.py).

    python benchmarks/paper_estimate.py [--gpus 4] [--gpu-memory-gib 80]
"""

from __future__ import annotations

import argparse

import pandas as pd

from artifact import memory
from artifact.config import get_model, get_preset
from artifact.env import REPO_ROOT

RUN = REPO_ROOT / "results" / "h200x1" / "all-quick" / "summary.csv"
SETUP_S = 20.0


def measured_rates() -> dict[tuple[str, str], float]:
    """(parallelism, precision) -> achieved FLOP/s per GPU on the H200 (overlap mode)."""
    s = pd.read_csv(RUN)
    rows = s[(s["metric"] == "tflops_per_gpu") & (s["mode"] == "overlap")]
    return {(r.parallelism, r.precision): r.mean * 1e12 for r in rows.itertuples()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--gpu-memory-gib", type=float, default=80.0)
    args = ap.parse_args()
    p, w = get_preset("paper"), args.gpus
    rates = measured_rates()
    steps = p.warmup * 3 + 2 * p.iters_per_rep * 3 * p.reps
    fixed = p.power_window_s * 3 * p.reps + SETUP_S
    rows = []
    for name in p.models:
        m = get_model(name)
        grid = [("fig4", "fsdp", mb, p.precision) for mb in p.micro_batches]
        grid += [("fig4", "pipeline", mb, p.precision) for mb in p.micro_batches]
        grid += [("fig10", "fsdp", p.micro_batches[0], x) for x in ("fp32", "fp16", "bf16")]
        grid += [("fig11", "fsdp", p.micro_batches[0], x) for x in ("fp32", "tf32")]
        for fig, par, mb, prec in grid:
            if par == "fsdp":
                flops = 6 * memory.total_params(m) * mb * m.seq_len * w
                need = memory.fsdp_bytes(m, mb, prec, w)
            else:
                nmb = max(1, p.global_batch // mb)
                flops = 6 * memory.total_params(m) * mb * nmb * m.seq_len
                need = memory.pipeline_bytes(m, mb, nmb, prec, w, materialised_attention=False)
            step = flops / (w * rates[(par, prec)])
            rows.append(
                {
                    "figure": fig,
                    "model": name,
                    "parallelism": par,
                    "micro_batch": mb,
                    "precision": prec,
                    "step_s": round(step, 2),
                    "minutes": round((steps * step + fixed) / 60, 1),
                    "gib_per_gpu": round(need / memory.GIB),
                    "fits": need <= args.gpu_memory_gib * memory.GIB,
                }
            )
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    fit = df[df["fits"]]
    print(
        f"\n{len(df)} configurations; {len(fit)} fit {args.gpu_memory_gib:g} GiB a GPU "
        f"(the rest are recorded 'not run'); {fit['minutes'].sum() / 60:.1f} h for those that fit, "
        f"{df['minutes'].sum() / 60:.1f} h if all did (microbenchmark figures not counted)"
    )


if __name__ == "__main__":
    main()
