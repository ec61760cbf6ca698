"""A durable write's stream schema against the table's (flight_server.ingest.conform), without a server."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from flight_server.ingest.conform import Conformer
from flight_server.wire.errors import InvalidRequest

pytestmark = pytest.mark.timeout(60)

TABLE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.large_string()),
                   pa.field("blob", pa.large_binary()), pa.field("x", pa.float64())])
STREAM = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("blob", pa.binary()),
                    pa.field("x", pa.float64())])


def _batch(schema: pa.Schema, ids: list, names: list) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"id": ids, "name": names, "blob": [n.encode() if n is not None else None for n in names],
         "x": [float(i or 0) for i in ids]}, schema=schema)


def test_a_batch_of_the_table_schema_passes_untouched():
    batch = _batch(TABLE, [1, 2], ["a", None])
    assert Conformer(TABLE, TABLE, "db.t")(batch, 0) is batch


def test_plain_strings_and_binaries_are_cast_to_the_tables_large_ones():
    out = Conformer(TABLE, STREAM, "db.t")(_batch(STREAM, [1, 2], ["a", None]), 0)
    assert out.schema.equals(TABLE, check_metadata=True)
    assert out.to_pydict() == {"id": [1, 2], "name": ["a", None], "blob": [b"a", None], "x": [1.0, 2.0]}


def test_a_schema_differing_only_in_metadata_takes_the_tables():
    table = TABLE.with_metadata({"paimon": "yes"})
    batch = _batch(TABLE, [1], ["a"])
    out = Conformer(table, TABLE, "db.t")(batch, 0)
    assert out.schema.metadata == {b"paimon": b"yes"} and out.to_pydict() == batch.to_pydict()


def test_a_nullable_stream_column_feeds_a_not_null_one_while_its_batches_hold_no_null():
    conform = Conformer(TABLE, STREAM, "db.t")
    assert conform(_batch(STREAM, [1, 2, 3], ["a", "b", "c"]), 0).num_rows == 3
    with pytest.raises(InvalidRequest, match=r"Batch 7 of the stream into db.t has 1 null\(s\) in column 'id', "
                                             r"which is NOT NULL in the table; nothing of that batch was written"):
        conform(_batch(STREAM, [1, None, 3], ["a", "b", "c"]), 7)


@pytest.mark.parametrize(("stream", "said"), [
    (STREAM.remove(0), "NOT NULL column 'id' is missing"),
    (STREAM.append(pa.field("y", pa.int8())), "column 'y' is not in the table"),
    (STREAM.set(3, pa.field("x", pa.float32())), "column 'x' has type float, expected double"),
    (STREAM.set(0, pa.field("id", pa.float64())), "column 'id' has type double, expected int64"),
    (STREAM.set(1, pa.field("title", pa.string())), "column 'title' is not in the table"),
])
def test_a_stream_of_other_names_or_types_is_refused_before_any_batch_naming_the_difference(stream, said):
    with pytest.raises(InvalidRequest) as e:
        Conformer(TABLE, stream, "table db.t")
    message = str(e.value)
    assert message.startswith("The stream's schema does not match table db.t: ") and said in message, message
    assert "nothing was written" in message and "get_schema" in message and "match by name" in message


def test_columns_match_by_name_in_any_order_and_a_missing_nullable_one_is_null():
    stream = pa.schema([STREAM[3], STREAM[1], STREAM[0]])  # x, name, id: no blob
    batch = pa.RecordBatch.from_pydict({"x": [1.5, 2.5], "name": ["a", None], "id": [1, 2]}, schema=stream)
    out = Conformer(TABLE, stream, "db.t")(batch, 0)
    assert out.schema.equals(TABLE, check_metadata=True)
    assert out.to_pydict() == {"id": [1, 2], "name": ["a", None], "blob": [None, None], "x": [1.5, 2.5]}
    with pytest.raises(InvalidRequest, match=r"Batch 3 .* has 1 null\(s\) in column 'id'"):
        Conformer(TABLE, stream, "db.t")(pa.RecordBatch.from_pydict(
            {"x": [1.0], "name": ["a"], "id": [None]}, schema=stream), 3)


@given(rows=st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.text(max_size=8)), max_size=30))
def test_any_batch_conformed_holds_the_same_values_in_the_tables_types(rows):
    ids, names = [r[0] for r in rows], [r[1] for r in rows]
    out = Conformer(TABLE, STREAM, "db.t")(_batch(STREAM, ids, names), 0)
    assert out.schema.equals(TABLE) and out.to_pydict() == _batch(TABLE, ids, names).to_pydict()


KINDS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("op", pa.string())])


def test_row_kinds_are_checked_after_the_cast_naming_the_first_bad_row_of_a_sliced_batch():
    conform = Conformer(KINDS, KINDS.set(1, pa.field("op", pa.large_string())), "db.t", row_kind="op", then="so on")
    ops = ["+I", "-U", "+U", "-D", "+I", "bad", None]
    whole = pa.RecordBatch.from_pydict({"id": list(range(7)), "op": pa.array(ops, pa.large_string())})
    assert conform(whole.slice(0, 5), 0).column(1).to_pylist() == ops[:5]
    assert conform(whole.slice(0, 0), 1).num_rows == 0
    with pytest.raises(InvalidRequest, match=r"^Batch 2 of the stream into db.t has row kind 'bad' at row 1 in column "
                                             r"'op' \(the table's rowkind.field\), which takes only \+I, -U, \+U, -D; "
                                             r"nothing of that batch was written and so on.$"):
        conform(whole.slice(4), 2)
    with pytest.raises(InvalidRequest, match=r"Batch 3 .* has a null row kind at row 0 in column 'op'"):
        conform(whole.slice(6), 3)


def test_a_long_bad_row_kind_is_cut_in_the_message():
    conform = Conformer(KINDS, KINDS, "db.t", row_kind="op")
    with pytest.raises(InvalidRequest, match=r"row kind '" + "y" * 40 + r"' at row 0"):
        conform(pa.RecordBatch.from_pydict({"id": [1], "op": ["y" * 1000]}, schema=KINDS), 0)


@pytest.mark.parametrize("field", ["id", "nope"])
def test_a_rowkind_field_that_is_no_string_column_is_refused_before_any_batch(field):
    with pytest.raises(InvalidRequest, match=f"The option rowkind.field of db.t names '{field}', which is not a "
                                             "string column of the table"):
        Conformer(KINDS, KINDS, "db.t", row_kind=field)
