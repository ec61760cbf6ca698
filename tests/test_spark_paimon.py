"""flight-paimon in Spark over Paimon tables: batch reads per bucket, reused DataFrames, exactly-once streams."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import wait_for
from tests.paimon_tables import SCHEMA, rows, sort_rows


def read(spark, uri: str, table: str, options: dict | None = None):
    reader = spark.read.format("flight-paimon").option("uri", uri).option("table", table)
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    return reader.load()


def as_arrow(df) -> pa.Table:
    return df.toArrow().cast(SCHEMA)


@pytest.mark.timeout(240)
def test_batch_read_equals_pypaimon_with_one_partition_per_bucket(fp, server, paimon):
    table = paimon.create("orders", buckets=4)
    paimon.commit(table, rows(0, 3000))
    paimon.commit(table, rows(3000, 2000))
    df = read(fp, server.uri, table)
    assert df.rdd.getNumPartitions() == 4
    assert sort_rows(as_arrow(df)) == sort_rows(paimon.read(table))
    assert sort_rows(as_arrow(read(fp, server.uri, table, {"scan.snapshot-id": "1"}))) == sort_rows(paimon.read(table, 1))
    delta = read(fp, server.uri, table, {"incremental-between": "1,2"})
    assert sorted(r.id for r in delta.select("id").collect()) == list(range(3000, 5000))


@pytest.mark.timeout(240)
def test_reused_dataframe_is_exact_across_filters_and_commits(fp, server, paimon):
    """PySpark 4.3 keeps a Python source's partitions (and the reader that planned them) for every
    later action on the DataFrame, and a filtered query's replace them: each action must still see
    the table as it is, whatever ran before on the same DataFrame."""
    table = paimon.create("events", buckets=2)
    paimon.commit(table, rows(0, 4000))
    df = read(fp, server.uri, table)
    assert df.count() == 4000
    assert df.filter("id >= 3900").count() == 100
    assert df.count() == 4000, "the filtered query's plan leaked into the next count"
    got = df.filter("id >= 3900 AND region = 'eu'").select("id").collect()
    assert sorted(r.id for r in got) == [i for i in range(3900, 4000) if i % 3 == 0]
    # a self-join whose sides filter differently (both sides share the DataFrame's source)
    low, high = df.filter("id < 10").select("id"), df.filter("id >= 3990").select("id")
    assert low.union(high).count() == 20
    assert low.crossJoin(high.withColumnRenamed("id", "j")).count() == 100
    paimon.commit(table, rows(4000, 500))
    assert df.count() == 4500, "a reused DataFrame read the snapshot of its first action"
    assert df.filter("id >= 4400").count() == 100
    assert sorted(r.id for r in df.select("id").collect()) == list(range(4500))
    pinned = read(fp, server.uri, table, {"scan.snapshot-id": "1"})
    assert pinned.count() == 4000
    paimon.commit(table, rows(4500, 10))
    assert pinned.count() == 4000 and pinned.filter("id >= 3990").count() == 10


def start_stream(spark, uri: str, table: str, checkpoint: str, sink, trigger: dict, **options):
    reader = spark.readStream.format("flight-paimon").option("uri", uri).option("table", table)
    for k, v in options.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.foreachBatch(sink).trigger(**trigger)
            .option("checkpointLocation", checkpoint).start())


def delivered(query, predicate):
    """A condition for `wait_for`: `predicate()`, failing at once with the query's error if it stopped."""

    def condition():
        if query.exception():
            raise query.exception()
        return predicate()

    return condition


@pytest.mark.timeout(300)
def test_stream_restarted_from_checkpoint_delivers_each_row_once(fp, server, paimon, tmp_path):
    table = paimon.create("stream", buckets=2)
    paimon.commit(table, rows(0, 500))  # before the query: its first batch is a full scan
    by_batch: dict[int, list[int]] = {}  # keyed by batch id: a re-run batch overwrites, as a sink should

    def sink(df, batch_id):
        by_batch[batch_id] = [r.id for r in df.select("id").collect()]

    def seen() -> int:
        return sum(map(len, by_batch.values()))

    ckpt, trigger = str(tmp_path / "ckpt"), {"processingTime": "200 milliseconds"}
    opts = {"read.stream.maxSnapshotsPerTrigger": "1"}
    query = start_stream(fp, server.uri, table, ckpt, sink, trigger, **opts)
    try:
        wait_for(delivered(query, lambda: seen() >= 500), "the first 500 rows", timeout=60)
        paimon.commit(table, rows(500, 100))  # committed while the query runs
        paimon.commit(table, rows(600, 100))
        wait_for(delivered(query, lambda: seen() >= 700), "700 rows", timeout=60)
    finally:
        query.stop()
    paimon.commit(table, rows(700, 100))  # committed while the query is down
    query = start_stream(fp, server.uri, table, ckpt, sink, trigger, **opts)
    try:
        paimon.commit(table, rows(800, 100))
        wait_for(delivered(query, lambda: seen() >= 900), "900 rows", timeout=60)
        query.processAllAvailable()  # every snapshot there is processed: a row twice would be here by now
    finally:
        query.stop()
    counts = Counter(i for ids in by_batch.values() for i in ids)
    assert sorted(counts) == list(range(900)) and max(counts.values()) == 1
    # One snapshot per trigger: no micro-batch after the first mixes two commits.
    for ids in by_batch.values():
        if ids and min(ids) >= 500:
            assert max(ids) // 100 == min(ids) // 100, f"a micro-batch spans snapshots: {min(ids)}..{max(ids)}"


@pytest.mark.timeout(240)
def test_available_now_reads_all_that_exists_and_stops(fp, server, paimon, tmp_path):
    table = paimon.create("backlog", buckets=2)
    for i in range(4):
        paimon.commit(table, rows(i * 100, 100))
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = [r.id for r in df.select("id").collect()]

    # From snapshot 2 on, at most 150 rows a trigger: snapshots 2, 3, 4 come one per batch.
    query = start_stream(fp, server.uri, table, str(tmp_path / "ckpt"), sink, {"availableNow": True},
                         **{"scan.mode": "from-snapshot", "scan.snapshot-id": "2",
                            "read.stream.maxRowsPerTrigger": "150"})
    assert query.awaitTermination(120), "availableNow did not stop"
    assert query.exception() is None
    batches = [sorted(ids) for ids in by_batch.values() if ids]
    assert sorted(i for ids in batches for i in ids) == list(range(100, 400))
    assert len(batches) == 3


def run_available_now(spark, uri: str, table: str, checkpoint: str, **options) -> list[list[int]]:
    """One Trigger.AvailableNow run: the ids of each non-empty micro-batch, in batch order."""
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = sorted(r.id for r in df.select("id").collect())

    query = start_stream(spark, uri, table, checkpoint, sink, {"availableNow": True}, **options)
    assert query.awaitTermination(120), "availableNow did not stop"
    assert query.exception() is None
    return [by_batch[b] for b in sorted(by_batch) if by_batch[b]]


@pytest.mark.timeout(240)
def test_scan_modes_latest_and_from_snapshot_full(fp, server, paimon, tmp_path):
    table = paimon.create("modes", buckets=2)
    for i in range(3):
        paimon.commit(table, rows(i * 100, 100))
    # latest: what exists when the query starts is skipped; later commits arrive.
    ckpt = str(tmp_path / "latest")
    assert run_available_now(fp, server.uri, table, ckpt, **{"scan.mode": "latest"}) == []
    paimon.commit(table, rows(300, 100))
    assert run_available_now(fp, server.uri, table, ckpt, **{"scan.mode": "latest"}) == [list(range(300, 400))]
    # from-snapshot-full: a full scan pinned at snapshot 2, then each later snapshot's delta.
    got = run_available_now(fp, server.uri, table, str(tmp_path / "full"),
                            **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2",
                               "read.stream.maxSnapshotsPerTrigger": "1"})
    assert got == [list(range(0, 200)), list(range(200, 300)), list(range(300, 400))]
    # earliest, as `flight_cli tail --from earliest` means it: every commit while snapshot 1 is
    # kept; once it has expired, the earliest kept snapshot in full, then the deltas after it.
    opts = {"scan.mode": "earliest", "read.stream.maxSnapshotsPerTrigger": "1"}
    got = run_available_now(fp, server.uri, table, str(tmp_path / "earliest"), **opts)
    assert got == [list(range(i * 100, (i + 1) * 100)) for i in range(4)]
    expire_first_snapshot(paimon, table)
    got = run_available_now(fp, server.uri, table, str(tmp_path / "earliest-expired"), **opts)
    assert got == [list(range(0, 200)), list(range(200, 300)), list(range(300, 400))]


def expire_first_snapshot(paimon, table: str) -> None:
    """What Paimon's snapshot expiry does to snapshot 1 (pypaimon never expires snapshots itself)."""
    snapshots = Path(paimon.catalog.get_table(table).table_path) / "snapshot"
    (snapshots / "snapshot-1").unlink()
    (snapshots / "EARLIEST").write_text("2")


@pytest.mark.timeout(300)
def test_consumer_id_records_progress_a_new_checkpoint_resumes_from(fp, server, paimon, client, tmp_path):
    table = paimon.create("consumed", buckets=2)
    paimon.commit(table, rows(0, 100))
    opts = {"consumer-id": "spark-1", "read.stream.maxSnapshotsPerTrigger": "1"}
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = [r.id for r in df.select("id").collect()]

    def progress() -> int | None:
        return client.action("consumer_progress", {"table": table, "consumer_id": "spark-1"})["next_snapshot"]

    query = start_stream(fp, server.uri, table, str(tmp_path / "first"), sink,
                         {"processingTime": "200 milliseconds"}, **opts)
    try:
        wait_for(delivered(query, lambda: sum(map(len, by_batch.values())) >= 100), "the first 100 rows",
                 timeout=60)
        for i in range(1, 4):
            paimon.commit(table, rows(i * 100, 100))
        wait_for(delivered(query, lambda: sum(map(len, by_batch.values())) >= 400), "400 rows", timeout=60)
        # Spark commits a batch once the next one is planned: progress trails by at most one.
        wait_for(delivered(query, lambda: (progress() or 0) >= 4), "the consumer's progress to reach 4", timeout=60)
    finally:
        query.stop()
    first = sorted(i for ids in by_batch.values() for i in ids)
    assert first == list(range(400))
    recorded = progress()
    assert recorded in (4, 5), recorded
    paimon.commit(table, rows(400, 100))
    # A new checkpoint with the same consumer id starts at the recorded snapshot, not at the scan mode's.
    resumed = run_available_now(fp, server.uri, table, str(tmp_path / "second"), **opts)
    expected = list(range((recorded - 1) * 100, 500))
    assert sorted(i for ids in resumed for i in ids) == expected
    assert progress() in (5, 6)  # moved on with the new query


@pytest.mark.timeout(120)
def test_bad_consumer_id_fails_at_load_and_batch_reads_refuse_it(fp, server, paimon):
    table = paimon.create("consumed", buckets=1)
    paimon.commit(table, rows(0, 10))
    stream = fp.readStream.format("flight-paimon").option("uri", server.uri).option("table", table)
    with pytest.raises(Exception, match="'consumer_id' 'a/b' must be 1-128 characters"):
        stream.option("consumer-id", "a/b").load()
    with pytest.raises(Exception, match="'consumer-id' is for streams"):
        read(fp, server.uri, table, {"consumer-id": "c1"}).collect()
