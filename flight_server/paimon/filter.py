"""The `filter` of a Paimon read, checked against the table and turned into a pypaimon predicate."""

from __future__ import annotations

import pyarrow as pa

from flight_server.paimon import compat
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.requests import PaimonRequest

_PREDICATES = {"=": "equal", "!=": "not_equal", "<": "less_than", "<=": "less_or_equal",
               ">": "greater_than", ">=": "greater_or_equal", "in": "is_in",
               "is_null": "is_null", "is_not_null": "is_not_null"}


def build_predicate(table, req: PaimonRequest):
    """The request's filter as one pypaimon predicate (None without a filter), checked against the table."""
    if not req.filter:
        return None
    pb = table.new_read_builder().new_predicate_builder()
    fields = {f.name: f for f in table.fields}
    arrow_types = {f.name: f.type for f in compat.arrow_schema(table)}
    preds = []
    for cond in req.filter:
        column, op = cond[0], cond[1]
        if column not in fields and column == req.row_kind:
            raise InvalidRequest(
                f"Paimon read of {req.table!r}: a filter on the row kind column {column!r} is not served (Paimon "
                "does not push it down either); filter the rows you read.")
        if column not in fields:
            raise InvalidRequest(
                f"Paimon table {req.table!r} has no column {column!r} (in 'filter'); "
                f"its columns are {', '.join(fields)}."
            )
        args = [column]
        if len(cond) == 3:
            values = cond[2] if op == "in" else [cond[2]]
            for v in values:
                try:
                    pa.scalar(v, arrow_types[column])
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
                    raise InvalidRequest(
                        f"Paimon read of {req.table!r}: filter value {v!r} does not fit column {column!r} "
                        f"of type {arrow_types[column]} ({e})."
                    ) from e
            args.append(cond[2])
        preds.append(getattr(pb, _PREDICATES[op])(*args))
    return preds[0] if len(preds) == 1 else pb.and_predicates(preds)
