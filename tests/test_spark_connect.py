"""flight-paimon through Spark Connect (pyspark.sql.connect): the same rows as classic Spark.

The Connect server is started as the README says users start it: scripts/connect-server, which
runs pyspark's own sbin/start-connect-server.sh with this .venv's Python for its workers, in its
own JVM on a free loopback port. The client is a real Connect session talking gRPC to it; the
data source is registered through Connect and its reads and `foreachBatch` functions run in the
server's Python workers, as on any deployment.
"""

from __future__ import annotations

import json
import os

import pytest

from scripts.local_connect import connect_server
from spark_reader import FlightPaimonDataSource, register
from tests.paimon_tables import Warehouse, rows
from tests.test_spark_push import SCHEMA, batch


@pytest.fixture(scope="module")
def connect():
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with connect_server() as url:
        session = ConnectSession.builder.remote(url).create()
        session.dataSource.register(FlightPaimonDataSource)
        yield session
        session.stop()


def rows_of(df) -> list[tuple]:
    return sorted((r.id, r.name) for r in df.select("id", "name").collect())


def stream_rows(session, uri: str, table: str, out, checkpoint) -> list[tuple]:
    """A Trigger.AvailableNow stream whose foreachBatch writes each micro-batch to a file (the
    function runs in the Connect server's Python worker, not in this process)."""
    os.makedirs(out, exist_ok=True)
    target = str(out)

    def sink(df, batch_id):
        with open(os.path.join(target, f"{batch_id}.json"), "w") as f:
            json.dump([[r.id, r.name] for r in df.select("id", "name").collect()], f)

    query = (session.readStream.format("flight-paimon").option("uri", uri).option("table", table).load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(240), "availableNow did not stop"
    assert query.exception() is None
    return sorted(tuple(r) for name in os.listdir(target) for r in json.load(open(os.path.join(target, name))))


@pytest.mark.timeout(400)
def test_reads_and_streams_through_spark_connect_equal_classic_spark(connect, spark, server, client, warehouse,
                                                                    tmp_path):
    register(spark)
    paimon = Warehouse(warehouse)
    table = paimon.create("orders", buckets=2)
    for i in range(3):
        paimon.commit(table, rows(i * 100, 100))

    def load(session, **options):
        reader = session.read.format("flight-paimon").option("uri", server.uri).option("table", table)
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    classic = rows_of(load(spark))
    assert len(classic) == 300 and rows_of(load(connect)) == classic
    assert rows_of(load(connect).filter("id >= 250")) == rows_of(load(spark).filter("id >= 250"))
    pinned = {"scan.snapshot-id": "2"}
    assert rows_of(load(connect, **pinned)) == rows_of(load(spark, **pinned)) == classic[:200]
    # A stream with foreachBatch: classic and Connect deliver the same rows.
    via_connect = stream_rows(connect, server.uri, table, tmp_path / "connect-out", tmp_path / "connect-ckpt")
    via_classic = stream_rows(spark, server.uri, table, tmp_path / "classic-out", tmp_path / "classic-ckpt")
    assert via_connect == via_classic == classic
    # A push table through Connect.
    client.register("pushed", SCHEMA, capacity=16, partitions=1)
    with client.sink("pushed", 0) as sink:
        for i in range(5):
            sink.write(batch(i * 10, 10))
    got = rows_of(connect.read.format("flight-paimon").option("uri", server.uri).option("push", "pushed").load())
    assert got == [(i, f"r{i}") for i in range(50)]


@pytest.mark.timeout(300)
def test_reused_connect_dataframe_is_exact_across_filters_and_commits(connect, server, warehouse):
    paimon = Warehouse(warehouse)
    table = paimon.create("events", buckets=2)
    paimon.commit(table, rows(0, 1000))
    df = connect.read.format("flight-paimon").option("uri", server.uri).option("table", table).load()
    assert df.count() == 1000
    assert df.filter("id >= 990").count() == 10
    assert df.count() == 1000, "the filtered query's plan leaked into the next count"
    paimon.commit(table, rows(1000, 200))
    assert df.count() == 1200, "a reused DataFrame read the snapshot of its first action"
    assert df.filter("id >= 1100").count() == 100


@pytest.mark.timeout(300)
def test_reused_connect_dataframe_is_exact_with_pushdown(connect, warehouse):
    """As classic Spark (tests/test_spark_pushdown.py): through Connect, only the action a filtered
    planning was made for prunes, and later actions on the DataFrame read everything."""
    from tests.conftest import RunningServer
    from tests.test_spark_pushdown import moved, pushdown

    server = RunningServer(warehouse, metrics=True)
    try:
        paimon = Warehouse(warehouse)
        table = paimon.create("pushed", buckets=2)
        paimon.commit(table, rows(0, 2000))
        with pushdown(connect):
            df = connect.read.format("flight-paimon").option("uri", server.uri).option("table", table) \
                .option("read.filter-pushdown", "true").load()
            full, full_bytes = moved(server, table, df.count)
            count, pruned = moved(server, table, lambda: df.filter("id >= 1990").count())
            after, again = moved(server, table, df.count)
            low, high = df.filter("id < 10").select("id"), df.filter("id >= 1990").select("id")
            assert low.union(high).count() == 20
            paimon.commit(table, rows(2000, 100))
            assert df.count() == 2100 and df.filter("id >= 2090").count() == 10
        assert (full, count, after) == (2000, 10, 2000)
        assert pruned <= full_bytes / 10, "the filtered action was not pruned"
        assert again == full_bytes
    finally:
        server.stop()
