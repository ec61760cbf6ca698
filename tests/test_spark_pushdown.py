"""Spark filters prune on the server (partitions, file and row-group statistics) while Spark still
applies them, and a reused DataFrame stays exact (flight_server/paimon/guard.py)."""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest
from pypaimon import Schema

from flight_server.metrics import NAMESPACE
from tests.conftest import RunningServer
from tests.paimon_tables import commit_arrow, rows

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
PARTS = 10
PER_PART = 2000
WIDE = pa.schema([("p", pa.int32()), ("id", pa.int64()), ("x", pa.int64()), ("pad", pa.string())])


def wide_rows(p: int, start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"p": pa.array([p] * count, pa.int32()), "id": ids, "x": [i % 7 for i in ids],
                     "pad": [f"row-{i:08d}-" + "z" * 40 for i in ids]}, schema=WIDE)


def partitioned(paimon, name: str) -> str:
    """A bucket -1 table of PARTS partitions, PER_PART rows each, ids ascending by partition."""
    schema = Schema.from_pyarrow_schema(WIDE, partition_keys=["p"], options={"bucket": "-1"})
    paimon.catalog.create_table(f"db.{name}", schema, False)
    table = paimon.catalog.get_table(f"db.{name}")
    commit_arrow(table, pa.concat_tables([wide_rows(p, p * PER_PART, PER_PART) for p in range(PARTS)]))
    return f"db.{name}"


@pytest.fixture
def server(warehouse):
    """The test server, with metrics: they count the bytes each read moved."""
    running = RunningServer(warehouse, metrics=True)
    yield running
    running.stop()


@contextlib.contextmanager
def pushdown(session, on: bool = True):
    before = session.conf.get(PUSHDOWN, "false")
    session.conf.set(PUSHDOWN, "true" if on else "false")
    try:
        yield
    finally:
        session.conf.set(PUSHDOWN, before)


def served_bytes(server, table: str) -> float:
    """Arrow bytes the server has sent of `table` so far (its own metrics)."""
    value = server.server.metrics.registry.get_sample_value(
        f"{NAMESPACE}_table_bytes_total", {"kind": "paimon", "table": table, "direction": "out"})
    return value or 0.0


def moved(server, table: str, action):
    """What `action()` returned and the bytes the server sent of `table` for it."""
    before = served_bytes(server, table)
    result = action()
    return result, served_bytes(server, table) - before


def load(session, uri: str, table: str, pushdown: bool = True):
    return session.read.format("flight-paimon").option("uri", uri).option("table", table) \
        .option("read.filter-pushdown", str(pushdown).lower()).load()


@pytest.mark.timeout(240)
def test_one_partition_of_ten_moves_a_tenth_of_the_bytes(fp, server, paimon):
    table = partitioned(paimon, "tenparts")
    with pushdown(fp):
        full, full_bytes = moved(server, table, lambda: load(fp, server.uri, table).count())
        got, part_bytes = moved(server, table,
                                lambda: sorted(r.id for r in load(fp, server.uri, table).where("p = 3").collect()))
        ids, value_bytes = moved(server, table, lambda: sorted(
            r.id for r in load(fp, server.uri, table).where(f"id >= {PARTS * PER_PART - 150}").select("id").collect()))
    assert full == PARTS * PER_PART and full_bytes > 0
    assert got == list(range(3 * PER_PART, 4 * PER_PART))
    assert part_bytes <= full_bytes / 5, f"a one-partition query moved {part_bytes} of the full read's {full_bytes} bytes"
    assert ids == list(range(PARTS * PER_PART - 150, PARTS * PER_PART))
    assert value_bytes <= full_bytes / 20, f"a value filter moved {value_bytes} of {full_bytes} bytes"


@pytest.mark.timeout(240)
def test_filters_are_hints_without_the_conf(fp, server, paimon):
    """Without spark.sql.python.filterPushdown.enabled PySpark refuses a reader that overrides
    pushFilters; flight-paimon's reads work and read everything, and Spark filters."""
    table = partitioned(paimon, "noconf")
    with pushdown(fp, on=False):
        full, full_bytes = moved(server, table, lambda: load(fp, server.uri, table).count())
        got, part_bytes = moved(server, table, lambda: load(fp, server.uri, table).where("p = 3").count())
    assert (full, got) == (PARTS * PER_PART, PER_PART)
    assert part_bytes == full_bytes
    with pushdown(fp):  # the conf on, the read not asking: nothing pruned
        got, part_bytes = moved(server, table, lambda: load(fp, server.uri, table, pushdown=False).where("p = 3").count())
    assert got == PER_PART and part_bytes == full_bytes


@pytest.mark.timeout(300)
def test_reused_dataframe_is_exact_with_pushdown(fp, server, paimon):
    """PySpark 4.3 hands a filtered query's planning (its pushed filters) to the DataFrame's later
    actions and to its other scans in the same query: only the action it was planned for prunes."""
    table = paimon.create("events", buckets=2)
    paimon.commit(table, rows(0, 4000))
    with pushdown(fp):
        df = load(fp, server.uri, table)
        full, full_bytes = moved(server, table, df.count)
        assert full == 4000
        count, pruned = moved(server, table, lambda: df.filter("id >= 3900 AND region = 'eu'").count())
        assert count == len([i for i in range(3900, 4000) if i % 3 == 0])
        assert pruned <= full_bytes / 10, "the filtered action was not pruned"
        count, after = moved(server, table, df.count)
        assert count == 4000, "the filtered query's pruned plan leaked into the next count"
        assert after == full_bytes
        assert sorted(r.id for r in df.filter("id < 5").select("id").collect()) == list(range(5))
        assert df.filter("id >= 3990").groupBy().sum("id").first()[0] == sum(range(3990, 4000))
        assert df.select("id").distinct().count() == 4000
        # two scans of the DataFrame in one query, filtered differently: both read the last planning
        low, high = df.filter("id < 10").select("id"), df.filter("id >= 3990").select("id")
        assert low.union(high).count() == 20
        assert low.crossJoin(high.withColumnRenamed("id", "j")).count() == 100
        assert df.filter("region = 'us'").count() == len([i for i in range(4000) if i % 3 == 1])
        paimon.commit(table, rows(4000, 500))
        assert df.count() == 4500, "a reused DataFrame read the snapshot of its first action"
        assert df.filter("id >= 4400").count() == 100
        assert sorted(r.id for r in df.select("id").collect()) == list(range(4500))
        snap = fp.read.format("flight-paimon").option("uri", server.uri).option("table", table) \
            .option("scan.snapshot-id", "1").option("read.filter-pushdown", "true").load()
        assert snap.filter("id >= 3990").count() == 10 and snap.count() == 4000


@pytest.mark.timeout(240)
def test_primary_key_filter_never_resurrects_an_old_version(fp, server, paimon):
    """A key updated so its old value matches the filter and its new one does not: the server may
    skip files only where merging cannot bring the old row back."""
    table = paimon.create("pk", buckets=2, primary_keys=["id"])
    paimon.commit(table, rows(0, 100))
    changed = rows(0, 10).set_column(3, "region", pa.array(["gone"] * 10))
    paimon.commit(table, changed)
    with pushdown(fp):
        df = load(fp, server.uri, table)
        eu = sorted(r.id for r in df.filter("region = 'eu'").select("id").collect())
        gone = df.filter("region = 'gone'").count()
    assert eu == [i for i in range(10, 100) if i % 3 == 0]
    assert gone == 10


@pytest.mark.timeout(240)
def test_small_unaware_bucket_table_spreads_over_the_stage(fp, server, paimon):
    """A bucket -1 table's small files were packed into one split: one Spark partition."""
    table = paimon.create("small", buckets=-1)
    for k in range(4):
        paimon.commit(table, rows(k * 500, 500))
    df = load(fp, server.uri, table)
    assert df.rdd.getNumPartitions() == 4 >= fp.sparkContext.defaultParallelism
    assert sorted(r.id for r in df.select("id").collect()) == list(range(2000))
    assert df.filter("id >= 1990").count() == 10
