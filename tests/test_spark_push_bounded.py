"""spark.read of a push table is bounded, as Spark's Kafka batch source is: startingOffsets to
endingOffsets (default latest, where each partition stands when its task reads), never waiting
for a producer; endingOffsets 'eof' waits for every producer's end (the read before issue 48)."""

from __future__ import annotations

import threading
import time

import pytest

from spark_reader.options import OptionError, parse
from tests.conftest import wait_for
from tests.test_spark_push import SCHEMA, batch
from tests.test_spark_push_streams import push_stream


def read_push(spark, uri: str, name: str, **options):
    reader = spark.read.format("flight-paimon").option("uri", uri).option("push", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


def appended(client, name: str, p: int, n: int) -> None:
    wait_for(lambda: client.offsets(name)[str(p)].next_seq >= n, f"{n} batches in {name} partition {p}")


def push_ended(client, name: str, p: int, batches: list) -> None:
    with client.sink(name, p) as sink:
        for b in batches:
            sink.write(b)


@pytest.mark.timeout(240)
def test_a_read_returns_what_each_partition_holds_while_a_producer_keeps_its_stream_open(fp, server, client):
    # Partition 0's producer holds its stream open through every read below (a read that waited
    # for its end would never return: the test's timeout); partition 1 never has a producer.
    client.register("open", SCHEMA, capacity=16, partitions=2)
    client.register("nobody", SCHEMA, capacity=16)
    with client.sink("open", 0) as sink:
        for i in range(3):
            sink.write(batch(i * 10, 10))
        appended(client, "open", 0, 3)
        df = read_push(fp, server.uri, "open")
        assert df.rdd.getNumPartitions() == 2
        assert ids(df) == list(range(30))
        for i in range(3, 5):
            sink.write(batch(i * 10, 10))
        appended(client, "open", 0, 5)
        assert ids(df) == list(range(50))  # each action reads the partitions as they stand then
        assert read_push(fp, server.uri, "nobody").count() == 0
        offsets = client.offsets("open")
        assert (offsets["0"].committed, offsets["0"].next_seq, offsets["0"].state) == (0, 5, "open")
        assert (offsets["1"].committed, offsets["1"].next_seq) == (0, 0)  # a batch read commits nothing


@pytest.mark.timeout(240)
def test_starting_and_ending_offsets_bound_each_partition(fp, server, client):
    client.register("ranged", SCHEMA, capacity=16, partitions=2)
    push_ended(client, "ranged", 0, [batch(i * 10, 10) for i in range(5)])  # ids 0..49, batches 0..4
    push_ended(client, "ranged", 1, [batch(1000 + i * 10, 10) for i in range(4)])  # ids 1000..1039
    got = ids(read_push(fp, server.uri, "ranged", startingOffsets='{"0": 1}', endingOffsets='{"0": 3, "1": -1}'))
    assert got == list(range(10, 30)) + list(range(1000, 1040))
    got = ids(read_push(fp, server.uri, "ranged", startingOffsets='{"1": 2}', endingOffsets='{"0": 1}'))
    assert got == list(range(10)) + list(range(1020, 1040))
    with pytest.raises(Exception, match="'endingOffsets' reads partition 0 .* up to batch 9, but it has 5 batch"):
        read_push(fp, server.uri, "ranged", endingOffsets='{"0": 9}').collect()
    with pytest.raises(Exception, match="'endingOffsets' ends partition 0 .* at batch 1, before its start 3"):
        read_push(fp, server.uri, "ranged", startingOffsets='{"0": 3}', endingOffsets='{"0": 1}').collect()
    with pytest.raises(Exception, match="'startingOffsets' names partition\\(s\\) 7 that push table 'ranged' does not"):
        read_push(fp, server.uri, "ranged", startingOffsets='{"7": 0}').collect()
    with pytest.raises(Exception, match="'startingOffsets' 'latest' \\(or -1\\) is for streams"):
        read_push(fp, server.uri, "ranged", startingOffsets="latest").collect()


@pytest.mark.timeout(240)
def test_ending_offsets_eof_waits_until_the_producers_end(fp, server, client):
    client.register("awaited", SCHEMA, capacity=16)
    result: dict = {}
    with client.sink("awaited", 0) as sink:
        for i in range(2):
            sink.write(batch(i * 10, 10))
        appended(client, "awaited", 0, 2)
        df = read_push(fp, server.uri, "awaited", endingOffsets="eof")

        def read():
            try:
                result["ids"] = ids(df)
            except Exception as e:  # noqa: BLE001 - reported to the test, which asserts on it
                result["error"] = e

        reader = threading.Thread(target=read, name="eof-read", daemon=True)
        reader.start()
        # The read has been sent the first batches: it is past planning, and waits for the end.
        wait_for(lambda: client.stats("awaited").push["awaited"].partitions["0"].rows_out >= 20, "the read's rows")
        assert reader.is_alive() and not result
        for i in range(2, 4):
            sink.write(batch(i * 10, 10))
    reader.join(120)
    assert not reader.is_alive() and "error" not in result, result
    assert result["ids"] == list(range(40))  # the batches appended after the read began, up to the end


@pytest.mark.timeout(240)
def test_a_partition_that_failed_fails_the_read_with_its_cause(fp, server, client):
    client.register("broken", SCHEMA, capacity=16)
    client.fail("broken", "sensor 7 unplugged")
    with pytest.raises(Exception, match="sensor 7 unplugged"):
        read_push(fp, server.uri, "broken").collect()


@pytest.mark.timeout(240)
def test_a_stream_refuses_ending_offsets_and_a_misspelt_option_is_named(fp, server, client):
    client.register("streamed", SCHEMA, capacity=16)
    stream = fp.readStream.format("flight-paimon").option("uri", server.uri).option("push", "streamed")
    query = stream.option("endingOffsets", "latest").load().writeStream.format("noop") \
        .trigger(availableNow=True).start()
    try:
        with pytest.raises(Exception, match="'endingOffsets' is for batch reads"):
            query.awaitTermination(120)
    finally:
        query.stop()
    with pytest.raises(Exception, match="endingoffset \\(did you mean endingOffsets\\?\\)"):
        read_push(fp, server.uri, "streamed", endingOffset="latest")


@pytest.mark.parametrize("options, message", [
    ({"endingOffsets": "earliest"}, "'endingOffsets' must be 'latest' \\(the default\\) or 'eof' \\(wait until"),
    ({"endingOffsets": '{"0": -2}'}, "'endingOffsets' must be .*\\(-1 the latest\\); got '\\{\"0\": -2\\}'"),
    ({"startingOffsets": '{"0": "three"}'}, "'startingOffsets' must be 'earliest' \\(the default\\) or 'latest'"),
    ({"startingOffsets": "[1, 2]"}, "'startingOffsets' must be .*-2 the earliest held, -1 the latest"),
    ({"startingOffset": "earliest"}, "startingoffset \\(did you mean startingOffsets\\?\\); known options: .*"
                                     "endingOffsets, endingTimestamp, failOnDataLoss"),
    ({"table": "db.t", "push": None, "endingOffsets": "latest"}, "endingOffsets apply to push tables"),
])
def test_bad_offsets_options_are_refused_naming_the_option_and_what_it_takes(options, message):
    given = {"uri": "grpc://127.0.0.1:8815", "push": "p", **options}
    with pytest.raises(OptionError, match=message):
        parse({k: v for k, v in given.items() if v is not None})


def test_offsets_options_parse_as_kafka_spells_them():
    opts = parse({"uri": "grpc://127.0.0.1:8815", "push": "p", "STARTINGOFFSETS": '{"0": -2, "1": 4}',
                  "endingOffsets": '{"1": -1, "0": 7}'})
    assert (opts.starting_offsets, opts.ending_offsets) == ({"0": -2, "1": 4}, {"1": -1, "0": 7})
    assert parse({"uri": "grpc://127.0.0.1:8815", "push": "p", "endingOffsets": "EOF"}).ending_offsets == "eof"
    assert parse({"uri": "grpc://127.0.0.1:8815", "push": "p"}).ending_offsets is None  # latest, and a stream's


def pushed_around_a_mark(client, name: str) -> int:
    """Batches 0, 1 (ids 0..19) appended before the returned epoch ms, batches 2, 3 (ids 20..39) at or after it."""
    client.register(name, SCHEMA, capacity=16)
    with client.sink(name, 0) as sink:
        for i in range(2):
            sink.write(batch(i * 10, 10))
        appended(client, name, 0, 2)
        mark = int(time.time() * 1000) + 1
        wait_for(lambda: time.time() * 1000 >= mark, "the clock to pass the mark")
        for i in range(2, 4):
            sink.write(batch(i * 10, 10))
    return mark


def test_offsets_finds_the_first_batch_appended_at_or_after_a_time(server, client):
    mark = pushed_around_a_mark(client, "timed")
    assert client.offsets("timed", mark)["0"].at_timestamp == 2
    assert client.offsets("timed", 0)["0"].at_timestamp == 0
    assert client.offsets("timed", mark + 3_600_000)["0"].at_timestamp == 4  # none yet: next_seq
    assert client.offsets("timed")["0"].at_timestamp is None
    with pytest.raises(Exception, match="'timestamp_ms' must be epoch milliseconds"):
        client.action("offsets", {"name": "timed", "timestamp_ms": "noon"})


@pytest.mark.timeout(240)
def test_starting_and_ending_timestamps_bound_a_read_by_when_batches_were_appended(fp, server, client, tmp_path):
    mark = pushed_around_a_mark(client, "by_time")
    assert ids(read_push(fp, server.uri, "by_time", startingTimestamp=str(mark))) == list(range(20, 40))
    assert ids(read_push(fp, server.uri, "by_time", endingTimestamp=str(mark))) == list(range(20))
    # A stream's new checkpoint starts there too (and frees the batches before it, as startingOffsets does).
    got = push_stream(fp, server.uri, "by_time", str(tmp_path / "ckpt"), startingTimestamp=str(mark))
    assert sorted(i for b in got for i in b) == list(range(20, 40))
    assert client.offsets("by_time")["0"].committed >= 2  # batches 0, 1: freed unread
    with pytest.raises(OptionError, match="'startingOffsets' and 'startingTimestamp' conflict"):
        parse({"uri": server.uri, "push": "by_time", "startingOffsets": "earliest", "startingTimestamp": "0"})
    with pytest.raises(OptionError, match="'startingTimestamp' .* is after 'endingTimestamp'"):
        parse({"uri": server.uri, "push": "by_time", "startingTimestamp": "5", "endingTimestamp": "4"})
