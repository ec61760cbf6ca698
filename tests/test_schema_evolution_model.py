"""A model of schema evolution (issue 46): random sequences of ADD, RENAME, DROP and int32 -> int64
widening (by the server's alter_table or by pypaimon, as another tool would), interleaved with
writes from producers on older schemas (streams opened before a change, still open) and on the
current one (new streams), read back and compared with a model that follows each column by its
identity (Paimon's field id): a renamed column keeps its values, a dropped one is gone (a column
added later under its name starts empty), a widened one keeps its values. Then compacted and read
again. A real server on a loopback port and real tables."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flight_server.wire import actions as wa
from flight_server.wire import messages, names
from producers import Client
from tests.conftest import RunningServer
from tests.paimon_tables import Warehouse
from tests.test_schema_evolution import rows

pytestmark = pytest.mark.timeout(240)

NAMES = [f"c{i}" for i in range(8)]
ARROW = {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string()}


@dataclass
class Column:
    key: int  # the column's identity: what Paimon's field id is
    name: str
    type: str


@dataclass
class Stream:
    """A named producer's stream, opened with the columns the table had then."""

    columns: list[Column]
    writer: object
    reader: object
    seq: int = 0


@dataclass
class Model:
    columns: list[Column]
    rows: dict[int, dict[int, object]] = field(default_factory=dict)  # id -> column key -> value
    keys: itertools.count = field(default_factory=lambda: itertools.count(1))

    def expected(self) -> list[dict]:
        return [{"id": i, **{c.name: values.get(c.key) for c in self.columns}} for i, values in sorted(self.rows.items())]


def value(column: Column, i: int):
    return f"{column.key}:{i}" if column.type == "string" else i * 100 + column.key


def batch(columns: list[Column], ids: list[int]) -> pa.RecordBatch:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)] + [(c.name, ARROW[c.type]) for c in columns])
    return pa.record_batch([pa.array(ids, pa.int64())] + [pa.array([value(c, i) for i in ids], ARROW[c.type])
                                                          for c in columns], schema=schema)


def test_random_schema_changes_and_writes_from_old_and_new_streams_read_back_as_the_model(warehouse):
    running = RunningServer(warehouse, commit_interval_ms=10)
    client = Client(running.uri, timeout=30)
    paimon = Warehouse(warehouse)
    tables = itertools.count()

    def open_stream(table: str, model: Model, ids) -> Stream:
        """A stream with the table's columns now, open once the server has acked its first batch
        (pyarrow sends a do_put's schema with its first batch: the server sees the stream then)."""
        columns = [Column(c.key, c.name, c.type) for c in model.columns]
        command = names.write_command(table, f"p{next(tables)}")
        writer, reader = client.flight.do_put(flight.FlightDescriptor.for_command(json.dumps(command)),
                                              batch(columns, []).schema)
        stream = Stream(columns, writer, reader)
        write(stream, model, [next(ids)])
        return stream

    def write(stream: Stream, model: Model, ids: list[int]) -> None:
        stream.writer.write_with_metadata(batch(stream.columns, ids), pa.py_buffer(messages.batch_seq(stream.seq)))
        ack = messages.read_ack(stream.reader.read())  # committed: the model may count it
        assert ack.seq == stream.seq
        stream.seq += 1
        live = {c.key for c in model.columns}
        for i in ids:
            model.rows[i] = {c.key: value(c, i) for c in stream.columns if c.key in live}

    def close(stream: Stream, failed: bool) -> None:
        """End the stream cleanly; after a failure, only let it go."""
        try:
            if not failed:
                stream.writer.write_metadata(pa.py_buffer(messages.end(stream.seq)))
                stream.writer.done_writing()
                while stream.reader.read() is not None:
                    pass
        finally:
            try:
                stream.writer.close()
            except Exception:  # noqa: BLE001 - a failed stream's close says it failed: reported already
                if not failed:
                    raise

    def alter(table: str, change: wa.SchemaChange, by_pypaimon: bool) -> None:
        if not by_pypaimon or change.change == names.UPDATE_COLUMN_TYPE:
            client.alter_table(table, [change])
            return
        from pypaimon.schema.data_types import AtomicType
        from pypaimon.schema.schema_change import SchemaChange

        if change.change == names.ADD_COLUMN:
            paimon_change = SchemaChange.add_column(change.column, AtomicType(
                {"int32": "INT", "string": "STRING"}[change.type]))
        elif change.change == names.RENAME_COLUMN:
            paimon_change = SchemaChange.rename_column(change.column, change.new_name)
        else:
            paimon_change = SchemaChange.drop_column(change.column)
        paimon.catalog.alter_table(table, [paimon_change])

    @settings(max_examples=25, deadline=None)
    @given(st.data())
    def run(data):
        table = f"db.m{next(tables)}"
        keyed = data.draw(st.booleans(), "primary key")
        model = Model([])
        model.columns = [Column(next(model.keys), "c0", "int32"), Column(next(model.keys), "c1", "string")]
        schema = batch(model.columns, []).schema
        client.create_table(table, schema, primary_keys=["id"] if keyed else None,
                            options={"bucket": "1"} if keyed else None)
        ids = itertools.count()
        streams: list[Stream] = []
        failed = True
        try:
            streams.append(open_stream(table, model, ids))
            for _ in range(data.draw(st.integers(3, 9), "steps")):
                step = data.draw(st.sampled_from(["add", "rename", "drop", "widen", "write", "write", "write"]))
                by_pypaimon = data.draw(st.booleans(), "by pypaimon")
                others = model.columns
                free = [n for n in NAMES if n not in {c.name for c in others}]
                if step == "add" and free:
                    column = Column(next(model.keys), data.draw(st.sampled_from(free)),
                                    data.draw(st.sampled_from(["int32", "string"])))
                    alter(table, wa.SchemaChange.add_column(column.name, column.type), by_pypaimon)
                    model.columns.append(column)
                elif step == "rename" and others and free:
                    column = data.draw(st.sampled_from(others))
                    new = data.draw(st.sampled_from(free))
                    alter(table, wa.SchemaChange.rename_column(column.name, new), by_pypaimon)
                    column.name = new
                elif step == "drop" and len(others) > 1:
                    column = data.draw(st.sampled_from(others))
                    alter(table, wa.SchemaChange.drop_column(column.name), by_pypaimon)
                    model.columns = [c for c in others if c is not column]
                elif step == "widen" and any(c.type == "int32" for c in others):
                    column = data.draw(st.sampled_from([c for c in others if c.type == "int32"]))
                    alter(table, wa.SchemaChange.update_column_type(column.name, "int64"), False)
                    column.type = "int64"
                elif step == "write":
                    if data.draw(st.booleans(), "a new stream") or not streams:
                        streams.append(open_stream(table, model, ids))
                    stream = data.draw(st.sampled_from(streams), "stream")
                    write(stream, model, [next(ids) for _ in range(data.draw(st.integers(1, 3), "rows"))])
                if step in ("add", "rename", "drop", "widen") and data.draw(st.booleans(), "open a stream"):
                    streams.append(open_stream(table, model, ids))  # a producer that starts on the new schema
            for stream in streams:
                write(stream, model, [next(ids)])  # every stream, however old its columns, writes once more
            failed = False
        finally:
            for stream in streams:
                close(stream, failed)
        expected = model.expected()
        assert rows(client, table) == expected
        client.compact(table)
        assert rows(client, table) == expected, "after compaction"

    try:
        run()
    finally:
        client.close()
        running.stop()
