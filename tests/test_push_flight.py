"""Push tables through a real Flight server on a loopback port, producers as real subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire.actions import PartitionStats
from producers import Client, SinkError
from producers.examples.counter import SCHEMA, make_batch
from tests import zygote
from tests.conftest import ROOT, ServerProcess, child_env, wait_for

BIG_ROWS = 65536  # ~2 MiB per counter batch: a few fill gRPC's flow-control window


def start_counter(uri: str, table: str, *args: str) -> subprocess.Popen:
    return zygote.popen(
        [sys.executable, "-m", "producers.examples.counter", table, "--uri", uri, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT,
    )


class LineWatcher:
    """Counts a subprocess's `sent N` lines on a thread, so a test can see progress stall."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.sent, self.lines = proc, 0, []
        self.last_sent_at = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("sent "):
                self.sent += 1
                self.last_sent_at = time.monotonic()

    def wait_sent(self, n: int, timeout: float = 30) -> None:
        wait_for(lambda: self.sent >= n, lambda: f"the producer to send {n} batches (sent {self.sent})", timeout)

    def wait_stalled(self, quiet: float = 1.0, timeout: float = 30) -> int:
        """How many batches the producer had sent once it sent none for `quiet` s: a count that
        only a stopped producer gives (the server's `blocked_writers` says it pushes back, not
        that the producer has filled gRPC's buffers); to know only that it is blocked, use
        `wait_blocked`."""
        wait_for(lambda: self.sent and time.monotonic() - self.last_sent_at >= quiet, "the producer to stall", timeout)
        return self.sent

    def wait_blocked(self, client: Client, name: str, capacity: int, timeout: float = 30) -> None:
        """Until the server holds `capacity` batches of partition 0, an append of the producer's
        waits for room (the server pushes back) and the producer has sent more."""
        def blocked() -> bool:
            stats = partition_stats(client, name)
            return self.sent > capacity and stats.queued_batches == capacity and stats.blocked_writers == 1

        wait_for(blocked, lambda: f"the producer to block on the full partition (sent {self.sent})", timeout)


def drain(client: Client, name: str, partition: int = 0, timeout: float = 60) -> list[pa.RecordBatch]:
    info = client.info(name, partition)
    return list(client.read_endpoint(info.endpoints[0], timeout=timeout))


def drain_until_error(client: Client, name: str, error: type, match: str, timeout: float = 10) -> list[pa.RecordBatch]:
    """Read partition 0 of `name`: the batches that arrive before the stream fails with `match`.

    The error must be the protocol's: its code in extra_info and no server traceback in its text
    (drains are served as C++-pulled RecordBatchStreams, and an error raised inside one would
    reach the client as UNKNOWN with the server's traceback and no extra_info)."""
    got = []
    with pytest.raises(error, match=match) as e:
        for chunk in client.flight.do_get(client.info(name).endpoints[0].ticket, options=client.options(timeout)):
            got.append(chunk.data)
    assert "Traceback" not in str(e.value) and "Python exception" not in str(e.value), str(e.value)
    assert json.loads(e.value.extra_info)["code"] == "failed", e.value.extra_info
    return got


def partition_stats(client: Client, name: str, partition: int = 0) -> PartitionStats:
    return client.stats(name).push[name].partitions[str(partition)]


def all_ids(batches) -> list[int]:
    return [i for b in batches for i in b.column("id").to_pylist()]


def test_full_partition_blocks_producer_then_drains_in_order(client):
    client.register("t", SCHEMA, capacity=4)
    proc = start_counter(client.uri, "t", "--batches", "40", "--rows", str(BIG_ROWS))
    watcher = LineWatcher(proc)
    stalled_at = watcher.wait_stalled()
    assert proc.poll() is None, "the producer must be blocked, not finished"
    s = partition_stats(client, "t")
    assert s.queued_batches == 4 and s.next_seq == 4
    # capacity + gRPC's few MiB (~2 MiB batches) + the sink's slot and in-flight write
    assert stalled_at <= 4 + 6 + 2, f"producer got {stalled_at} batches past the server"
    batches = drain(client, "t")
    assert proc.wait(30) == 0, proc.stderr.read()
    assert all_ids(batches) == list(range(40 * BIG_ROWS))
    assert partition_stats(client, "t").state == "eof"


def test_slow_consumer_sets_the_producers_pace(client):
    client.register("t", SCHEMA, capacity=2)
    proc = start_counter(client.uri, "t", "--batches", "30", "--rows", str(BIG_ROWS))
    watcher = LineWatcher(proc)
    reader = client.flight.do_get(client.info("t").endpoints[0].ticket, options=client.options(60))
    received, producer_done_at = 0, None
    for _chunk in reader:
        received += 1
        if producer_done_at is None and proc.poll() is not None:
            producer_done_at = received
        time.sleep(0.03)
    assert proc.wait(30) == 0
    assert received == 30
    if producer_done_at is None:
        producer_done_at = received  # it ended only after the consumer had read everything
    # The producer finished only when the consumer was within the buffered window of the end.
    assert producer_done_at >= 30 - (2 + 6 + 2), producer_done_at
    assert watcher.sent == 30


def test_fail_action_returns_at_once_and_reader_gets_batches_then_cause(client):
    sink = client.register_streaming_table("t", SCHEMA, capacity=3)
    writer_error = []

    def produce():
        try:
            for i in range(10):
                sink.write(make_batch(i * 1000, 1000))
            sink.close()  # small batches fit in gRPC's buffer: the error may only come here
        except SinkError as e:
            writer_error.append(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_for(lambda: partition_stats(client, "t").queued_batches == 3, "the producer to fill the partition")
    Client(client.uri, timeout=3).fail("t", "upstream shard 7 crashed")  # full, no reader: returns at once
    t.join(10)
    assert writer_error and "upstream shard 7 crashed" in str(writer_error[0])
    got = drain_until_error(client, "t", flight.FlightServerError, "upstream shard 7 crashed")
    assert all_ids(got) == list(range(3000))


def test_in_band_failure_reaches_reader_after_earlier_batches(client):
    client.register("t", SCHEMA, capacity=8)
    writer, acks = client.flight.do_put(flight.FlightDescriptor.for_path("push", "t", "0"), SCHEMA,
                                        options=client.options(10))
    for i in range(3):
        writer.write_batch(make_batch(i * 10, 10))
    writer.write_metadata(b'{"error": "sensor 12 returned garbage"}')
    writer.done_writing()
    writer.close()
    got = drain_until_error(client, "t", flight.FlightServerError, "sensor 12 returned garbage")
    assert all_ids(got) == list(range(30))


def test_exception_inside_with_sink_fails_the_reader(client):
    client.register("t", SCHEMA, capacity=8)
    proc = start_counter(client.uri, "t", "--batches", "10", "--raise-after", "4")
    assert proc.wait(30) != 0
    got = drain_until_error(client, "t", flight.FlightServerError, "counter producer gave up after 4 batches")
    assert all_ids(got) == list(range(4 * 5))


@pytest.mark.parametrize("blocked", [False, True], ids=["streaming", "blocked-on-full"])
def test_killed_producer_fails_reader(client, blocked):
    client.register("t", SCHEMA, capacity=2 if blocked else 64)
    args = ["--batches", "1000"] + (["--rows", str(BIG_ROWS)] if blocked else ["--rate", "50"])
    proc = start_counter(client.uri, "t", *args)
    watcher = LineWatcher(proc)
    watcher.wait_blocked(client, "t", 2) if blocked else watcher.wait_sent(5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    drain_until_error(client, "t", flight.FlightError, "broke", timeout=20)
    assert partition_stats(client, "t").state == "failed"


def test_producer_call_timeout_fails_reader(client):
    client.register("t", SCHEMA, capacity=64)
    proc = start_counter(client.uri, "t", "--batches", "1000", "--rate", "20", "--timeout", "1")
    assert proc.wait(30) != 0
    drain_until_error(client, "t", flight.FlightError, "broke", timeout=20)


def _read_ids(client, ticket) -> list[int]:
    return all_ids(client.flight.do_get(ticket, options=client.options(10)).read_all().to_batches())


def test_ranges_replay_until_committed_and_then_a_drain_is_refused(client):
    with client.register_streaming_table("t", SCHEMA, capacity=16) as sink:
        for i in range(6):
            sink.write(make_batch(i, 1))
    ticket_range = client.replay_info("t", 0, 1, 4).endpoints[0].ticket
    assert _read_ids(client, ticket_range) == [1, 2, 3]
    assert _read_ids(client, ticket_range) == [1, 2, 3]
    client.commit("t", {0: 2})
    with pytest.raises(flight.FlightServerError, match="already committed"):
        _read_ids(client, ticket_range)
    with pytest.raises(pa.ArrowInvalid, match="readers were sent batches up to 4"):
        client.commit("t", {0: 5})  # never past what a reader was sent
    with pytest.raises(flight.FlightServerError, match="is read by replay tickets"):
        _read_ids(client, client.info("t").endpoints[0].ticket)
    assert partition_stats(client, "t").reader == "replay"


def test_second_drain_is_already_consumed_and_a_drained_partition_refuses_commit_and_replay(client):
    with client.register_streaming_table("t", SCHEMA, capacity=16) as sink:
        for i in range(6):
            sink.write(make_batch(i, 1))
    drain_ticket = client.info("t").endpoints[0].ticket
    assert _read_ids(client, drain_ticket) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(flight.FlightServerError, match="already consumed"):
        _read_ids(client, drain_ticket)
    assert partition_stats(client, "t").reader == "drain"
    with pytest.raises(flight.FlightServerError, match="single-scan reader is draining it"):
        client.commit("t", {0: 7})
    with pytest.raises(flight.FlightServerError, match="being drained by a single-scan reader"):
        _read_ids(client, client.replay_info("t", 0, 0, 6).endpoints[0].ticket)


def test_consumer_cancel_fails_blocked_producer_promptly(client):
    sink = client.register_streaming_table("t", SCHEMA, capacity=2)
    failed_at = []

    def produce():
        try:
            for i in range(1000):
                sink.write(make_batch(i, BIG_ROWS))
        except SinkError as e:
            failed_at.append((time.monotonic(), str(e)))

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    reader = client.flight.do_get(client.info("t").endpoints[0].ticket, options=client.options(30))
    reader.read_chunk()
    wait_for(lambda: partition_stats(client, "t").queued_batches == 2, "the producer to fill the partition again")
    assert not failed_at
    cancelled_at = time.monotonic()
    reader.cancel()
    t.join(60)
    assert failed_at, "the blocked producer's write never failed"
    assert "consumer cancelled" in failed_at[0][1]
    # Within the server's poll (0.5 s) and a hand-off: well under a second idle; the bound holds at
    # ten times that (the point is that it is not the call's 30 s deadline).
    assert failed_at[0][0] - cancelled_at < 10


@pytest.mark.parametrize("schema, words", [
    (pa.schema([("ident", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us"))]), "named 'ident'"),
    (pa.schema([("id", pa.int32()), ("name", pa.string()), ("ts", pa.timestamp("us"))]), "type int32"),
    (pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("ts", pa.timestamp("us"))]), "not null"),
])
def test_mismatched_schema_is_refused_before_anything_is_appended(client, schema, words):
    client.register("t", SCHEMA)
    writer, _ = client.flight.do_put(flight.FlightDescriptor.for_path("push", "t", "0"), schema,
                                     options=client.options(10))
    with pytest.raises(pa.ArrowInvalid, match=words):
        writer.write_batch(pa.record_batch([pa.array([1], schema[0].type), pa.array(["a"]),
                                            pa.array([1], pa.timestamp("us"))], schema=schema))
        writer.close()
    s = partition_stats(client, "t")
    assert (s.next_seq, s.state) == (0, "open")
    with client.sink("t") as sink:  # the partition still takes a matching producer
        sink.write(make_batch(0, 3))
    assert all_ids(drain(client, "t")) == [0, 1, 2]


def test_zero_column_schema_is_refused_at_register(client):
    with pytest.raises(pa.ArrowInvalid, match="at least one column"):
        client.register("t", pa.schema([]))


def test_drop_wakes_blocked_writer_and_waiting_reader(client):
    sink = client.register_streaming_table("t", SCHEMA, capacity=1)
    client.register("idle", SCHEMA)
    errors = {}

    def produce():
        try:
            for i in range(1000):
                sink.write(make_batch(i, BIG_ROWS))
        except SinkError as e:
            errors["writer"] = str(e)

    def consume():
        try:
            for _ in client.flight.do_get(client.info("idle").endpoints[0].ticket, options=client.options(30)):
                pass
        except flight.FlightError as e:
            errors["reader"] = str(e)

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume)]
    for t in threads:
        t.start()
    wait_for(lambda: partition_stats(client, "t").queued_batches == 1, "the writer to block on the full partition")
    wait_for(lambda: partition_stats(client, "idle").reader == "drain", "the reader to wait on the empty one")
    client.drop("t")
    client.drop("idle")
    for t in threads:
        t.join(5)
    assert "dropped" in errors.get("writer", "") and "dropped" in errors.get("reader", "")
    with pytest.raises(KeyError, match="not registered"):
        client.stats("t")


def test_shutdown_ends_open_streams_with_an_error(warehouse):
    proc = ServerProcess(warehouse)
    try:
        client = Client(proc.uri, timeout=10)
        client.register("t", SCHEMA, capacity=1)
        producer = start_counter(proc.uri, "t", "--batches", "1000", "--rows", str(BIG_ROWS))
        LineWatcher(producer).wait_blocked(client, "t", 1)
        client.register("idle", SCHEMA)
        reader_error = []

        def consume():
            try:
                for _ in client.flight.do_get(client.info("idle").endpoints[0].ticket, options=client.options(30)):
                    pass
            except flight.FlightError as e:
                reader_error.append(str(e))

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        wait_for(lambda: partition_stats(client, "idle").reader == "drain", "the reader to wait")
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.proc.wait(15) == 0
        t.join(10)
        assert reader_error and "shutting down" in reader_error[0]
        assert producer.wait(15) != 0
    finally:
        proc.stop()


def test_n_partitions_drain_through_n_concurrent_consumers(client):
    n = 4
    client.register("t", SCHEMA, capacity=2, partitions=n)
    producers = [start_counter(client.uri, "t", "--partition", str(p), "--batches", "20", "--rows", "1000")
                 for p in range(n)]
    results = {}

    def consume(p):
        results[p] = drain(client, "t", p)

    threads = [threading.Thread(target=consume, args=(p,), daemon=True) for p in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [p.wait(30) for p in producers] == [0] * n
    for p in range(n):
        assert all_ids(results[p]) == list(range(20 * 1000))


def test_partition_with_k_writers_ends_after_k_clean_streams(client):
    client.register("t", SCHEMA, capacity=64, writers=3)
    for w in range(3):
        with client.sink("t") as sink:
            sink.write(make_batch(w * 10, 10))
        assert partition_stats(client, "t").state == ("eof" if w == 2 else "open")
    assert sorted(all_ids(drain(client, "t"))) == list(range(30))


def test_a_named_producers_error_after_the_partitions_clean_end_is_refused_and_the_end_stays(client):
    """A df.write's task killed after the job before it ended the table sends only its error (it
    never wrote a batch): the partition keeps its clean end and the task is told it is closed."""
    client.register("t", SCHEMA, capacity=8)
    with client.sink("t") as sink:
        sink.write(make_batch(0, 10))
    assert partition_stats(client, "t").state == "eof"
    command = {"push": "t", "partition": 0, "producer": "spark-late-1"}
    writer, acks = client.flight.do_put(flight.FlightDescriptor.for_command(json.dumps(command)), SCHEMA,
                                        options=client.options(10))
    with pytest.raises(flight.FlightError, match="is closed"):
        try:
            writer.write_metadata(b'{"error": "Spark task failed: TaskKilled"}')
            writer.done_writing()
            while acks.read() is not None:
                pass
        finally:
            writer.close()
    assert partition_stats(client, "t").state == "eof"
    assert all_ids(drain(client, "t")) == list(range(10))


def test_producer_may_connect_after_the_consumer(client):
    client.register("t", SCHEMA)
    result = []
    t = threading.Thread(target=lambda: result.append(drain(client, "t")), daemon=True)
    t.start()
    wait_for(lambda: partition_stats(client, "t").reader == "drain", "the consumer to attach first")
    with client.sink("t") as sink:
        sink.write(make_batch(0, 5))
    t.join(10)
    assert all_ids(result[0]) == list(range(5))


def test_try_write_returns_false_when_full_and_leaves_batch_unsent(client):
    sink = client.register_streaming_table("t", SCHEMA, capacity=1)
    accepted = 0
    while sink.try_write(make_batch(accepted * BIG_ROWS, BIG_ROWS), timeout=0.5):
        accepted += 1
        assert accepted < 50, "try_write never reported a full partition"
    got = []
    reader = threading.Thread(target=lambda: got.extend(drain(client, "t")), daemon=True)
    reader.start()
    sink.close()
    reader.join(30)
    assert all_ids(got) == list(range(accepted * BIG_ROWS))


def test_a_ticket_older_than_the_servers_ticket_lifetime_is_refused_and_a_new_plan_reads(client, server):
    client.register("old", SCHEMA)
    with client.sink("old") as sink:
        sink.write(make_batch(0, 4))
    planned = client.info("old").endpoints[0].ticket
    codec = server.server.tickets
    real = codec.clock
    codec.clock = lambda: real() + codec.lifetime_ms / 1000 + 60  # a minute past its lifetime
    with pytest.raises(pa.ArrowInvalid, match=r"The ticket expired: it was planned 1 d ago .* --ticket-lifetime"):
        client.flight.do_get(planned, options=client.options()).read_all()
    assert client.flight.do_get(client.info("old").endpoints[0].ticket, options=client.options()).read_all() \
        .num_rows == 4  # planned again (the expired ticket consumed nothing)
