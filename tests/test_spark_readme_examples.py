"""spark_reader/README.md's Python blocks run as written (issue 48 item 3), one after the other in
the test's SparkSession against a real server: its URI and the checkpoints' directory pointed at
the test's, over the tables the blocks name, made first as a user makes them."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from pypaimon import Schema

from tests.conftest import ROOT, wait_for
from tests.paimon_tables import commit_arrow

README_URI = "grpc://127.0.0.1:8815"
ORDERS = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])
USERS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("op", pa.string())])
CLICKS = pa.schema([("user", pa.string()), ("n", pa.int64())])


def python_blocks(path: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / path).read_text(), re.S)


@pytest.mark.timeout(600)
def test_the_spark_reader_readme_blocks_run_as_written(fp, client, paimon, tmp_path):
    blocks = python_blocks("spark_reader/README.md")
    assert len(blocks) == 2 and README_URI in blocks[0] and "uri" in blocks[1]  # the second goes on from the first
    code = "\n".join(blocks)
    assert "/tmp/chk/" in code
    # The tables they name: db.orders with seven snapshots and the two tags, db.users (primary key,
    # row kinds in `op`), push tables shard_results, clicks (three batches held) and enriched.
    paimon.catalog.create_table("db.orders", Schema.from_pyarrow_schema(ORDERS), False)
    for i in range(7):
        commit_arrow(paimon.catalog.get_table("db.orders"), pa.table({"id": [i], "name": [f"n{i}"], "amount": [1.0]},
                                                                    schema=ORDERS))
    client.create_tag("db.orders", "2026-11-01", snapshot=1)
    client.create_tag("db.orders", "2026-11-02", snapshot=2)
    paimon.catalog.create_table("db.users", Schema.from_pyarrow_schema(
        USERS, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "op", "changelog-producer": "input"}),
        False)
    commit_arrow(paimon.catalog.get_table("db.users"),
                 pa.table({"id": [1, 2, 1], "name": ["a", "b", "a"], "op": ["+I", "+I", "-D"]}, schema=USERS))
    client.register("shard_results", ORDERS)
    client.register("enriched", CLICKS)
    client.register("clicks", CLICKS, writers=2)  # a producer now, another later
    with client.sink("clicks") as sink:
        for n in range(3):
            sink.write(pa.record_batch([pa.array(["u"]), pa.array([n], pa.int64())], schema=CLICKS))

    scope = {"__name__": "spark_reader_readme"}
    exec(compile(code.replace(README_URI, client.uri).replace("/tmp/chk/", f"{tmp_path}/chk/"),
                 "spark_reader/README.md", "exec"), scope)
    try:
        assert scope["spark"] is fp  # getOrCreate: the test's session
        for query in fp.streams.active:
            query.processAllAvailable()
        # db.orders: its seven rows, the df written into it, and the same df through shard_results
        rows = fp.read.format("flight-paimon").option("uri", client.uri).option("table", "db.orders").load()
        assert sorted(r.id for r in rows.collect()) == [0, 1, 1, 1, 2, 2, 2, 3, 4, 5, 6]
        # enriched: clicks from the stream's start on (startingOffsets latest): one pushed now arrives
        with client.sink("clicks") as sink:
            sink.write(pa.record_batch([pa.array(["v"]), pa.array([9], pa.int64())], schema=CLICKS))
        wait_for(lambda: client.offsets("enriched")["0"].next_seq >= 1, "the click in enriched", timeout=120)
        got = fp.read.format("flight-paimon").option("uri", client.uri).option("push", "enriched").load().collect()
        assert [(r.user, r.n) for r in got] == [("v", 9)]
    finally:
        for query in fp.streams.active:
            query.stop()
