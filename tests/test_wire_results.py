"""Every action's result is a type of the wire layer: what a real server sends is that type's JSON,
key for key and in order, and clients read it through the type. `offsets` is where a push
partition stands, as `stats` counts it."""

from __future__ import annotations

import json
import time

import pyarrow as pa

from flight_server.wire import actions as wa
from flight_server.wire import names
from flight_server.wire.schemas import encode_schema
from producers.examples.counter import SCHEMA as PUSH_SCHEMA
from producers.examples.counter import make_batch

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def batch(start: int, n: int = 5) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(start, start + n)), pa.array([f"r{i}" for i in range(n)])], schema=SCHEMA)


def typed(client, name: str, body: dict):
    """The action's raw JSON result, which its type reads and writes back unchanged; the type."""
    raw = client.action(name, body)
    value = wa.ACTIONS[name].result.from_json(raw, name)
    assert json.dumps(value.to_json()) == json.dumps(raw), (name, raw)
    return value


def test_stats_create_table_and_the_procedures_answer_their_types(client):
    client.register("clicks", PUSH_SCHEMA, partitions=2)
    with client.sink("clicks", 0) as sink:
        sink.write(make_batch(0, 3))
        sink.write(make_batch(3, 3))
    created = typed(client, names.CREATE_TABLE, {"table": "db.t", "schema": encode_schema(SCHEMA),
                                                 "options": {"write-only": "true"}})
    assert (created.table, created.primary_keys, created.options["write-only"]) == ("db.t", [], "true")
    with client.paimon_sink("db.t", producer="p1", max_unacked=1) as sink:
        for i in range(3):  # one commit each: three small files to compact
            sink.write(batch(5 * i))
            deadline = time.monotonic() + 30
            while sink.acked < i + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
    client.stage("db.t", "job", "a1", SCHEMA, [batch(100, 7)])

    compacted = typed(client, names.COMPACT, {"table": "db.t"})
    assert compacted.snapshots and compacted.files_in == 3 and compacted.files_out == 1, compacted
    expired = typed(client, names.EXPIRE_SNAPSHOTS, {"table": "db.t", "retain_max": 1, "retain_min": 1,
                                                     "older_than": int(time.time() * 1000) + 60_000})
    assert expired.expired >= 3 and expired.first_kept == compacted.snapshots[-1], expired
    dry = typed(client, names.REMOVE_ORPHAN_FILES, {"table": "db.t", "dry_run": True})
    assert dry.would_delete == [] and dry.would_delete_bytes == 0 and "would_delete" in dry.to_json()
    assert "would_delete" not in typed(client, names.REMOVE_ORPHAN_FILES, {"table": "db.t"}).to_json()

    everything = typed(client, names.STATS, {})
    assert everything.paimon is None and set(everything.push) == {"clicks"}
    part = everything.push["clicks"].partitions["0"]
    assert (part.state, part.next_seq, part.committed, part.rows_in) == ("eof", 2, 0, 6)
    assert everything.push["clicks"].partitions["1"].state == "open"
    writes = everything.paimon_writes["db.t"]
    assert writes.last_snapshot >= 3 and writes.queued_batches == 0 and writes.named_producers_writing == [], writes
    assert everything.staged == {"db.t": {"job": wa.StagedStats(attempts=1, rows=7)}}
    kept = everything.maintenance["db.t"]
    assert kept.last_compaction.done == compacted and kept.last_compaction.at_ms > 0
    assert kept.last_expiry.done == expired and kept.compactions == len(compacted.snapshots)

    held = typed(client, names.STATS, {"table": "db.t"})
    assert held.push is None and held.paimon["db.t"].latest_snapshot == compacted.snapshots[-1]
    assert held.paimon["db.t"].snapshots == 1 and held.paimon["db.t"].data_files == 1
    assert set(held.maintenance) == set(held.paimon_writes) == set(held.staged) == {"db.t"}
    assert typed(client, names.STATS, {"name": "db.t"}).push == {}  # a Paimon table's name: its writes only
    assert client.stats("clicks") == typed(client, names.STATS, {"name": "clicks"})
    assert client.abort_staged("db.t", "job").attempts == 1


def test_offsets_say_where_each_push_partition_stands(client):
    client.register("orders", PUSH_SCHEMA, partitions=2, capacity=8)
    with client.sink("orders", 1) as sink:
        for i in range(4):
            sink.write(make_batch(i, 2))
    got = typed(client, names.OFFSETS, {"name": "orders"})
    assert got.to_json() == {"partitions": {"0": {"committed": 0, "next_seq": 0, "state": "open", "at_timestamp": None},
                                            "1": {"committed": 0, "next_seq": 4, "state": "eof", "at_timestamp": None}}}
    # a replaying reader commits what it processed: the batches below are freed
    client.flight.do_get(client.replay_info("orders", 1, 0, 3).endpoints[0].ticket, options=client.options()).read_all()
    client.commit("orders", {1: 3})
    offsets = client.offsets("orders")
    assert (offsets["1"].committed, offsets["1"].next_seq) == (3, 4)
    part = client.stats("orders").push["orders"].partitions["1"]
    assert (part.committed, part.next_seq, part.state, part.queued_batches) == (3, 4, "eof", 1)


def test_a_staged_jobs_commit_counts_as_ingested_and_makes_maintenance_due(client):
    """A staged job's commit (Spark's df.write) goes through the table's committer like a group
    commit: its data files' bytes count in `ingested_bytes`, the amplification's denominator."""
    typed(client, names.CREATE_TABLE, {"table": "db.s", "schema": encode_schema(SCHEMA),
                                       "options": {"write-only": "true"}})  # no compaction: the files stay as written
    client.stage("db.s", "job", "a1", SCHEMA, [batch(0, 50)])
    client.stage("db.s", "job", "a2", SCHEMA, [batch(50, 50)])
    client.commit_staged("db.s", "job", ["a1", "a2"])
    held = typed(client, names.STATS, {"table": "db.s"})
    assert held.paimon["db.s"].records == 100 and held.paimon["db.s"].data_bytes > 0
    assert held.maintenance["db.s"].ingested_bytes == held.paimon["db.s"].data_bytes, held.maintenance["db.s"]
