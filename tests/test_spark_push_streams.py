"""Push tables in Spark as users of Spark's Kafka source expect them: start offsets, trigger
limits, data-loss policy; retry-safe batch reads; writeStream that survives replays."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter

import pyarrow as pa
import pytest

from producers import Client
from tests.conftest import ROOT, child_env, wait_for
from tests.paimon_tables import Warehouse, rows
from tests.test_spark_push import SCHEMA, produce

pytestmark = pytest.mark.timeout(300)


def push_stream(spark, uri: str, name: str, checkpoint: str, **options) -> list[list[int]]:
    """One Trigger.AvailableNow run of a push table: the ids of each non-empty micro-batch."""
    by_batch: dict[int, list[int]] = {}

    def sink(df, batch_id):
        by_batch[batch_id] = sorted(r.id for r in df.select("id").collect())

    reader = spark.readStream.format("flight-paimon").option("uri", uri).option("push", name)
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.foreachBatch(sink).trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).start())
    assert query.awaitTermination(120), "availableNow did not stop"
    if query.exception() is not None:
        raise query.exception()
    return [by_batch[b] for b in sorted(by_batch) if by_batch[b]]


def pushed(uri: str, name: str, partition: int, first: int, batches: int, rows_: int = 10) -> None:
    produce(uri, name, partition, first, batches, rows_).join(30)


def test_starting_offsets_latest_skips_and_frees_what_is_held(fp, server, client, tmp_path):
    client.register("events", SCHEMA, capacity=16, partitions=2, writers=2)
    for p in (0, 1):
        pushed(server.uri, "events", p, p * 1000, 5)
    ckpt = str(tmp_path / "latest")
    assert push_stream(fp, server.uri, "events", ckpt, startingOffsets="latest") == []
    parts = client.stats("events").push["events"].partitions
    assert [parts[p].queued_batches for p in ("0", "1")] == [0, 0], "the skipped batches were not freed"
    for p in (0, 1):
        pushed(server.uri, "events", p, p * 1000 + 50, 2)
    got = push_stream(fp, server.uri, "events", ckpt)
    assert sorted(i for b in got for i in b) == [p * 1000 + 50 + i for p in (0, 1) for i in range(20)]


def test_starting_offsets_json_and_max_offsets_per_trigger(fp, server, client, tmp_path):
    client.register("backlog", SCHEMA, capacity=32, partitions=2, writers=2)
    pushed(server.uri, "backlog", 0, 0, 12)
    pushed(server.uri, "backlog", 1, 1000, 4)
    got = push_stream(fp, server.uri, "backlog", str(tmp_path / "a"),
                      startingOffsets='{"0": 2, "1": 0}', maxOffsetsPerTrigger="4")
    # 10 + 4 batches waiting, at most 4 per trigger, shared in proportion to what each partition has.
    assert all(len(b) <= 40 for b in got) and len(got) >= 4
    assert sorted(i for b in got for i in b) == list(range(20, 120)) + list(range(1000, 1040))
    with pytest.raises(Exception, match="startingOffsets"):
        push_stream(fp, server.uri, "backlog", str(tmp_path / "b"), startingOffsets="[1, 2]")
    with pytest.raises(Exception, match="names partition\\(s\\) 7"):
        push_stream(fp, server.uri, "backlog", str(tmp_path / "c"), startingOffsets='{"7": 0}')


def test_fail_on_data_loss_when_another_consumer_freed_the_batches(fp, server, client, tmp_path):
    client.register("shared", SCHEMA, capacity=32, partitions=1, writers=2)
    pushed(server.uri, "shared", 0, 0, 3)
    ckpt = str(tmp_path / "ckpt")
    assert sorted(i for b in push_stream(fp, server.uri, "shared", ckpt) for i in b) == list(range(30))
    pushed(server.uri, "shared", 0, 100, 6)
    # Another consumer reads and commits batches 3..6 under this query's feet.
    info = client.replay_info("shared", 0, 3, 6)
    assert sum(b.num_rows for b in client.read_endpoint(info.endpoints[0])) == 30
    client.commit("shared", {0: 6})
    with pytest.raises(Exception, match=r"batches \[3, 6\) of partition 0 were committed by another consumer"):
        push_stream(fp, server.uri, "shared", ckpt)
    got = push_stream(fp, server.uri, "shared", ckpt, failOnDataLoss="false")
    assert sorted(i for b in got for i in b) == list(range(130, 160))  # what was still held


def drain_all(uri: str, name: str, partitions: int, received: list, stop: threading.Event) -> list[threading.Thread]:
    """Readers draining each partition of a table that never ends, until `stop`."""

    def run(p: int):
        client = Client(uri, timeout=None)
        try:
            info = client.info(name, p)
            reader = client.flight.do_get(info.endpoints[0].ticket, options=client.options(None))
            while not stop.is_set():
                chunk = reader.read_chunk()
                received.extend(chunk.data.column("id").to_pylist())
        except Exception:  # noqa: BLE001 - the table is dropped at the end: that ends the read
            if not stop.is_set():
                raise
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in range(partitions)]
    for t in threads:
        t.start()
    return threads


def test_write_stream_into_a_push_table_stopped_replayed_and_restarted_delivers_each_row_once(
        fp, server, client, warehouse, tmp_path):
    paimon = Warehouse(warehouse)
    source = paimon.create("orders", buckets=2)
    for i in range(3):
        paimon.commit(source, rows(i * 100, 100))
    client.register("out", pa.schema([("id", pa.int64()), ("name", pa.string())]), capacity=64, partitions=2)
    received: list[int] = []
    stop = threading.Event()
    readers = drain_all(server.uri, "out", 2, received, stop)
    ckpt = tmp_path / "ckpt"

    def run() -> None:
        stream = (fp.readStream.format("flight-paimon").option("uri", server.uri).option("table", source)
                  .option("read.stream.maxSnapshotsPerTrigger", "1").load().select("id", "name"))
        query = (stream.writeStream.format("flight-paimon").option("uri", server.uri).option("push", "out")
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert query.awaitTermination(120) and query.exception() is None

    try:
        run()
        wait_for(lambda: len(received) >= 300, "the first run's rows")
        # As if the driver died after the last micro-batch wrote but before Spark logged its
        # commit: the restart runs that micro-batch again. Its rows must not arrive twice.
        commits = sorted((ckpt / "commits").iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
        last = commits[-1]
        assert last.name.isdigit()
        last.unlink()
        (last.parent / f".{last.name}.crc").unlink(missing_ok=True)  # Spark's checksum of that entry
        paimon.commit(source, rows(300, 100))
        run()
        stats = client.stats("out").push["out"].partitions
        assert sum(s.named_producers for s in stats.values()) >= 2
        # Everything both runs wrote is appended (run() waits for the query to end): the replayed
        # micro-batch was taken once, and the readers get exactly what the partitions took.
        assert sum(s.rows_in for s in stats.values()) == 400
        wait_for(lambda: len(received) >= 400, "the restarted run's rows")
    finally:
        stop.set()
        client.drop("out")
        for t in readers:
            t.join(10)
    counts = Counter(received)
    assert sorted(counts) == list(range(400)) and max(counts.values()) == 1, "a row arrived twice or not at all"


def test_batch_read_retried_task_reads_every_row_once_and_a_retried_write_is_refused(server, client):
    client.register("readme", SCHEMA, capacity=64, partitions=2)
    for p in (0, 1):
        pushed(server.uri, "readme", p, p * 1000, 10, 50)
    client.register("writeme", SCHEMA, capacity=64, partitions=2)
    proc = subprocess.run([sys.executable, "-m", "tests.spark_retry_job", server.uri, "readme", "writeme"],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # Each task failed once after handing Spark a batch, and its retry read the partition again;
    # a second action on the same DataFrame reads the same rows (a batch read commits nothing).
    expected = [p * 1000 + i for p in (0, 1) for i in range(500)]
    assert sorted(out["read_ids"]) == sorted(out["read_again_ids"]) == expected
    parts = client.stats("readme").push["readme"].partitions
    assert sorted(parts) == ["0", "1"] and all(s.committed == 0 and s.next_seq == 10 and s.state == "eof" for s in parts.values())
    # A write task's retry is refused before it writes (its first attempt failed the partition).
    assert "ran task" in out["write_error"] and "cannot be taken back" in out["write_error"]
    # Its reader gets an error, never a clean end after the first attempt's rows. (The writer sees
    # the failure as its input stream breaking off: the failing function ran in another worker.)
    info = client.info("writeme", 0)
    with pytest.raises(Exception, match="partition 0 failed: producer 'spark-[0-9a-f]+-0' failed: Spark task failed"):
        list(client.read_endpoint(info.endpoints[0], timeout=30))
