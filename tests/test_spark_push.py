"""flight-paimon in Spark over push tables: batch reads to EOF (endingOffsets eof), failures, streaming, writes, option errors."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter

import pyarrow as pa
import pytest

from producers import Client
from tests.conftest import wait_for
from tests.test_spark_paimon import delivered

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def batch(start: int, n: int) -> pa.RecordBatch:
    ids = list(range(start, start + n))
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"r{i}" for i in ids])], schema=SCHEMA)


def produce(uri: str, name: str, partition: int, first: int, batches: int, rows: int,
            pause: float = 0.0, fail_after: int | None = None) -> threading.Thread:
    """A producer thread pushing `batches` batches of `rows` ids from `first`, in its own client."""

    def run():
        client = Client(uri, timeout=30)
        try:
            with client.sink(name, partition) as sink:
                for i in range(batches):
                    if fail_after is not None and i == fail_after:
                        raise RuntimeError("sensor 7 unplugged")
                    sink.write(batch(first + i * rows, rows))
                    time.sleep(pause)
        except RuntimeError:
            pass  # the sink has failed the partition in-band: the reader must see it
        finally:
            client.close()

    thread = threading.Thread(target=run, name=f"producer-{name}-{partition}", daemon=True)
    thread.start()
    return thread


def read_push(spark, uri: str, name: str, ending: str = "latest"):
    return (spark.read.format("flight-paimon").option("uri", uri).option("push", name)
            .option("endingOffsets", ending).load())


@pytest.mark.timeout(240)
def test_batch_read_of_push_table_ends_at_eof_with_every_row(fp, server, client):
    client.register("live", SCHEMA, capacity=4, partitions=2)
    # 30 batches per partition against capacity 4: the producers can only finish while Spark reads.
    producers = [produce(server.uri, "live", p, p * 100_000, 30, 100, pause=0.005) for p in (0, 1)]
    df = read_push(fp, server.uri, "live", ending="eof")  # waits for the producers' end (test_spark_push_bounded.py)
    assert df.rdd.getNumPartitions() == 2
    ids = [r.id for r in df.select("id").collect()]
    for t in producers:
        t.join(10)
    expected = [p * 100_000 + i for p in (0, 1) for i in range(3000)]
    assert sorted(ids) == expected
    assert df.schema["id"].nullable is False


@pytest.mark.timeout(180)
def test_producer_failure_fails_the_query_with_its_cause(fp, server, client):
    client.register("flaky", SCHEMA, capacity=4)
    produce(server.uri, "flaky", 0, 0, 10, 50, fail_after=3)
    with pytest.raises(Exception, match="sensor 7 unplugged"):
        read_push(fp, server.uri, "flaky", ending="eof").collect()


@pytest.mark.timeout(300)
def test_stream_of_push_table_restarted_from_checkpoint_sees_every_row_once(fp, server, client, tmp_path):
    # Two writers per partition: the first pushes the first half while the first query runs, the
    # second pushes the rest only once that query has stopped, so it stops mid-stream by design.
    client.register("feed", SCHEMA, capacity=8, partitions=2, writers=2)
    half = 60  # batches of 10 rows per partition and writer, one every 20 ms
    first_half = [produce(server.uri, "feed", p, p * 1_000_000, half, 10, pause=0.02) for p in (0, 1)]
    expected = sorted(p * 1_000_000 + i for p in (0, 1) for i in range(2 * half * 10))
    by_batch: dict[int, list[int]] = {}  # foreachBatch keyed by batch id: a re-run batch overwrites

    def sink(df, batch_id):
        by_batch[batch_id] = [r.id for r in df.select("id").collect()]

    def seen() -> int:
        return sum(map(len, list(by_batch.values())))

    def start():
        stream = fp.readStream.format("flight-paimon").option("uri", server.uri).option("push", "feed").load()
        return (stream.writeStream.foreachBatch(sink).trigger(processingTime="200 milliseconds")
                .option("checkpointLocation", str(tmp_path / "ckpt")).start())

    query = start()
    try:
        wait_for(delivered(query, lambda: seen() >= 300), "the first query's first 300 rows", timeout=60)
    finally:
        query.stop()
    # What the first query's sink took, as its batches recorded it: each partition's rows from its
    # start with no gap (the restart must go on from exactly there).
    for p in (0, 1):
        got = sorted(i for ids in by_batch.values() for i in ids if i // 1_000_000 == p)
        assert got == list(range(p * 1_000_000, p * 1_000_000 + len(got))), got[:3]
    second_half = [produce(server.uri, "feed", p, p * 1_000_000 + half * 10, half, 10, pause=0.02) for p in (0, 1)]

    query = start()
    try:
        wait_for(delivered(query, lambda: seen() >= len(expected)), lambda: f"every row ({seen()} of {len(expected)})",
                 timeout=90)
    finally:
        query.stop()
    for t in first_half + second_half:
        t.join(10)
    counts = Counter(i for rows in by_batch.values() for i in rows)
    assert sorted(counts) == expected, "rows lost"
    assert max(counts.values()) == 1, f"rows seen twice: {[i for i, c in counts.items() if c > 1][:10]}"


@pytest.mark.timeout(180)
def test_dataframe_write_reaches_a_do_get_reader(fp, server, client):
    # Four tasks over two partitions, two each: the job is one writer of each, ended by its commit.
    client.register("from_spark", SCHEMA, capacity=4, partitions=2)
    got: dict[int, list[int]] = {0: [], 1: []}
    info = client.info("from_spark")

    def drain(p):
        for b in client.read_endpoint(info.endpoints[p], timeout=120):
            got[p].extend(b.column("id").to_pylist())

    readers = [threading.Thread(target=drain, args=(p,), daemon=True) for p in (0, 1)]
    for t in readers:
        t.start()
    df = fp.range(0, 20_000, numPartitions=4).selectExpr("id", "concat('r', id) AS name")
    df.write.format("flight-paimon").option("uri", server.uri).option("push", "from_spark").mode("append").save()
    for t in readers:
        t.join(30)
    assert not any(t.is_alive() for t in readers), "the readers did not reach EOF"
    assert sorted(got[0] + got[1]) == list(range(20_000))
    assert got[0] and got[1]
    assert [p.state for _, p in sorted(client.stats("from_spark").push["from_spark"].partitions.items())] == ["eof"] * 2


def _stats_of(client, name: str, partition: int = 0):
    return client.stats(name).push[name].partitions[str(partition)]


def _read_fails(client, name: str, partitions: int) -> list[str]:
    """Each partition read by a plain Flight reader: the error each ended with (a clean read fails the test)."""
    errors = []
    for p in range(partitions):
        endpoint = client.replay_info(name, p, 0, None).endpoints[0]  # from batch 0 to the end, as Spark reads
        with pytest.raises(Exception) as failed:  # noqa: PT011 - the partition's error, whatever its class
            rows = sum(b.num_rows for b in client.read_endpoint(endpoint, timeout=60))
            pytest.fail(f"partition {p} ended cleanly with {rows} rows: a short clean read")
        errors.append(str(failed.value))
    return errors


@pytest.mark.timeout(300)
def test_a_job_of_several_tasks_into_a_one_writer_push_table_ends_it_once_with_every_row(fp, server, client):
    # spark_reader/README's df.write under local[2] into a table registered with defaults: both
    # tasks write partition 0; neither ends it, the driver's commit does.
    client.register("few", SCHEMA, capacity=16)
    df = fp.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string").repartition(2)
    df.write.format("flight-paimon").option("uri", server.uri).option("push", "few").mode("append").save()
    assert _stats_of(client, "few").state == "eof" and _stats_of(client, "few").rows_in == 3
    got = read_push(fp, server.uri, "few").collect()
    assert sorted(r.id for r in got) == [1, 2, 3]


def _boom(i):
    if i == 7:
        raise ValueError("row 7 is poisoned")
    return f"r{i}"


@pytest.mark.timeout(300)
def test_a_failed_job_fails_the_partitions_it_wrote_and_readers_get_the_error_never_a_short_clean_end(
        fp, server, client):
    from pyspark.sql.functions import udf

    client.register("half", SCHEMA, capacity=64, partitions=2)
    poisoned = udf(_boom, "string")
    # Four tasks (ids 0-3, 4-7, 8-11, 12-15); the one holding 7 fails, the others push their rows.
    df = fp.range(0, 16, numPartitions=4).select("id", poisoned("id").alias("name"))
    with pytest.raises(Exception, match="row 7 is poisoned"):
        df.write.format("flight-paimon").option("uri", server.uri).option("push", "half").mode("append").save()
    for p in (0, 1):
        stats = _stats_of(client, "half", p)
        assert stats.state == "failed", (p, stats)
    failed = r"partition \d failed: .*Spark (task|job writing it) failed"  # a task's failure in-band, or the abort
    for error in _read_fails(client, "half", 2):
        assert re.search(failed, error), error
    with pytest.raises(Exception, match=failed):
        read_push(fp, server.uri, "half").collect()


@pytest.mark.timeout(300)
def test_a_second_job_into_an_ended_push_table_is_refused_naming_writers_and_leaves_the_first_jobs_end(
        fp, server, client):
    client.register("once", SCHEMA, capacity=16)
    df = fp.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    df.write.format("flight-paimon").option("uri", server.uri).option("push", "once").mode("append").save()
    with pytest.raises(Exception, match="is closed"):
        df.write.format("flight-paimon").option("uri", server.uri).option("push", "once").mode("append").save()
    assert _stats_of(client, "once").state == "eof" and _stats_of(client, "once").rows_in == 2


@pytest.mark.timeout(180)
@pytest.mark.parametrize("options, message", [
    ({"table": "db.t", "push": "p"}, "both given"),
    ({}, "needs a source"),
    ({"uri": "http//nowhere", "push": "p"}, "is not a Flight address"),
    ({"uri": "grpc://127.0.0.1:1", "push": "p"}, "Cannot reach the flight-paimon server"),
])
def test_bad_options_fail_clearly_at_load(fp, server, options, message):
    reader = fp.read.format("flight-paimon")
    if "uri" not in options:
        reader = reader.option("uri", server.uri)
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=message):
        reader.load()


@pytest.mark.timeout(240)
def test_available_now_stream_of_push_table_reads_what_was_pushed_and_stops(fp, server, client, tmp_path):
    client.register("backlog", SCHEMA, capacity=32, partitions=2, writers=2)
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = [r.id for r in df.select("id").collect()]

    def run_available_now() -> list[int]:
        before = set(by_batch)
        stream = fp.readStream.format("flight-paimon").option("uri", server.uri).option("push", "backlog").load()
        query = (stream.writeStream.foreachBatch(sink).trigger(availableNow=True)
                 .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        assert query.awaitTermination(120), "availableNow did not stop"
        assert query.exception() is None
        return sorted(i for b in set(by_batch) - before for i in by_batch[b])

    # The first writer of each partition pushes 20 batches and closes; the second is yet to come,
    # so the partitions stay open: availableNow must stop at what exists, not wait for EOF.
    for t in [produce(server.uri, "backlog", p, p * 100_000, 20, 10) for p in (0, 1)]:
        t.join(30)
    assert run_available_now() == [p * 100_000 + i for p in (0, 1) for i in range(200)]
    for t in [produce(server.uri, "backlog", p, p * 100_000 + 200, 5, 10) for p in (0, 1)]:
        t.join(30)
    assert run_available_now() == [p * 100_000 + 200 + i for p in (0, 1) for i in range(50)]


@pytest.mark.timeout(300)
def test_a_job_refused_in_one_partition_fails_the_other_it_wrote_by_its_abort(fp, server, client):
    client.register("split", SCHEMA, capacity=16, partitions=2)
    client.fail("split", "sensor 7 unplugged", partition=0)  # task 0's partition refuses it
    df = fp.createDataFrame([(i, f"r{i}") for i in range(6)], "id long, name string").repartition(2)
    with pytest.raises(Exception, match="sensor 7 unplugged"):
        df.write.format("flight-paimon").option("uri", server.uri).option("push", "split").mode("append").save()
    stats = _stats_of(client, "split", 1)
    assert stats.state == "failed", stats
    [error] = _read_fails(client, "split", 2)[1:]
    assert re.search(r"partition 1 failed: .*Spark (task|job writing it) failed", error), error


@pytest.mark.timeout(300)
def test_a_job_whose_commit_finds_no_writer_slot_names_writers_and_fails_the_partition(fp, server, client):
    client.register("held", SCHEMA, capacity=16)
    other = Client(server.uri, timeout=30)
    sink = other.sink("held", 0)  # another producer's writer stream holds the table's one slot
    sink.write(batch(100, 2))
    wait_for(lambda: _stats_of(client, "held").writers_attached == 1, "the other producer's stream to attach")
    try:
        df = fp.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
        with pytest.raises(Exception, match=r"register the table with writers=N, N >= the jobs"):
            df.write.format("flight-paimon").option("uri", server.uri).option("push", "held").mode("append").save()
        assert _stats_of(client, "held").state == "failed"
    finally:
        try:
            sink.close()
        except Exception:  # noqa: BLE001 - the partition failed under it, as asserted
            pass
        other.close()
