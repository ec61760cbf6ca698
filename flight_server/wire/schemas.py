"""Arrow schemas on the wire: the `name:type,...` spec, base64 IPC, and a comparison that names the difference."""

from __future__ import annotations

import base64

import pyarrow as pa

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.type_spec import parse_spec, parse_type  # noqa: F401  (the CLI's schema text)


def encode_schema(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def decode_schema(text: str, what: str) -> pa.Schema:
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise InvalidRequest(
            f"The schema of {what} is not base64 of an Arrow IPC schema ({e}); "
            "send base64(schema.serialize())."
        ) from e
    twice = sorted({n for n in schema.names if schema.names.count(n) > 1})
    if twice:
        raise InvalidRequest(f"The schema of {what} names column {twice[0]!r} twice; column names must be unique.")
    return schema


_LARGE = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def loosened(schema: pa.Schema) -> pa.Schema:
    """Every column nullable, large string/binary as plain ones: what a durable write's stream
    must match of the table's row type (nulls in NOT NULL columns are checked per batch)."""
    return pa.schema([pa.field(f.name, _LARGE.get(f.type, f.type), True) for f in schema])


def describe(schema: pa.Schema) -> str:
    """One line: `id: int64 not null, name: string`."""
    return ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema)


def schema_difference(expected: pa.Schema, actual: pa.Schema) -> str | None:
    """None when the schemas match in names, types and nullability (metadata ignored); else what differs."""
    if expected.equals(actual, check_metadata=False):
        return None
    diffs = []
    for i in range(max(len(expected), len(actual))):
        if i >= len(expected):
            diffs.append(f"extra column {actual[i].name!r} at position {i}")
            continue
        if i >= len(actual):
            diffs.append(f"missing column {expected[i].name!r} at position {i}")
            continue
        e, a = expected[i], actual[i]
        if e.name != a.name:
            diffs.append(f"column {i} is named {a.name!r}, expected {e.name!r}")
        if not e.type.equals(a.type, check_metadata=False):
            diffs.append(f"column {e.name!r} has type {a.type}, expected {e.type}")
        if e.nullable != a.nullable:
            diffs.append(
                f"column {e.name!r} is {'nullable' if a.nullable else 'not null'}, "
                f"expected {'nullable' if e.nullable else 'not null'}"
            )
    return "; ".join(diffs) or f"schema {actual} differs from {expected}"


def name_difference(table: pa.Schema, stream: pa.Schema) -> str | None:
    """What keeps a stream's columns from feeding a table's, matched by name in any order (a
    nullable table column the stream lacks is written null); None if nothing."""
    loose_table, loose_stream = loosened(table), loosened(stream)
    by_name = {name: i for i, name in enumerate(stream.names)}
    diffs = [f"column {name!r} is not in the table" for name in stream.names if table.get_field_index(name) < 0]
    for i, f in enumerate(table):
        j = by_name.get(f.name)
        if j is None:
            if not f.nullable:
                diffs.append(f"NOT NULL column {f.name!r} is missing")
        elif not loose_table[i].type.equals(loose_stream[j].type, check_metadata=False):
            diffs.append(f"column {f.name!r} has type {stream[j].type}, expected {f.type}")
    if len(by_name) < len(stream.names):
        diffs.append("a column name repeats")
    return "; ".join(diffs) or None


def by_name_columns(batch: pa.RecordBatch, table: pa.Schema, sources: list[int | None] | None = None) -> list:
    """The batch's columns in the table's order and types (after `name_difference` found none):
    null where the batch lacks a column. `sources`: each table column's index in the batch, when
    the caller has it."""
    if sources is None:
        index = {name: i for i, name in enumerate(batch.schema.names)}
        sources = [index.get(f.name) for f in table]
    return [pa.nulls(batch.num_rows, f.type) if j is None else _as(batch.column(j), f.type)
            for j, f in zip(sources, table)]


def _as(column: pa.Array, type_: pa.DataType) -> pa.Array:
    return column if column.type == type_ else column.cast(type_)
