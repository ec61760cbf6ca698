"""Spark's readStream of a Paimon table across an ALTER TABLE (issue 46 item 5): a running query
keeps its columns and stops with a clear error at the first micro-batch after the change; the
query restarted from its checkpoint reads the new columns from there, every row once."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from flight_server.wire import actions as wa
from tests.conftest import wait_for
from tests.test_schema_evolution import V0, put, v0
from tests.test_spark_paimon import delivered, start_stream

V1 = pa.schema([*V0, ("x", pa.int64())])


@pytest.mark.timeout(300)
def test_a_stream_across_an_add_column_stops_clearly_and_a_restart_from_its_checkpoint_reads_the_new_column(
        fp, client, tmp_path):
    client.create_table("db.t", V0, options={"bucket": "2", "bucket-key": "id"})
    put(client, "db.t", [v0([1, 2, 3])])
    by_batch: dict[int, list[dict]] = {}  # keyed by batch id: a re-run batch overwrites, as a sink should

    def sink(df, batch_id):
        by_batch[batch_id] = [r.asDict() for r in df.collect()]

    def seen() -> list[dict]:
        return [r for rows in by_batch.values() for r in rows]

    ckpt, trigger = str(tmp_path / "ckpt"), {"processingTime": "200 milliseconds"}
    query = start_stream(fp, client.uri, "db.t", ckpt, sink, trigger)
    try:
        wait_for(delivered(query, lambda: len(seen()) >= 3), "the first 3 rows", timeout=60)
        put(client, "db.t", [v0([4])])  # before the change: read by the running query
        wait_for(delivered(query, lambda: len(seen()) >= 4), "row 4", timeout=60)
        client.alter_table("db.t", [wa.SchemaChange.add_column("x", "int64")])
        changed = put(client, "db.t", [pa.record_batch([pa.array([5, 6], pa.int64()), pa.array(["s5", "s6"]),
                                                        pa.array([50, 60], pa.int64())], schema=V1)])[0].snapshot
        wait_for(lambda: not query.isActive, "the query to stop at the change", timeout=60)
    finally:
        query.stop()
    text = str(query.exception())
    assert "schema changed since this query started" in text and "x bigint" in text, text
    assert f"before reading snapshots {changed}..{changed}" in text and "restart it from its checkpoint" in text
    assert "Traceback" not in text.split("SourceError", 1)[-1].split("\n", 1)[0]
    assert sorted(seen(), key=lambda r: r["id"]) == [{"id": i, "s": f"s{i}"} for i in range(1, 5)], \
        "the running query read nothing of the changed snapshot, and kept its columns"
    # Restarted from the same checkpoint: the new column, from the batch that stopped on.
    query = start_stream(fp, client.uri, "db.t", ckpt, sink, trigger)
    try:
        put(client, "db.t", [pa.record_batch([pa.array([7], pa.int64()), pa.array(["s7"]), pa.array([70], pa.int64())],
                                             schema=V1)])
        wait_for(delivered(query, lambda: len(seen()) >= 7), "rows 5..7 after the restart", timeout=60)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    rows = seen()
    assert Counter(r["id"] for r in rows) == Counter(range(1, 8)), "every row once"
    assert sorted((r for r in rows if r["id"] >= 5), key=lambda r: r["id"]) == \
        [{"id": i, "s": f"s{i}", "x": i * 10} for i in (5, 6, 7)]
