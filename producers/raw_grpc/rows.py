"""The demo rows both producers send: each value a function of the row's global index (the JS twin is producers/js/rows.js)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa

from flight_server.wire.schemas import parse_spec

# What `flight_cli register --schema` takes; `!` marks not null.
SPEC = ("id:int64!,small:int32,big:int64,ratio:double,f32:float,name:string,flag:bool,"
        "ts:timestamp[us],day:date32,price:decimal(12,2),tags:list<int32>")
SCHEMA = parse_spec(SPEC)
# The same columns with `id` narrowed, for showing a refused schema.
WRONG_SCHEMA = SCHEMA.set(0, pa.field("id", pa.int32(), nullable=False))

_TS0 = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=1_700_000_000_000_000)
_DAY0 = datetime.date(1970, 1, 1) + datetime.timedelta(days=19000)


def row(i: int) -> dict:
    """Row `i` as Python values; null where the index says so, so every column has some nulls but `id`."""
    return {
        "id": i,
        "small": None if i % 11 == 3 else (i * 7919) % 65536 - 32768,
        "big": i * 2654435761 - (1 << 62),
        "ratio": None if i % 13 == 5 else i / 8 - 100,
        "f32": (i % 1000) * 0.5 - 250,
        "name": None if i % 7 == 6 else "" if i % 19 == 4 else f"zürich-{i}" if i % 5 == 0 else f"row-{i}",
        "flag": None if i % 17 == 2 else i % 3 == 0,
        "ts": None if i % 23 == 7 else _TS0 + datetime.timedelta(microseconds=i * 1_000_003),
        "day": _DAY0 + datetime.timedelta(days=i % 1000),
        "price": None if i % 29 == 11 else Decimal(i * 137 - 5000).scaleb(-2),
        "tags": None if i % 9 == 8 else [None if (i + k) % 6 == 5 else i * 10 + k for k in range(i % 4)],
    }


def batch(first: int, count: int, schema: pa.Schema = SCHEMA) -> pa.RecordBatch:
    """Rows [first, first + count) as one RecordBatch of `schema`."""
    rows = [row(i) for i in range(first, first + count)]
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def table(batches: int, rows: int, first: int = 0) -> pa.Table:
    """What a producer run with these options sends, as one table."""
    return pa.Table.from_batches([batch(first + b * rows, rows) for b in range(batches)], schema=SCHEMA)
