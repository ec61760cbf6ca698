"""Limits: --max-memory (push tables bounded in bytes), --max-streams, and the bound on tables."""

from __future__ import annotations

import threading

import psutil
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.limits import MiB, StreamSlots, TableBudget
from flight_server.wire.errors import LimitExceeded, PartitionFailed, from_flight
from producers import Client
from producers.sink import SinkError
from tests.conftest import RunningServer, wait_for
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(120)

SCHEMA = pa.schema([("v", pa.int64())])


def batch_of(mib: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(mib * MiB // 8), pa.int64())], schema=SCHEMA)


def partition(client: Client, name: str) -> dict:
    return client.stats(name).push[name].partitions["0"]


def refusal(fn) -> LimitExceeded:
    with pytest.raises(flight.FlightError) as e:
        fn()
    got = from_flight(e.value)
    assert isinstance(got, LimitExceeded), got
    return got


def test_max_memory_holds_pushed_bytes_under_the_bound_and_refuses_what_cannot_fit(tmp_path):
    with ServerProcess(str(tmp_path / "w"), "--max-memory", "64MiB") as server:
        client = Client(server.uri, timeout=30)
        rss = psutil.Process(server.proc.pid)
        client.register("big", SCHEMA, capacity=1000)  # the bytes bound it, not the batch count
        assert client.stats("big").push["big"].capacity_bytes == 64 * MiB
        baseline = rss.memory_info().rss
        errors: list[BaseException] = []
        batch = batch_of(17)

        def produce() -> None:
            try:
                with client.sink("big", call_timeout=60) as sink:
                    for _ in range(20):
                        sink.write(batch)
            except BaseException as e:  # noqa: BLE001 - asserted below: the drop ends it
                errors.append(e)

        producer = threading.Thread(target=produce, name="big-producer", daemon=True)
        producer.start()
        # The fourth batch is read and waits for room: it would pass 64 MiB.
        wait_for(lambda: partition(client, "big").blocked_writers == 1, "the fourth 17 MiB batch to wait", 30)
        stats = partition(client, "big")
        peak = rss.memory_info().rss - baseline
        assert stats.queued_batches == 3 and stats.queued_bytes <= 64 * MiB, stats
        assert producer.is_alive()
        # What the server process grew by (340 MiB were pushed): the 51 MiB held, the fourth batch
        # the server has read and holds until there is room (it cannot know a batch's size before
        # reading it), gRPC's read-ahead of the fifth, and allocator slack.
        print(f"server RSS grew {peak / MiB:.0f} MiB while holding 3 x 17 MiB")
        assert peak < 64 * MiB + 2 * 17 * MiB + 16 * MiB, f"server RSS grew {peak / MiB:.0f} MiB"

        got = refusal(lambda: client.register("more", SCHEMA))
        assert "--max-memory 64 MiB" in got.message and "capacity_bytes" in got.message
        client.drop("big")  # wakes the blocked producer with an error
        producer.join(30)
        assert not producer.is_alive() and len(errors) == 1

        # A batch larger than a partition's bytes is refused at once, and its reader learns why.
        client.register("small", SCHEMA, capacity_bytes=8 * MiB)
        with pytest.raises(SinkError) as e:
            with client.sink("small", call_timeout=30) as sink:
                sink.write(batch)
        assert "larger than push table 'small' partition 0's capacity_bytes (8 MiB)" in str(e.value)
        ticket = client.info("small").endpoints[0].ticket
        with pytest.raises(flight.FlightError) as e:
            client.flight.do_get(ticket, options=client.options(10)).read_all()
        assert isinstance(from_flight(e.value), PartitionFailed) and "capacity_bytes" in str(e.value)
        assert client.action("health")["status"] == "serving"


def test_ten_thousand_registers_hit_the_table_limit_and_the_server_keeps_serving():
    running = RunningServer(None, budget=TableBudget(max_tables=1000))
    try:
        client = Client(running.uri, timeout=10)
        refused = []
        for i in range(10_000):
            try:
                client.register(f"t{i}", SCHEMA, capacity=1)
            except flight.FlightError as e:
                refused.append(from_flight(e))
        assert len(refused) == 9_000 and all(isinstance(r, LimitExceeded) for r in refused)
        assert "holds 1000 push tables, its limit (--max-tables 1000)" in refused[0].message
        assert client.action("health")["push_tables"] == 1000
        client.drop("t0")
        with client.register_streaming_table("again", SCHEMA) as sink:
            sink.write(pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=SCHEMA))
        ticket = client.info("again").endpoints[0].ticket
        assert client.flight.do_get(ticket, options=client.options(10)).read_all().num_rows == 3
        client.close()
    finally:
        running.stop()


def test_partitions_are_bounded_across_tables():
    running = RunningServer(None, budget=TableBudget(max_partitions=10))
    try:
        client = Client(running.uri, timeout=10)
        client.register("a", SCHEMA, partitions=8)
        got = refusal(lambda: client.register("b", SCHEMA, partitions=4))
        assert "--max-partitions" in got.message and "8 of at most 10" in got.message
        client.register("b", SCHEMA, partitions=2)
        client.close()
    finally:
        running.stop()


def test_streams_past_max_streams_are_refused_until_one_ends():
    running = RunningServer(None, streams=StreamSlots(2))
    try:
        client = Client(running.uri, timeout=10)
        client.register("waiting", SCHEMA, partitions=3)
        info = client.info("waiting")
        failures: list[BaseException] = []

        def read(endpoint) -> None:
            try:
                client.flight.do_get(endpoint.ticket, options=client.options(30)).read_all()
            except BaseException as e:  # noqa: BLE001 - asserted below: the fail ends them
                failures.append(e)

        readers = [threading.Thread(target=read, args=(e,), daemon=True) for e in info.endpoints[:2]]
        for r in readers:
            r.start()
        wait_for(lambda: running.server.streams.open == 2, "two readers waiting")
        with pytest.raises(flight.FlightError) as e:
            client.flight.do_get(info.endpoints[2].ticket, options=client.options(10)).read_all()
        got = from_flight(e.value)
        assert isinstance(got, LimitExceeded) and "--max-streams 2" in got.message, got
        client.fail("waiting", "the test is done with it", partition=0)
        readers[0].join(10)
        wait_for(lambda: running.server.streams.open == 1, "the failed reader's slot freed")
        with client.sink("waiting", partition=2) as sink:  # a producer stream fits again
            sink.write(pa.record_batch([pa.array([7], pa.int64())], schema=SCHEMA))
        client.fail("waiting", "the test is done with it")
        readers[1].join(10)
        assert len(failures) == 2
        client.close()
    finally:
        running.stop()


def test_a_producer_that_fills_its_partition_in_bytes_closes_before_any_reader_comes(client):
    """The end marker is read even when the partition is full: closing never waits for a reader."""
    client.register("filled", SCHEMA, capacity=100, capacity_bytes=2 * MiB)
    with client.sink("filled", call_timeout=20) as sink:
        sink.write(batch_of(1))
        sink.write(batch_of(1))  # 2 MiB: full in bytes
    stats = partition(client, "filled")
    assert stats.state == "eof" and stats.queued_batches == 2, stats
    ticket = client.info("filled").endpoints[0].ticket
    assert client.flight.do_get(ticket, options=client.options(10)).read_all().num_rows == 2 * MiB // 8
