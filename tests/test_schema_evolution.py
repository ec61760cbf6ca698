"""Schema evolution of durable writes: the server writes with the table's current schema whoever
altered it (here pypaimon, as another tool would), streams opened before an ALTER go on, and
producers' columns match the table's by name (a real server on a loopback port, real pypaimon
tables)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages, names
from tests.conftest import wait_for
from tests.paimon_tables import Warehouse

pytestmark = pytest.mark.timeout(120)

V0 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())])


def alter(warehouse: str, table: str, *changes) -> None:
    """An ALTER by another tool: pypaimon's catalog, as a user's script would do it."""
    Warehouse(warehouse).catalog.alter_table(table, list(changes))


def add_column(name: str, paimon_type: str = "BIGINT"):
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    return SchemaChange.add_column(name, AtomicType(paimon_type))


def rename_column(old: str, new: str):
    from pypaimon.schema.schema_change import SchemaChange

    return SchemaChange.rename_column(old, new)


def put(client, table: str, batches: list[pa.RecordBatch], producer: str | None = None) -> list:
    command = names.write_command(table, producer) if producer else None
    descriptor = (flight.FlightDescriptor.for_command(json.dumps(command)) if command
                  else flight.FlightDescriptor.for_path(*names.paimon_path(table)))
    writer, reader = client.flight.do_put(descriptor, batches[0].schema)
    for i, b in enumerate(batches):
        if producer:
            writer.write_with_metadata(b, pa.py_buffer(messages.batch_seq(i)))
        else:
            writer.write_batch(b)
    writer.write_metadata(pa.py_buffer(messages.end(len(batches))))
    writer.done_writing()
    acks = []
    while (buf := reader.read()) is not None:
        acks.append(messages.read_ack(buf))
    writer.close()
    return acks


def rows(client, table: str) -> list[dict]:
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"table": table})))
    out = [r for e in info.endpoints for r in client.flight.do_get(e.ticket).read_all().to_pylist()]
    return sorted(out, key=lambda r: r["id"])


def v0(ids) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"s{i}" for i in ids])], schema=V0)


def test_columns_match_by_name_in_any_order_and_a_missing_nullable_column_is_null(client):
    client.create_table("db.t", pa.schema([*V0, ("n", pa.float64())]))
    reordered = pa.schema([("n", pa.float64()), ("id", pa.int64()), ("s", pa.string())])
    put(client, "db.t", [pa.record_batch([pa.array([1.5]), pa.array([1], pa.int64()), pa.array(["a"])],
                                         schema=reordered)])
    put(client, "db.t", [v0([2])])  # no n
    assert rows(client, "db.t") == [{"id": 1, "s": "a", "n": 1.5}, {"id": 2, "s": "s2", "n": None}]
    with pytest.raises(pa.ArrowInvalid, match="column 'x' is not in the table"):
        put(client, "db.t", [pa.record_batch([pa.array([3], pa.int64()), pa.array([7])],
                                             schema=pa.schema([("id", pa.int64()), ("x", pa.int64())]))])
    with pytest.raises(pa.ArrowInvalid, match="NOT NULL column 'id' is missing"):
        put(client, "db.t", [pa.record_batch([pa.array(["z"])], schema=pa.schema([("s", pa.string())]))])


def test_a_column_another_tool_added_is_written_by_the_next_stream_without_a_restart(client, warehouse):
    client.create_table("db.t", V0)
    put(client, "db.t", [v0([1])], producer="p")
    alter(warehouse, "db.t", add_column("x"))
    v1 = pa.schema([*V0, ("x", pa.int64())])
    put(client, "db.t", [pa.record_batch([pa.array([2], pa.int64()), pa.array(["b"]), pa.array([20], pa.int64())],
                                         schema=v1)])
    put(client, "db.t", [v0([3])])  # a producer still on the old schema: x is null
    assert rows(client, "db.t") == [{"id": 1, "s": "s1", "x": None}, {"id": 2, "s": "b", "x": 20},
                                    {"id": 3, "s": "s3", "x": None}]
    assert client.producer_state("db.t", "p") == 0


def test_a_stream_opened_before_an_alter_goes_on_and_its_rows_read_with_the_new_schema(client, warehouse):
    client.create_table("db.t", V0)
    writer, reader = client.flight.do_put(
        flight.FlightDescriptor.for_command(json.dumps(names.write_command("db.t", "p"))), V0)
    writer.write_with_metadata(v0([1]), pa.py_buffer(messages.batch_seq(0)))
    assert messages.read_ack(reader.read()).seq == 0
    alter(warehouse, "db.t", add_column("x"), rename_column("s", "label"))
    seq = 1
    # The open stream goes on with its old columns; the server adopts the new schema between commits.
    def adopted() -> bool:
        nonlocal seq
        writer.write_with_metadata(v0([seq + 1]), pa.py_buffer(messages.batch_seq(seq)))
        assert messages.read_ack(reader.read()).seq == seq
        seq += 1
        latest = Warehouse(warehouse).catalog.get_table("db.t").snapshot_manager().get_latest_snapshot()
        return latest.schema_id == 1  # the server committed files of the altered schema
    wait_for(adopted, "the server to write with the altered schema", timeout=60)
    writer.write_with_metadata(v0([seq + 1]), pa.py_buffer(messages.batch_seq(seq)))
    writer.write_metadata(pa.py_buffer(messages.end(seq + 1)))
    writer.done_writing()
    while (buf := reader.read()) is not None:
        messages.read_ack(buf)
    writer.close()
    got = rows(client, "db.t")
    assert [r["id"] for r in got] == list(range(1, seq + 2))  # every batch once, none lost over the change
    assert all(r == {"id": r["id"], "label": f"s{r['id']}", "x": None} for r in got), got


@pytest.mark.parametrize("keys", [[], ["id"]])
def test_a_job_staged_before_an_alter_commits_after_it_with_the_new_schema(client, warehouse, keys):
    """An append table's attempt is files of the old schema (Paimon reads them with the new one); a
    primary-key table's waits in rows, written at the commit in the new schema."""
    client.create_table("db.t", V0, primary_keys=keys, options={"bucket": "2"} if keys else None)
    client.stage("db.t", "job-1", "a0", V0, [v0([1, 2])])
    alter(warehouse, "db.t", add_column("x"), rename_column("s", "label"))
    put(client, "db.t", [pa.record_batch([pa.array([3], pa.int64()), pa.array(["new"]), pa.array([30], pa.int64())],
                                         schema=pa.schema([*V0.set(1, pa.field("label", pa.string())),
                                                           ("x", pa.int64())]))])
    committed = client.commit_staged("db.t", "job-1", ["a0"])
    assert committed.rows == 2
    assert rows(client, "db.t") == [{"id": 1, "label": "s1", "x": None}, {"id": 2, "label": "s2", "x": None},
                                    {"id": 3, "label": "new", "x": 30}]
