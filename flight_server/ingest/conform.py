"""A producer stream's schema against the table's row type, checked once; each batch conformed.

Columns match by name, in any order. A nullable column the stream lacks is written null; a NOT
NULL one it lacks, and a column the table does not have, refuse the stream before its first batch
(naming them). Types must match the table's (string/large_string and binary/large_binary count
as one type and are cast). Nullability may differ: a nullable stream column may feed a NOT NULL
column (a primary key) as long as each batch holds no null there; a batch that does is refused
whole, with nothing of it written.

A primary-key table with `rowkind.field` takes each row's kind from that string column: a batch
holding anything but Paimon's `+I -U +U -D` there (a null included) is refused whole too, naming
the row, as pypaimon's writer would otherwise fail the whole group commit it joined, other
producers' batches with it. A table whose merge engine takes no retractions (partial-update,
aggregation, first-row without ignore-delete: compat.refuses_retractions) takes only `+I` and
`+U` there: a `-U` or `-D` row refuses its batch the same way.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.schemas import by_name_columns, describe, name_difference

ROW_KINDS = ("+I", "-U", "+U", "-D")  # Paimon's RowKind short strings, exactly (pypaimon's Python writer is case-sensitive)
ADDS = ("+I", "+U")  # the kinds a merge engine that takes no retractions takes
_ROW_KINDS = pa.array(ROW_KINDS, pa.string())
DISCARDED = "the stream's unacked batches were discarded"


class Conformer:
    """Turns each batch of one stream into the table's exact schema, or refuses it."""

    def __init__(self, table_schema: pa.Schema, stream_schema: pa.Schema, label: str, row_kind: str | None = None,
                 then: str = DISCARDED, no_retractions: str | None = None):
        """`row_kind`: the table's `rowkind.field` (compat.row_kind_field); `then`: what a refusal
        did to the stream, the end of its message; `no_retractions`: the table's merge engine when
        it takes no -U/-D rows (compat.refuses_retractions)."""
        by_name = {name: i for i, name in enumerate(stream_schema.names)}
        diff = name_difference(table_schema, stream_schema)
        if diff is not None:
            raise InvalidRequest(
                f"The stream's schema does not match {label}: {diff}. The table's row type is "
                f"{describe(table_schema)} (get_schema on its descriptor returns it); columns match by name in any "
                "order, and a nullable column the stream lacks is written null; nothing was written.")
        self.schema, self.label, self._then = table_schema, label, then
        self._sources = [by_name.get(f.name) for f in table_schema]  # the stream's column of each (None: null)
        self._in_order = self._sources == list(range(len(stream_schema)))
        self._row_kind = self._kinds = None
        if row_kind is not None:
            i = table_schema.get_field_index(row_kind)
            if i < 0 or not (pa.types.is_string(table_schema[i].type) or pa.types.is_large_string(table_schema[i].type)):
                raise InvalidRequest(
                    f"The option rowkind.field of {label} names {row_kind!r}, which is not a string column of the "
                    "table, so none of its rows can be written: set it to a string column or remove it; nothing "
                    "was written.")
            self._row_kind, self._kinds = i, _ROW_KINDS.cast(table_schema[i].type)
            if no_retractions is not None:
                self._kinds = pa.array(ADDS, pa.string()).cast(table_schema[i].type)
        self._engine = no_retractions
        self._not_null = [i for i, (f, j) in enumerate(zip(table_schema, self._sources))
                          if not f.nullable and stream_schema[j].nullable]
        self._cast = not self._in_order or not stream_schema.equals(table_schema, check_metadata=False)
        self._relabel = self._cast or not stream_schema.equals(table_schema, check_metadata=True)  # writers coalesce batches of one schema

    def __call__(self, batch: pa.RecordBatch, index: int) -> pa.RecordBatch:
        for i in self._not_null:
            nulls = batch.column(self._sources[i]).null_count
            if nulls:
                raise InvalidRequest(
                    f"Batch {index} of the stream into {self.label} has {nulls} null(s) in column "
                    f"{self.schema[i].name!r}, which is NOT NULL in the table; nothing of that batch was "
                    f"written and {self._then}.")
        if self._relabel:
            if self._cast:
                columns = by_name_columns(batch, self.schema, self._sources)
            else:
                columns = batch.columns
            batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        if self._row_kind is not None:
            self._check_row_kinds(batch.column(self._row_kind), index)
        return batch

    def _check_row_kinds(self, column: pa.Array, index: int) -> None:
        """Every value of the rowkind.field column one of ROW_KINDS (vectorized: one hash lookup a row)."""
        valid = pc.is_in(column, value_set=self._kinds)  # a null matches no kind: False, never null
        if not valid.false_count:
            return
        row = pc.index(valid, False).as_py()
        value = column[row].as_py()
        said = "a null row kind" if value is None else f"row kind {value[:40]!r}"
        takes = f"takes only {', '.join(ROW_KINDS)}"
        if self._engine is not None and value in ROW_KINDS:
            takes = (f"takes only {', '.join(ADDS)} in this table: its merge-engine {self._engine} takes no "
                     "retractions (-U, -D) here (Paimon's ignore-delete is not implemented for it by pypaimon)")
        raise InvalidRequest(
            f"Batch {index} of the stream into {self.label} has {said} at row {row} in column "
            f"{self.schema[self._row_kind].name!r} (the table's rowkind.field), which {takes}; nothing of that "
            f"batch was written and {self._then}.")

