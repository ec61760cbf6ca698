"""Arrow schemas on the wire: the `name:type,...` spec, base64 IPC, and a comparison that names the difference."""

from __future__ import annotations

import base64
import re

import pyarrow as pa

from flight_server.wire.errors import InvalidRequest

_SIMPLE = {
    "bool": pa.bool_(), "boolean": pa.bool_(),
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "float": pa.float32(), "float32": pa.float32(), "double": pa.float64(), "float64": pa.float64(),
    "string": pa.string(), "utf8": pa.string(), "large_string": pa.large_string(),
    "binary": pa.binary(), "date32": pa.date32(), "date": pa.date32(),
}


def parse_type(text: str) -> pa.DataType:
    """`int64`, `timestamp[us]`, `timestamp[us, UTC]`, `decimal(10,2)`, `list<int64>`."""
    t = text.strip()
    if t in _SIMPLE:
        return _SIMPLE[t]
    if m := re.fullmatch(r"timestamp\[(s|ms|us|ns)(?:\s*,\s*([^\]]+))?\]", t):
        return pa.timestamp(m.group(1), tz=m.group(2).strip() if m.group(2) else None)
    if m := re.fullmatch(r"decimal\((\d+)\s*,\s*(\d+)\)", t):
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    if m := re.fullmatch(r"list<(.+)>", t):
        return pa.list_(parse_type(m.group(1)))
    raise InvalidRequest(
        f"Unknown column type {t!r}; use one of {', '.join(sorted(_SIMPLE))}, "
        "timestamp[us], decimal(P,S) or list<TYPE>."
    )


def parse_spec(spec: str) -> pa.Schema:
    """Parse `id:int64,name:string,ts:timestamp[us]`; a trailing `!` on a type means not null."""
    fields = []
    for part in re.split(r",(?![^<\[(]*[>\])])", spec):
        if not part.strip():
            continue
        name, sep, type_text = part.partition(":")
        if not sep or not name.strip():
            raise InvalidRequest(f"Schema item {part.strip()!r} is not NAME:TYPE, e.g. 'id:int64'.")
        type_text = type_text.strip()
        nullable = not type_text.endswith("!")
        fields.append(pa.field(name.strip(), parse_type(type_text.rstrip("!")), nullable=nullable))
    return pa.schema(fields)


def encode_schema(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def decode_schema(text: str, what: str) -> pa.Schema:
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise InvalidRequest(
            f"The schema of {what} is not base64 of an Arrow IPC schema ({e}); "
            "send base64(schema.serialize())."
        ) from e


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
