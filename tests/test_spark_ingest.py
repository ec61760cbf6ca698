"""Spark and durable writes: df.write / df.writeStream into Paimon tables through a real server,
and a readStream that sees pushed rows once across a restart."""

from __future__ import annotations

import collections
import shutil
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from producers.examples.events import SCHEMA, batch
from tests.conftest import wait_for


def table_rows(client, table: str) -> pa.Table:
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), options=client.options())
    return pa.concat_tables([client.flight.do_get(e.ticket).read_all() for e in info.endpoints])


def held(client, table: str) -> collections.Counter:
    t = table_rows(client, table)
    return collections.Counter(zip(t.column("producer").to_pylist(), t.column("id").to_pylist()))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("keys", [[], ["id"]])
def test_df_write_appends_exactly_the_rows_into_append_and_primary_key_tables(fp, server, client, keys):
    client.create_table("db.events", SCHEMA, primary_keys=keys, options={"bucket": "2"} if keys else None)
    df = fp.createDataFrame([(f"s{i % 3}", i // 10, i) for i in range(1000)], "producer string, seq long, id long")
    df.repartition(3).write.format("flight-paimon").option("uri", server.uri).option("table", "db.events") \
        .mode("append").save()
    assert held(client, "db.events") == collections.Counter((f"s{i % 3}", i) for i in range(1000))
    with pytest.raises(Exception, match="append-only: write with .mode\\('append'\\)"):
        df.write.format("flight-paimon").option("uri", server.uri).option("table", "db.events").mode("overwrite").save()
    without_id = df.drop("id").write.format("flight-paimon").option("uri", server.uri).option("table", "db.events")
    if keys:  # a primary key is NOT NULL: the DataFrame must have it
        with pytest.raises(Exception, match="lacks NOT NULL column\\(s\\) id"):
            without_id.mode("append").save()
    else:  # columns match by name; a nullable one the DataFrame lacks is written null
        without_id.mode("append").save()
        assert held(client, "db.events")[("s0", None)] == 334


@pytest.mark.timeout(240)
def test_df_write_with_merge_schema_adds_the_dataframes_new_column(fp, server, client):
    client.create_table("db.events", SCHEMA)
    df = fp.createDataFrame([(f"s{i % 3}", i, i, f"e{i}") for i in range(100)],
                            "producer string, seq long, id long, email string")
    write = df.write.format("flight-paimon").option("uri", server.uri).option("table", "db.events")
    with pytest.raises(Exception, match="has column\\(s\\) email that"):
        write.mode("append").save()
    write.option("mergeSchema", "true").mode("append").save()
    t = table_rows(client, "db.events")
    assert t.schema.names == ["producer", "seq", "id", "email"]
    assert sorted(zip(t.column("id").to_pylist(), t.column("email").to_pylist())) == [(i, f"e{i}") for i in range(100)]


@pytest.mark.timeout(300)
def test_a_read_stream_sees_every_pushed_row_once_across_a_query_restart(fp, server, client, tmp_path):
    client.create_table("db.events", SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    epochs: dict[int, list[int]] = {}  # an idempotent sink: a re-run epoch replaces its own rows
    stop = threading.Event()
    pushed = []

    def produce():
        with client.paimon_sink("db.events", producer="live") as sink:
            seq = 0
            while not stop.is_set() or seq < 40:
                sink.write(batch("live", seq, 50))
                pushed.append(seq)
                seq += 1
                stop.wait(0.02)

    def start():
        return (fp.readStream.format("flight-paimon").option("uri", server.uri).option("table", "db.events")
                .option("scan.mode", "earliest").load()
                .writeStream.foreachBatch(lambda df, epoch: epochs.__setitem__(epoch, [r.id for r in df.collect()]))
                .option("checkpointLocation", checkpoint).trigger(processingTime="300 milliseconds").start())

    def written() -> int:
        return sum(len(ids) for ids in list(epochs.values()))

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    query = start()
    wait_for(lambda: written() >= 500 or query.exception() is not None, "the first query's rows", timeout=120)
    query.stop()
    query = start()  # restarted from the checkpoint while the producer keeps pushing
    stop.set()
    producer.join(60)
    expected = len(pushed) * 50
    wait_for(lambda: written() >= expected or query.exception() is not None, "every pushed row", timeout=120)
    query.processAllAvailable()
    query.stop()
    counts = collections.Counter(i for ids in epochs.values() for i in ids)
    assert len(counts) == expected and set(counts.values()) == {1}, \
        f"{sum(1 for c in counts.values() if c > 1)} rows twice, {expected - len(counts)} missing"


@pytest.mark.timeout(300)
def test_write_stream_is_exactly_once_when_a_micro_batch_is_replayed_after_a_restart(fp, server, client, tmp_path):
    client.create_table("db.events", SCHEMA)
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()

    def add_file(n: int) -> None:
        pq.write_table(pa.Table.from_batches([batch(f"f{n}", n, 100)]), source / f"part-{n}.parquet")

    def start():
        return (fp.readStream.schema("producer string, seq long, id long").option("maxFilesPerTrigger", 1)
                .parquet(str(source))
                .writeStream.format("flight-paimon").option("uri", server.uri).option("table", "db.events")
                .option("checkpointLocation", str(checkpoint)).start())

    for n in range(3):
        add_file(n)
    query = start()
    wait_for(lambda: len(held(client, "db.events")) >= 300 or query.exception() is not None, "3 files", timeout=120)
    query.processAllAvailable()
    query.stop()
    # Spark forgets that the last micro-batch committed: on restart it runs that batch again.
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    shutil.rmtree(checkpoint / "commits" / f".{last.name}.crc", ignore_errors=True)
    (checkpoint / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    add_file(3)
    query = start()
    wait_for(lambda: len(held(client, "db.events")) >= 400 or query.exception() is not None, "the 4th file", timeout=120)
    query.processAllAvailable()
    query.stop()
    counts = held(client, "db.events")
    assert counts == collections.Counter((f"f{n}", n * 1_000_000 + i) for n in range(4) for i in range(100))


@pytest.mark.timeout(240)
def test_writes_and_reads_are_strict_about_columns_and_types(fp, server, client):
    """A column the table lacks is refused by name unless write.drop-extra-columns; a user's read
    schema with another type, or a column the table lacks, is refused, not cast."""
    client.create_table("db.strict", SCHEMA)
    df = fp.createDataFrame([("s", 1, 7, "x")], "producer string, seq long, id long, note string")
    writer = df.write.format("flight-paimon").option("uri", server.uri).option("table", "db.strict").mode("append")
    with pytest.raises(Exception, match="has column\\(s\\) note that Paimon table 'db.strict' does not have"):
        writer.save()
    writer.option("write.drop-extra-columns", "true").save()
    assert held(client, "db.strict") == collections.Counter([("s", 7)])
    reader = fp.read.format("flight-paimon").option("uri", server.uri).option("table", "db.strict")
    with pytest.raises(Exception, match="gives column 'id' type int, but Paimon table 'db.strict' has bigint"):
        reader.schema("producer string, seq long, id int").load().collect()
    with pytest.raises(Exception, match="names column 'nope', which Paimon table 'db.strict' does not have"):
        reader.schema("producer string, nope long").load().collect()
    assert [tuple(r) for r in reader.schema("id long, producer string").load().collect()] == [(7, "s")]
    # Spark's default save mode (ErrorIfExists) is refused by Spark itself, naming Append.
    with pytest.raises(Exception, match='cannot be written in the "ErrorIfExists" mode. Please use either the "Append"'):
        df.drop("note").write.format("flight-paimon").option("uri", server.uri).option("table", "db.strict").save()
