"""A producer stream's schema against the table's row type, checked once; each batch conformed.

Names and types must match the table's (string/large_string and binary/large_binary count as
one type and are cast). Nullability may differ: a nullable stream column may feed a NOT NULL
column (a primary key) as long as each batch holds no null there; a batch that does is refused
whole, with nothing of it written.
"""

from __future__ import annotations

import pyarrow as pa

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.schemas import describe, loosened, schema_difference


class Conformer:
    """Turns each batch of one stream into the table's exact schema, or refuses it."""

    def __init__(self, table_schema: pa.Schema, stream_schema: pa.Schema, label: str):
        diff = schema_difference(loosened(table_schema), loosened(stream_schema))
        if diff is not None:
            raise InvalidRequest(
                f"The stream's schema does not match {label}: {diff}. The table's row type is "
                f"{describe(table_schema)} (get_schema on its descriptor returns it); nothing was written.")
        self.schema, self.label = table_schema, label
        self._not_null = [i for i, f in enumerate(table_schema) if not f.nullable and stream_schema[i].nullable]
        self._cast = not stream_schema.equals(table_schema, check_metadata=False)
        self._relabel = not stream_schema.equals(table_schema, check_metadata=True)  # writers coalesce batches of one schema

    def __call__(self, batch: pa.RecordBatch, index: int) -> pa.RecordBatch:
        for i in self._not_null:
            nulls = batch.column(i).null_count
            if nulls:
                raise InvalidRequest(
                    f"Batch {index} of the stream into {self.label} has {nulls} null(s) in column "
                    f"{self.schema[i].name!r}, which is NOT NULL in the table; nothing of that batch was "
                    "written and the stream's unacked batches were discarded.")
        if not self._relabel:
            return batch
        if not self._cast:
            return pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(batch.columns, self.schema)]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)
