"""Atomic records, resume, provenance, and refusal to mix environments."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from artifact.core.errors import ArtifactError
from artifact.store import RunStore, check_uniform_env
from tests.conftest import ROOT

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from artifact.store import RunStore
    store = RunStore(Path(sys.argv[1]))
    payload = list(range(400_000))  # a few MB of JSON: the write takes a while
    for rep in range(int(sys.argv[2])):
        if store.has("fig8", "cfg", "overlap", rep):
            continue
        store.write_record(figure="fig8", config_id="cfg", config={}, mode="overlap",
                           rep=rep, metrics={"e2e_ms": float(rep)}, units={"e2e_ms": "ms"},
                           provenance={"torch": "x"}, extra={"payload": payload})
        print("wrote", rep, flush=True)
    """
)


def _writer(out, reps):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out), str(reps)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def _kill_mid_write(out, reps) -> bool:
    """Start a writer and SIGKILL it while a temporary file exists; True if one was left."""
    proc = _writer(out, reps)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if len(list(out.glob("records/**/rep-*.json"))) >= 2 and list(
            out.glob("records/**/.*.tmp")
        ):
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the writer finished before it was killed"
    return bool(list(out.glob("records/**/.*.tmp")))


@pytest.mark.slow
def test_sigkill_mid_write_then_resume(tmp_path):
    store = RunStore(tmp_path)
    # The rename can win the race against the kill; try again until a write is cut short.
    assert any(_kill_mid_write(tmp_path, 50) for _ in range(10)), "never caught mid-write"
    finished = store.records()  # every visible record parses: none is half-written
    assert finished and [r["rep"] for r in finished] == list(range(len(finished)))
    assert store.clean_partial() >= 1
    assert not list(tmp_path.glob("records/**/.*.tmp"))

    resumed = _writer(tmp_path, 50)
    out, _ = resumed.communicate(timeout=120)
    assert resumed.returncode == 0
    rewritten = [int(line.split()[1]) for line in out.splitlines()]
    assert min(rewritten) == len(finished), "finished repetitions were redone"
    records = store.records()
    assert [r["rep"] for r in records] == list(range(50)), "a repetition is missing or duplicated"
    assert all(r["metrics"]["e2e_ms"] == r["rep"] for r in records)


def test_record_carries_provenance_and_units(tmp_path):
    store = RunStore(tmp_path)
    path = store.write_record(
        figure="fig8",
        config_id="c1",
        config={"gpu": "cpu"},
        mode="overlap",
        rep=3,
        metrics={"e2e_ms": 1.5},
        units={"e2e_ms": "ms"},
        provenance={"torch": "2.13.0", "preset": "tiny"},
    )
    assert path == tmp_path / "records/fig8/c1/overlap/rep-003.json"
    rec = json.loads(path.read_text())
    assert rec["provenance"]["mode"] == "overlap" and rec["provenance"]["rep"] == 3
    assert rec["provenance"]["preset"] == "tiny" and "timestamp" in rec["provenance"]
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_metric_without_unit_is_refused(tmp_path):
    with pytest.raises(ArtifactError, match="metrics without a unit: e2e_ms"):
        RunStore(tmp_path).write_record(
            figure="fig8",
            config_id="c",
            config={},
            mode="overlap",
            rep=0,
            metrics={"e2e_ms": 1.0},
            units={},
            provenance={},
        )
    assert not (tmp_path / "records").exists()


def test_unsafe_ids_are_refused(tmp_path):
    with pytest.raises(ArtifactError, match="not a safe folder name"):
        RunStore(tmp_path).record_path("fig8", "../escape", "overlap", 0)


def _rec(**prov):
    return {"provenance": {"gpu_model": "H200", "torch": "2.11", **prov}}


def test_mixed_environments_are_refused_unless_allowed():
    same = [_rec(), _rec()]
    check_uniform_env(same)
    mixed = [_rec(), _rec(gpu_model="A100", torch="2.4")]
    with pytest.raises(ArtifactError) as e:
        check_uniform_env(mixed)
    assert str(e.value) == (
        "records come from 2 environments (differ in gpu_model: A100, H200; torch: 2.11, 2.4); "
        "pass --allow-mixed to summarise them together"
    )
    check_uniform_env(mixed, allow_mixed=True)
    # The hostname is not part of the fingerprint: multi-node runs summarise together.
    check_uniform_env([_rec(hostname="a"), _rec(hostname="b")])


def _finished_run(tmp_path, reps=2, processes=2):
    """A store where fig8's ranks finished 2 repetitions of 2 modes of one configuration."""
    store = RunStore(tmp_path)
    for mode in ("overlap", "sequential"):
        for rep in range(reps):
            store.write_record(
                figure="fig8",
                config_id="cfg",
                config={},
                mode=mode,
                rep=rep,
                metrics={"e2e_ms": 1.0},
                units={"e2e_ms": "ms"},
                provenance={"torch": "x"},
            )
    stamp = {"reps": reps, "processes": processes, "records": store.record_count("fig8")}
    store.write_status("fig8", "ran", "every configuration ran", finished=stamp)
    return store


def test_a_finished_figure_is_known_without_starting_the_ranks(tmp_path):
    store = _finished_run(tmp_path)
    assert store.record_count("fig8") == 4
    assert store.finished("fig8", reps=2, processes=2)
    # another plan: more repetitions, or another world size (other config ids)
    assert not store.finished("fig8", reps=3, processes=2)
    assert not store.finished("fig8", reps=2, processes=4)
    assert not store.finished("fig6", reps=2, processes=2)  # never ran


def test_a_deleted_record_or_a_failed_configuration_means_run_the_ranks(tmp_path):
    store = _finished_run(tmp_path)
    store.record_path("fig8", "cfg", "overlap", 1).unlink()
    assert not store.finished("fig8", reps=2, processes=2)

    store = _finished_run(tmp_path / "failed")
    store.write_config_status("fig8", "cfg2", "failed", "out of memory")
    assert not store.finished("fig8", reps=2, processes=2)  # a resume runs it again
    store = _finished_run(tmp_path / "not-run")
    store.write_config_status("fig8", "cfg2", "not run", "FP16 is not supported on a CPU")
    assert store.finished("fig8", reps=2, processes=2)  # the same machine says the same


def test_a_status_without_the_stamp_is_not_finished(tmp_path):
    """fig6 and fig7 write 'ran' themselves; so did every run before the stamp existed."""
    store = _finished_run(tmp_path)
    store.write_status("fig8", "ran", "power from nvml", finished=None)
    assert not store.finished("fig8", reps=2, processes=2)
