"""Paimon streams as users of Paimon's Spark connector expect them: consumer ids shared with the
CLI, start positions by time and tag, trigger admission, and changelog reads with `rowkind`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from pypaimon import Schema

from producers import Client
from tests.conftest import ROOT, child_env, wait_for
from tests.paimon_tables import Warehouse, commit_arrow, read_all, rows
from tests.test_spark_paimon import delivered, read, run_available_now, start_stream


def ids(batches: list[list[int]]) -> list[int]:
    return sorted(i for b in batches for i in b)


def progress(client, table: str, consumer: str) -> int | None:
    return client.action("consumer_progress", {"table": table, "consumer_id": consumer})["next_snapshot"]


def cli_tail(uri: str, table: str, consumer: str, limit: int) -> list[int]:
    proc = subprocess.run([sys.executable, "-m", "flight_cli", "tail", table, "--consumer-id", consumer,
                           "--limit", str(limit), "--format", "jsonl", "--uri", uri],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return sorted(json.loads(line)["id"] for line in proc.stdout.splitlines())


@pytest.mark.timeout(300)
def test_consumer_id_under_available_now_records_progress_shared_with_the_cli(fp, server, paimon, client, tmp_path):
    table = paimon.create("consumed", buckets=1)  # one endpoint: the CLI's progress marks come in order
    for i in range(3):
        paimon.commit(table, rows(i * 100, 100))
    opts = {"consumer-id": "shared"}
    # One micro-batch (the full scan at snapshot 3): Spark never calls commit() for it, yet the
    # consumer's progress is recorded when the query looks for the next batch and stops.
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "a"), **opts)) == list(range(300))
    assert progress(client, table, "shared") == 4
    paimon.commit(table, rows(300, 100))
    paimon.commit(table, rows(400, 100))
    # A new checkpoint with the same consumer id reads only the newer snapshots.
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "b"), **opts)) == list(range(300, 500))
    assert progress(client, table, "shared") == 6
    # flight_cli tail with that consumer id goes on from there and records each snapshot it has
    # printed in full (it stops at --limit in the middle of snapshot 7)...
    paimon.commit(table, rows(500, 100))
    paimon.commit(table, rows(600, 100))
    assert cli_tail(server.uri, table, "shared", 150) == list(range(500, 650))
    wait_for(lambda: progress(client, table, "shared") == 7, "the CLI to record its progress")
    # ...which Spark continues from on yet another checkpoint (snapshot 7 again: at least once).
    paimon.commit(table, rows(700, 100))
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "c"), **opts)) == list(range(600, 800))
    assert progress(client, table, "shared") == 9


def commit_times(paimon: Warehouse, table: str) -> dict[int, int]:
    sm = paimon.catalog.get_table(table).snapshot_manager()
    latest = sm.get_latest_snapshot().id
    return {i: sm.get_snapshot_by_id(i).time_millis for i in range(1, latest + 1)}


@pytest.mark.timeout(300)
def test_scan_timestamp_millis_and_tag_name_start_where_paimon_says(fp, server, paimon, tmp_path):
    table = paimon.create("timed", buckets=2)
    for i in range(4):
        paimon.commit(table, rows(i * 100, 100))
        time.sleep(0.01)  # distinct commit times (ms)
    times = commit_times(paimon, table)
    # A stream starts at the first snapshot committed at or after the time: its delta and later.
    between = {"scan.timestamp-millis": str(times[2] + 1)}  # after snapshot 2, before 3
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "t1"), **between)) == list(range(200, 400))
    exact = {"scan.timestamp-millis": str(times[2])}
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "t2"), **exact)) == list(range(100, 400))
    # A batch read of a time is the table as it was then (the last snapshot at or before it).
    assert sorted(r.id for r in read(fp, server.uri, table, between).select("id").collect()) == list(range(200))
    # A tag: the batch read is the tagged snapshot, a stream starts with the tagged snapshot's delta.
    paimon.catalog.get_table(table).create_tag("v2", 2)
    tag = {"scan.tag-name": "v2"}
    assert sorted(r.id for r in read(fp, server.uri, table, tag).select("id").collect()) == list(range(200))
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "t3"), **tag)) == list(range(100, 400))
    full = {**tag, "scan.mode": "from-snapshot-full"}
    assert ids(run_available_now(fp, server.uri, table, str(tmp_path / "t4"), **full)) == list(range(400))
    # A time after the last commit: nothing yet, then what is committed later.
    future = {"scan.timestamp-millis": str(times[4] + 1)}
    assert run_available_now(fp, server.uri, table, str(tmp_path / "t5"), **future) == []
    # Mistakes are one sentence naming the fix.
    with pytest.raises(Exception, match="has no tag 'nope'; its tags are: v2"):
        read(fp, server.uri, table, {"scan.tag-name": "nope"}).collect()
    with pytest.raises(Exception, match="no snapshot committed at or before scan.timestamp-millis"):
        read(fp, server.uri, table, {"scan.timestamp-millis": str(times[1] - 1000)}).collect()


@pytest.mark.timeout(300)
def test_min_rows_per_trigger_holds_a_trigger_until_enough_rows_or_the_delay(fp, server, paimon, tmp_path):
    table = paimon.create("trickle", buckets=1)
    paimon.commit(table, rows(0, 10))
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = sorted(r.id for r in df.select("id").collect())

    opts = {"scan.mode": "latest", "read.stream.minRowsPerTrigger": "50", "read.stream.maxTriggerDelayMs": "6000"}
    query = start_stream(fp, server.uri, table, str(tmp_path / "ckpt"), sink, {"processingTime": "100 milliseconds"},
                         **opts)
    try:
        wait_for(delivered(query, lambda: query.lastProgress is not None), "the query's first trigger", timeout=60)
        for i in range(1, 6):  # 5 commits of 10 rows: the trigger fires once all 50 are there
            paimon.commit(table, rows(i * 10, 10))
            time.sleep(0.3)  # paces the commits: triggers (every 100 ms) see 10, 20, ... rows, too few
        wait_for(delivered(query, lambda: any(by_batch.values())), "the first non-empty micro-batch",
                 timeout=60)
        first = [b for b in by_batch.values() if b][0]
        assert first == list(range(10, 60)), first
        # 10 more rows never reach 50: the delay releases them.
        started = time.monotonic()
        paimon.commit(table, rows(60, 10))
        wait_for(delivered(query, lambda: sum(map(len, by_batch.values())) == 60), "the delayed 10 rows",
                 timeout=30)
        assert time.monotonic() - started >= 1.0, "the trigger did not wait for rows or the delay"
    finally:
        query.stop()
    assert Counter(i for b in by_batch.values() for i in b) == Counter(range(10, 70))


@pytest.mark.timeout(300)
def test_max_bytes_and_files_per_trigger_split_a_backlog(fp, server, paimon, client, tmp_path):
    table = paimon.create("backlog", buckets=1)
    for i in range(6):
        paimon.commit(table, rows(i * 100, 100))
    def delta(a: int, b: int) -> flight.FlightInfo:
        command = json.dumps({"table": table, "from_snapshot": a, "to_snapshot": b})
        return client.flight.get_flight_info(flight.FlightDescriptor.for_command(command), options=client.options())

    sizes = [delta(s - 1, s).total_bytes for s in range(1, 7)]  # each snapshot's data files on storage
    assert min(sizes) > 0 and json.loads(delta(0, 2).app_metadata) == {"files": 2}
    start = {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}
    by_files = run_available_now(fp, server.uri, table, str(tmp_path / "f"),
                                 **start, **{"read.stream.maxFilesPerTrigger": "2"})
    assert [len(b) for b in by_files] == [200, 200, 200]
    cap = sum(sizes[:3])
    by_bytes = run_available_now(fp, server.uri, table, str(tmp_path / "b"),
                                 **start, **{"read.stream.maxBytesPerTrigger": str(cap)})
    assert len(by_bytes[0]) == 300 and len(by_bytes) >= 2  # snapshots 1-3 fit the cap; 4 would not
    assert ids(by_files) == ids(by_bytes) == list(range(600))


CHANGES = pa.schema([("id", pa.int64()), ("name", pa.string()), ("op", pa.string())])


def changes(*rows_: tuple[int, str, str]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows_], "name": [r[1] for r in rows_], "op": [r[2] for r in rows_]},
                    schema=CHANGES)


@pytest.mark.timeout(300)
def test_changelog_stream_of_a_primary_key_table_equals_pypaimons_changelog_read(fp, server, paimon, tmp_path):
    # A primary-key table whose writes carry their row kind ('op'), kept as its changelog.
    options = {"bucket": "1", "rowkind.field": "op", "changelog-producer": "input"}
    paimon.catalog.create_table("db.users", Schema.from_pyarrow_schema(CHANGES, primary_keys=["id"], options=options),
                                False)
    table = "db.users"

    def commit(data: pa.Table) -> None:
        commit_arrow(paimon.catalog.get_table(table), data)

    commit(changes((0, "a0", "+I"), (1, "a1", "+I"), (2, "a2", "+I")))
    # pypaimon's own changelog read: its streaming scan with row kinds, started now.
    builder = paimon.catalog.get_table(table).new_stream_read_builder().with_include_row_kind(True)
    plans, reader = iter(builder.new_streaming_scan().stream_sync()), builder.new_read()
    next(plans)  # its first frame: the table as it is now
    got: dict[int, list[tuple]] = {}

    def sink(df, batch_id):
        got[batch_id] = [(r.rowkind, r.id, r.name) for r in df.collect()]

    query = start_stream(fp, server.uri, table, str(tmp_path / "ckpt"), sink, {"processingTime": "100 milliseconds"},
                         **{"read.changelog": "true", "scan.mode": "latest"})
    try:
        wait_for(delivered(query, lambda: query.lastProgress is not None), "the query's first trigger", timeout=60)
        commit(changes((0, "a0", "-U"), (3, "a3", "+I")))
        commit(changes((0, "b0", "+U")))
        commit(changes((1, "a1", "-D")))
        expected = []
        for _ in range(3):
            frame = reader.to_arrow(next(plans).splits())
            expected += [(r["_row_kind"], r["id"], r["name"]) for r in frame.to_pylist()]
        wait_for(delivered(query, lambda: sum(map(len, got.values())) >= len(expected)), "the changes",
                 timeout=60)
        query.processAllAvailable()  # every commit there is processed: anything more would be here by now
    finally:
        query.stop()
    received = [row for b in sorted(got) for row in got[b]]
    assert sorted(received) == sorted(expected)
    assert {k for k, _, _ in received} == {"-U", "+I", "+U", "-D"}
    # A batch read of the audit_log system table is the server's, which Java Paimon's AuditLogTable
    # reads the same (tests/test_audit_log.py): each key merged with its last kind, the delete kept.
    audit = read(fp, server.uri, f"{table}$audit_log")
    assert audit.columns == ["rowkind", "id", "name", "op"]
    got = sorted((r.id, r.rowkind, r.name) for r in audit.collect())
    _, served = read_all(Client(server.uri, timeout=30), flight.FlightDescriptor.for_path("paimon", f"{table}$audit_log"))
    assert got == sorted((r["id"], r["rowkind"], r["name"]) for r in served.to_pylist())
    assert got == [(0, "+U", "b0"), (1, "-D", "a1"), (2, "+I", "a2"), (3, "+I", "a3")]


def first_batch_under_expiry(fp, server, paimon, client, checkpoint: str, monkeypatch, name: str, options: dict):
    """Expiry as aggressive as it gets (everything but the latest snapshot, after a compaction that
    replaced every file) while the query's first batch is being read; returns the stopped query
    and the ids of each micro-batch."""
    import threading

    from flight_server.paimon.scope import Scope

    table = paimon.create(name, buckets=2)
    for i in range(3):
        paimon.commit(table, rows(i * 100, 100))
    reading, go_on = threading.Event(), threading.Event()
    original = Scope.batches

    def batches(scope, splits, meta=None):  # the server's read of batch 0, paused before its files open
        if splits and not reading.is_set():
            reading.set()
            assert go_on.wait(120)
        yield from original(scope, splits, meta)

    monkeypatch.setattr(Scope, "batches", batches)
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = sorted(r.id for r in df.select("id").collect())

    query = start_stream(fp, server.uri, table, checkpoint, sink, {"availableNow": True}, **options)
    wait_for(delivered(query, reading.is_set), "the first batch's read to start", timeout=120)
    paimon.commit(table, rows(900, 10))  # past the AvailableNow end (snapshot 3)
    assert client.compact(table).snapshots
    client.expire_snapshots(table, retain_max=1, retain_min=1, older_than=int(time.time() * 1000) + 60_000)
    go_on.set()
    wait_for(lambda: not query.isActive, "the availableNow query to stop", timeout=120)
    return query, table, by_batch


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode,options,first", [
    ("latest-full", {}, 1),
    ("earliest", {"scan.mode": "earliest"}, 1),
    ("from-snapshot", {"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}, 2),
])
def test_a_consumer_keeps_the_first_batch_from_expiry(fp, server, paimon, client, tmp_path, monkeypatch, mode,
                                                      options, first):
    """The consumer, recorded before the first batch was planned, keeps what it reads: every row
    arrives once."""
    query, table, by_batch = first_batch_under_expiry(fp, server, paimon, client, str(tmp_path / "cp"), monkeypatch,
                                                      f"first_{mode.replace('-', '_')}", {"consumer-id": "first", **options})
    assert query.exception() is None, query.exception()
    assert ids(list(by_batch.values())) == list(range((first - 1) * 100, 300))
    assert progress(client, table, "first") == 4


@pytest.mark.timeout(300)
def test_a_stream_whose_snapshots_expired_says_to_start_a_new_checkpoint(fp, server, paimon, client, tmp_path,
                                                                         monkeypatch):
    query, _, _ = first_batch_under_expiry(fp, server, paimon, client, str(tmp_path / "cp"), monkeypatch,
                                           "unprotected", {})
    text = str(query.exception())
    assert "Snapshot 3" in text and "expired" in text
    assert "new checkpointLocation" in text and "consumer-id" in text
