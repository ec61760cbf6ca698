"""--schema and `list` speak one grammar: what `list` prints, --schema reads back equal."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.schemas import decode_schema, encode_schema
from flight_server.wire.type_spec import format_spec, parse_spec, parse_type

PRIMITIVES = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64(), pa.float16(),
              pa.float32(), pa.float64(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
              pa.binary(16), pa.date32(), pa.date64(), pa.time32("ms"), pa.time64("us"), pa.duration("ns"),
              pa.timestamp("s"), pa.timestamp("us", tz="UTC"), pa.timestamp("ns", tz="+01:00"),
              pa.timestamp("ms", tz="Europe/Zurich"), pa.decimal128(10, 2), pa.decimal128(38, 0),
              pa.decimal256(40, 5)]
names = st.text(min_size=1, max_size=12).filter(lambda n: "\x00" not in n)


def types(depth: int = 2):
    base = st.sampled_from(PRIMITIVES)
    if depth == 0:
        return base
    inner = types(depth - 1)
    field = st.builds(pa.field, names, inner, st.booleans())
    return st.one_of(
        base,
        inner.map(pa.list_),
        st.builds(lambda f: pa.list_(f), field),
        inner.map(pa.large_list),
        st.lists(field, min_size=1, max_size=3, unique_by=lambda f: f.name).map(pa.struct),
        st.builds(lambda k, v: pa.map_(k, v), st.sampled_from([pa.string(), pa.int64()]), inner),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.builds(pa.field, names, types(), st.booleans()), min_size=1, max_size=5,
                unique_by=lambda f: f.name))
def test_what_list_prints_reads_back_equal(fields):
    schema = pa.schema(fields)
    assert parse_spec(format_spec(schema)).equals(schema), format_spec(schema)


@pytest.mark.parametrize("t", PRIMITIVES + [pa.list_(pa.string()), pa.struct([("a", pa.int64())]),
                                            pa.map_(pa.string(), pa.int64()), pa.large_list(pa.int32())])
def test_pyarrows_own_type_names_are_read(t):
    assert parse_type(str(t)) == t  # `decimal128(10, 2)`, `list<item: string>`, `timestamp[us, tz=UTC]`


def test_the_short_forms_still_work_and_tz_is_not_doubled():
    s = parse_spec("id:int64!,ts:timestamp[us, UTC],amount:decimal(10,2),tags:list<string>,d:date")
    assert s == pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.timestamp("us", tz="UTC")),
                           ("amount", pa.decimal128(10, 2)), ("tags", pa.list_(pa.string())), ("d", pa.date32())])
    assert "tz=tz=" not in format_spec(parse_spec(format_spec(s)))


@pytest.mark.parametrize("spec, words", [
    ("a:int64,a:string", "names column 'a' twice"),
    ("s:struct<x: int64, x: string>", "names column 'x' twice"),
    ("id:int65", "Unknown column type 'int65'"),
    ("ts:timestamp[xs]", "timestamp unit 'xs' is not one of s, ms, us, ns"),
    ("tags:list<int64", "expected '>'"),
    ("id", "expected ':'"),
    ("", "The schema is empty"),
])
def test_a_bad_schema_is_one_sentence_naming_the_mistake(spec, words):
    with pytest.raises(InvalidRequest, match=words.replace("(", r"\(").replace("[", r"\[")):
        parse_spec(spec)


def test_a_schema_on_the_wire_with_a_name_twice_is_refused():
    twice = pa.schema([("a", pa.int64()), ("a", pa.string())])
    with pytest.raises(InvalidRequest, match="push table 't' names column 'a' twice"):
        decode_schema(encode_schema(twice), "push table 't'")
