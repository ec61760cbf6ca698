"""A batch written for one schema version of a table, as another: what lets a stream opened before
an ALTER go on writing after it. Columns follow their Paimon field ids, as Paimon reads old files
with a new schema: a renamed column keeps its values, a dropped one is left out, an added one is
null, a widened one is cast.
"""

from __future__ import annotations

import pyarrow as pa

from flight_server.paimon.compat.columns import Columns
from flight_server.wire.errors import InvalidRequest


def evolve(batch: pa.RecordBatch, source: Columns, target: Columns, label: str) -> pa.RecordBatch:
    """`batch` (of `source`'s columns) in `target`'s; refused when an ALTER made a column NOT NULL
    that the batch leaves null, or changed a type the batch's values do not fit."""
    if source.schema_id == target.schema_id:
        return batch
    index = {fid: i for i, fid in enumerate(source.field_ids)}
    columns = []
    for field, fid in zip(target.arrow, target.field_ids):
        i = index.get(fid)
        column = pa.nulls(batch.num_rows, field.type) if i is None else batch.column(i)
        if not column.type.equals(field.type):
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise InvalidRequest(
                    f"A batch of the stream into {label} does not fit column {field.name!r} as an ALTER changed it "
                    f"(now {field.type}): {str(e).splitlines()[0]}; nothing of that batch was written. Open a new "
                    "stream with the table's current schema (get_schema).") from None
        if not field.nullable and column.null_count:
            raise InvalidRequest(
                f"A batch of the stream into {label} has {column.null_count} null(s) in column {field.name!r}, which "
                f"{'an ALTER added as' if i is None else 'an ALTER made'} NOT NULL since the stream opened; nothing of "
                "that batch was written. Open a new stream that sends the column (get_schema).")
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=target.arrow)
