"""flight-paimon in Spark over Paimon tables: batch reads per bucket, pushed filters, exactly-once streams."""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pytest
from structlog.testing import capture_logs

from spark_reader import register
from tests.paimon_tables import SCHEMA, Warehouse, rows, sort_rows


@pytest.fixture
def fp(spark):
    register(spark)
    return spark


@pytest.fixture
def paimon(warehouse):
    return Warehouse(warehouse)


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


def rows_sent(logs: list[dict], endpoints: int = 2) -> int:
    """Rows the server sent in its do_get streams, once all `endpoints` streams have logged their end.

    The server writes one line per do_get, when its stream ends: a moment after the client saw the end.
    """
    deadline = time.monotonic() + 10
    while True:
        done = [e for e in logs if e.get("event") == "rpc_done" and e.get("rpc") == "do_get" and "bucket" in e]
        if len(done) >= endpoints or time.monotonic() > deadline:
            return sum(e["rows"] for e in done)
        time.sleep(0.05)


@pytest.mark.timeout(240)
def test_pushed_filter_reduces_what_the_server_sends(fp, server, paimon):
    table = paimon.create("events", buckets=2)
    paimon.commit(table, rows(0, 4000))
    with capture_logs() as unfiltered:
        assert read(fp, server.uri, table).count() == 4000
        sent_all = rows_sent(unfiltered)
    with capture_logs() as filtered:
        got = read(fp, server.uri, table).filter("id >= 3900 AND region = 'eu'").select("id").collect()
        sent_filtered = rows_sent(filtered)
    expected = [i for i in range(3900, 4000) if i % 3 == 0]
    assert sorted(r.id for r in got) == expected
    assert sent_all == 4000
    assert sent_filtered < 4000, "the filter did not reach the server"


def start_stream(spark, uri: str, table: str, checkpoint: str, sink, trigger: dict, **options):
    reader = spark.readStream.format("flight-paimon").option("uri", uri).option("table", table)
    for k, v in options.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.foreachBatch(sink).trigger(**trigger)
            .option("checkpointLocation", checkpoint).start())


def wait_for(predicate, query, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if query.exception():
            raise query.exception()
        assert time.monotonic() < deadline, "the stream did not deliver in time"
        time.sleep(0.1)


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
        wait_for(lambda: seen() >= 500, query)
        paimon.commit(table, rows(500, 100))  # committed while the query runs
        paimon.commit(table, rows(600, 100))
        wait_for(lambda: seen() >= 700, query)
    finally:
        query.stop()
    paimon.commit(table, rows(700, 100))  # committed while the query is down
    query = start_stream(fp, server.uri, table, ckpt, sink, trigger, **opts)
    try:
        paimon.commit(table, rows(800, 100))
        wait_for(lambda: seen() >= 900, query)
        time.sleep(1)  # a few more triggers: nothing may arrive twice
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


@pytest.mark.timeout(120)
def test_consumer_id_without_server_support_is_refused_at_load(fp, server, paimon):
    table = paimon.create("consumed", buckets=1)
    paimon.commit(table, rows(0, 10))
    with pytest.raises(Exception, match="needs the server actions consumer_commit, consumer_progress"):
        fp.readStream.format("flight-paimon").option("uri", server.uri).option("table", table) \
            .option("consumer-id", "spark-1").load()
