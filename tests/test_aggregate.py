"""summarize: repetitions are the unit; derived rows pair each repetition's modes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from artifact.analyze import metrics as eq
from artifact.analyze.aggregate import COLUMNS, summarize
from artifact.core import equations
from artifact.figures.derived import MODE_DERIVED, relative_change
from artifact.figures.spec import Derived
from tests.factories import record

UNITS = {"compute_ms": "ms", "e2e_ms": "ms", "comm_role_ms": "ms"}


def _record(config_id, mode, rep, metrics, figure="fig8"):
    config = {"gpu": "test", "model": "matmul", "parallelism": "allreduce", "precision": "bf16"}
    return record(
        figure, config_id, mode, rep, config=config, metrics=metrics,
        units={k: UNITS[k] for k in metrics},
    )  # fmt: skip


def _row(df, mode, metric, config_id="c"):
    sel = df[(df["config_id"] == config_id) & (df["mode"] == mode) & (df["metric"] == metric)]
    assert len(sel) == 1
    return sel.iloc[0]


SLOWDOWN = relative_change("slowdown", ("overlap", "compute_ms"), ("sequential", "compute_ms"))


def test_columns_change_only_by_addition():
    old = (
        *("figure", "gpu", "model", "parallelism", "precision", "mode", "metric"),
        *("mean", "std", "ci_low", "ci_high", "n", "cv", "noisy"),
        *("unit", "kind", "config_id", "note"),
    )
    assert COLUMNS[: len(old)] == old and COLUMNS[len(old) :] == ("ci_method",)
    df = summarize([_record("c", "overlap", 0, {"compute_ms": 1.0})], {})
    assert tuple(df.columns) == COLUMNS


def test_derived_rows_pair_repetitions_and_count_only_complete_ones():
    drift = [1.0, 1.2, 0.8, 1.1, 0.9]
    records = [_record("c", "overlap", i, {"compute_ms": 12.0 * d}) for i, d in enumerate(drift)]
    # repetition 3 lost its sequential phase; repetition 4's metric is n/a
    records += [
        _record("c", "sequential", i, {"compute_ms": None if i == 4 else 10.0 * d})
        for i, d in enumerate(drift)
        if i != 3
    ]
    df = summarize(records, {"fig8": [SLOWDOWN]})
    assert _row(df, "overlap", "compute_ms")["n"] == 5
    assert _row(df, "sequential", "compute_ms")["n"] == 3
    s = _row(df, "derived", "slowdown")
    assert s["n"] == 3  # repetitions 0, 1, 2
    assert s["ci_method"] == "paired student-t (delta method)"
    # the equation on the means of the complete repetitions
    o, q = np.array([12.0, 14.4, 9.6]), np.array([10.0, 12.0, 8.0])
    assert s["mean"] == pytest.approx(equations.slowdown(o.mean(), q.mean()))
    # every repetition is exactly 20 % slower: pairing leaves nothing to be unsure of,
    # although each mode on its own varies by +-20 %
    assert s["ci_low"] == pytest.approx(0.2) and s["ci_high"] == pytest.approx(0.2)


def test_pairing_is_by_repetition_whatever_the_phase_names():
    rng = np.random.default_rng(3)
    drift = rng.normal(1, 0.1, 6)
    overlap = 5.0 * drift * rng.normal(1, 0.01, 6)
    alone = 4.0 * drift * rng.normal(1, 0.01, 6)
    comm = relative_change(
        "comm_slowdown", ("overlap", "comm_role_ms"), ("comm_alone", "comm_role_ms")
    )
    # records in shuffled order: pairing must follow `rep`, not the order read
    records = [_record("c", "overlap", i, {"comm_role_ms": overlap[i]}) for i in range(6)]
    records += [_record("c", "comm_alone", i, {"comm_role_ms": alone[i]}) for i in range(6)]
    records = [records[i] for i in rng.permutation(len(records))]
    s = _row(summarize(records, {"fig8": [comm]}), "derived", "comm_slowdown")
    paired = eq.describe_derived(equations.slowdown, overlap, alone)
    assert (s["ci_low"], s["ci_high"], s["n"]) == pytest.approx((paired.ci_low, paired.ci_high, 6))
    assert s["ci_high"] - s["ci_low"] < 0.05  # the 10 % drift cancels within a repetition


def test_derived_needs_a_complete_repetition():
    records = [_record("c", "overlap", 0, {"compute_ms": 12.0})]
    records += [_record("c", "sequential", 1, {"compute_ms": 10.0})]
    df = summarize(records, {"fig8": [SLOWDOWN]})
    assert not (df["mode"] == "derived").any()
    one = summarize(
        records + [_record("c", "sequential", 0, {"compute_ms": 10.0})], {"fig8": [SLOWDOWN]}
    )
    s = _row(one, "derived", "slowdown")
    assert s["n"] == 1 and s["ci_method"] == "none (n=1)" and math.isnan(s["ci_low"])


def _many_records():
    """Configurations with 1-25 repetitions of three modes, some metrics n/a."""
    rng = np.random.default_rng(4)
    records = []
    for n in (1, 2, 3, 5, 10, 19, 20, 25):
        for i in range(n):
            drift = rng.lognormal(0, 0.05)
            for mode, base in (("overlap", 12.0), ("sequential", 10.0), ("nocomm", 9.9)):
                e2e = None if (mode == "nocomm" and i == 1) else 30.0 * drift * rng.lognormal()
                metrics = {"compute_ms": base * drift * rng.lognormal(0, 0.1), "e2e_ms": e2e}
                records.append(_record(f"n{n}", mode, i, metrics))
    return records


def test_done_when_small_n_means_are_at_least_as_wide_as_student_t():
    """Issue 17's check: for n < 20, every measured mean's interval in summarize's table
    is at least as wide as the Student-t interval recomputed from its values."""
    records = _many_records()
    df = summarize(records, {"fig8": [SLOWDOWN, *MODE_DERIVED]})
    measured = df[df["kind"] == "measured"]
    checked = 0
    for r in measured.itertuples():
        vals = [
            rec["metrics"][r.metric]
            for rec in records
            if rec["config_id"] == r.config_id and rec["mode"] == r.mode
        ]
        vals = [v for v in vals if v is not None and v == v]
        assert r.n == len(vals)
        if r.n < 2:
            assert r.ci_method == "none (n=1)"
            continue
        lo, hi = stats.t.interval(0.95, r.n - 1, loc=np.mean(vals), scale=stats.sem(vals))
        tol = 1e-9 * abs(r.mean)
        assert r.ci_low <= lo + tol and r.ci_high >= hi - tol, r
        assert r.ci_method == ("student-t" if r.n < 20 else "bootstrap-bca (at least student-t)")
        checked += r.n < 20
    assert checked >= 20
    derived = df[df["kind"] == "derived"]
    assert set(derived["ci_method"]) == {
        "none (n=1)",
        "paired student-t (delta method)",
        "paired bootstrap-bca (at least student-t)",
    }
    assert df["ci_method"].notna().all()


def test_custom_derived_fn_gets_arrays():
    d = Derived("gap", lambda a, b: a - b, (("overlap", "e2e_ms"), ("nocomm", "e2e_ms")), "ms")
    records = [_record("c", "overlap", i, {"e2e_ms": 10.0 + i}) for i in range(4)]
    records += [_record("c", "nocomm", i, {"e2e_ms": 8.0 + i}) for i in range(4)]
    s = _row(summarize(records, {"fig8": [d]}), "derived", "gap")
    assert (s["mean"], s["ci_low"], s["ci_high"]) == pytest.approx((2.0, 2.0, 2.0))
