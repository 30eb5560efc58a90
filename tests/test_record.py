"""Record (artifact/store.py): every record on disk round-trips through it unchanged, and
a mapping that is no record is a one-line error naming what it lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from artifact.core.errors import ArtifactError
from artifact.store import RECORD_KEYS, SCHEMA_VERSION, NotARecord, Record, RunStore, read_record
from tests.factories import record

ROOT = Path(__file__).resolve().parents[1]
# the committed records, every 10th (thousands: all of them would take seconds)
COMMITTED = sorted((ROOT / "results").glob("**/records/**/rep-*.json"))[::10]


def test_committed_records_round_trip():
    assert len(COMMITTED) > 100
    keys: set[str] = set()
    for path in COMMITTED:
        data = json.loads(path.read_text())
        assert Record.from_json(data).to_json() == data, path
        keys |= set(data)
    # the sample holds every typed field, so each is read from disk, not only from extra
    assert not Record.from_json(json.loads(COMMITTED[0].read_text())).extra
    assert keys >= {"per_rank", "timed", "power", "reused_from", "adaptive", "phase_order"}


def test_the_fields_come_typed_and_other_keys_stay():
    data = record(per_rank=[{"e2e_ms": 1.0}], timed=None, novel={"a": 1}, metrics={"e2e_ms": 2.0})
    rec = Record.from_json(data)
    assert rec.per_rank == [{"e2e_ms": 1.0}] and rec.units == {"e2e_ms": "ms"}
    assert rec.schema == SCHEMA_VERSION and rec.timed is None
    assert rec.extra == {"novel": {"a": 1}, "timed": None}  # a null optional, as written
    assert rec.to_json() == data


def test_a_record_without_schema_or_units_round_trips():
    data = {k: {} for k in RECORD_KEYS} | {"figure": "fig4", "rep": 0}
    assert Record.from_json(data).to_json() == data


@pytest.mark.parametrize("obj", [{"figure": "fig4", "rep": 0}, [], None])
def test_no_record_is_one_line_naming_what_it_lacks(obj):
    with pytest.raises(NotARecord) as e:
        Record.from_json(obj)
    said = str(e.value)
    assert "\n" not in said and said.startswith("not a record (it lacks ")
    assert "config_id" in said and "provenance" in said


def test_the_reader_reads_through_record(tmp_path):
    store = RunStore(tmp_path)
    path = store.record_path("fig8", "c", "overlap", 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record(metrics={"e2e_ms": 1.0}, reused_from="fig6")))
    assert store.records() == [record(metrics={"e2e_ms": 1.0}, reused_from="fig6")]
    path.write_text(json.dumps({"figure": "fig8", "mode": "overlap"}))
    with pytest.raises(ArtifactError, match=r"rep-000.json: not a record \(it lacks config, "):
        read_record(path)


def test_the_writer_writes_a_records_fields(tmp_path):
    store = RunStore(tmp_path)
    path = store.write_record(
        figure="fig8", config_id="c", config={"w": 2}, mode="overlap", rep=3,
        metrics={"e2e_ms": 1.0}, units={"e2e_ms": "ms"}, provenance={"torch": "2"},
        extra={"per_rank": [{"e2e_ms": 1.0}], "novel": 1},
    )  # fmt: skip
    rec = Record.from_json(json.loads(path.read_text()))
    assert (rec.schema, rec.rep, rec.per_rank, rec.extra) == (1, 3, [{"e2e_ms": 1.0}], {"novel": 1})
    assert rec.provenance.keys() == {"torch", "mode", "rep", "timestamp"}
