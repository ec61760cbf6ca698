"""The `name:type,...` schema text of flight_cli's --schema and `list`: one grammar both ways.

`format_spec` writes a schema so that `parse_spec` reads it back equal, and `parse_spec` also
reads pyarrow's own type names (`str(pa_type)`: `decimal128(10, 2)`, `list<item: string>`,
`timestamp[us, tz=UTC]`, `date32[day]`, `struct<a: int64, b: string>`, `map<string, int64>`),
the short forms (`decimal(10,2)`, `list<int64>`, `timestamp[us, UTC]`), `!` after a type for
NOT NULL (or pyarrow's ` not null`), and a name in backquotes where it holds `,` `:` `` ` `` or
surrounding spaces. Column names must be unique, at every level.
"""

from __future__ import annotations

import re

import pyarrow as pa

from flight_server.wire.errors import InvalidRequest

_SIMPLE = {
    "bool": pa.bool_(), "boolean": pa.bool_(), "null": pa.null(),
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "halffloat": pa.float16(), "float16": pa.float16(),
    "float": pa.float32(), "float32": pa.float32(), "double": pa.float64(), "float64": pa.float64(),
    "string": pa.string(), "utf8": pa.string(), "large_string": pa.large_string(), "large_utf8": pa.large_string(),
    "binary": pa.binary(), "large_binary": pa.large_binary(),
    "date32": pa.date32(), "date32[day]": pa.date32(), "date": pa.date32(), "date64": pa.date64(),
    "date64[ms]": pa.date64(),
}
_UNITS = {"timestamp": ("s", "ms", "us", "ns"), "duration": ("s", "ms", "us", "ns"), "time32": ("s", "ms"),
          "time64": ("us", "ns")}
_KNOWN = ("bool, int8..int64, uint8..uint64, float, double, string, binary, date32, timestamp[us] or "
          "timestamp[us, tz=UTC], time64[us], duration[ms], decimal(P,S), fixed_size_binary[N], list<TYPE>, "
          "struct<NAME: TYPE, ...>, map<KEY, VALUE>")


class _Reader:
    """A cursor over the text, reading one type or field at a time (recursive descent)."""

    def __init__(self, text: str):
        self.text, self.pos = text, 0

    def error(self, why: str) -> InvalidRequest:
        return InvalidRequest(f"Schema {self.text!r}: {why} at position {self.pos}; write NAME:TYPE,... such as "
                              "'id:int64!,ts:timestamp[us],tags:list<string>' (! after a type: not null).")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def take(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.take(token):
            raise self.error(f"expected {token!r}")

    def word(self) -> str:
        self.skip()
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.text, self.pos)
        if not m:
            raise self.error("expected a type name")
        self.pos = m.end()
        return m.group()

    def number(self) -> int:
        self.skip()
        m = re.compile(r"[0-9]+").match(self.text, self.pos)
        if not m:
            raise self.error("expected a number")
        self.pos = m.end()
        return int(m.group())

    def name(self, stops: str) -> str:
        """A field name: `quoted` (`` `` `` for a backquote), or the text up to the next ':'."""
        self.skip()
        if self.take("`"):
            out = []
            while True:
                end = self.text.find("`", self.pos)
                if end < 0:
                    raise self.error("a backquoted name is not closed")
                out.append(self.text[self.pos:end])
                self.pos = end + 1
                if not self.text.startswith("`", self.pos):
                    return "`".join(out)
                self.pos += 1
        end = self.pos
        while end < len(self.text) and self.text[end] not in ":" + stops:
            end += 1
        name = self.text[self.pos:end].strip()
        if not name:
            raise self.error("a column has no name")
        self.pos = end
        return name

    def field(self, stops: str) -> pa.Field:
        name = self.name(stops)
        self.expect(":")
        t = self.type()
        not_null = self.take("!") or self.take("not null")
        return pa.field(name, t, nullable=not not_null)

    def fields(self, close: str) -> list[pa.Field]:
        out = [self.field("," + close)]
        while self.take(","):
            out.append(self.field("," + close))
        _unique([f.name for f in out], self)
        return out

    def element(self, close: str) -> pa.Field:
        """`list<item: T>` (pyarrow's), or `list<T>`: a named element only when a ':' follows a word."""
        self.skip()
        if re.compile(r"\s*(`(?:[^`]|``)*`|[^<>\[\](),:`]+):").match(self.text, self.pos):
            return self.field(close)
        return pa.field("item", self.type(), nullable=not (self.take("!") or self.take("not null")))

    def type(self) -> pa.DataType:
        start = self.pos
        word = self.word()
        if word in _UNITS:
            if not self.take("["):
                if word == "timestamp":
                    raise self.error("timestamp needs a unit: timestamp[us]")
                raise self.error(f"{word} needs a unit: {word}[{_UNITS[word][-1]}]")
            self.skip()
            unit = self.word()
            if unit not in _UNITS[word]:
                raise self.error(f"{word} unit {unit!r} is not one of {', '.join(_UNITS[word])}")
            tz = None
            if word == "timestamp" and self.take(","):
                self.take("tz=")
                self.skip()
                end = self.text.find("]", self.pos)
                if end < 0:
                    raise self.error("expected ']'")
                tz, self.pos = self.text[self.pos:end].strip(), end
            self.expect("]")
            return {"timestamp": lambda: pa.timestamp(unit, tz=tz), "duration": lambda: pa.duration(unit),
                    "time32": lambda: pa.time32(unit), "time64": lambda: pa.time64(unit)}[word]()
        if word in ("decimal", "decimal128", "decimal256"):
            self.expect("(")
            precision = self.number()
            self.expect(",")
            scale = self.number()
            self.expect(")")
            make = pa.decimal256 if word == "decimal256" or (word == "decimal" and precision > 38) else pa.decimal128
            try:
                return make(precision, scale)
            except (ValueError, pa.ArrowException) as e:
                raise self.error(f"{word}({precision}, {scale}) is not a decimal ({e})") from None
        if word == "fixed_size_binary":
            self.expect("[")
            width = self.number()
            self.expect("]")
            return pa.binary(width)
        if word in ("list", "large_list"):
            self.expect("<")
            item = self.element(">")
            self.expect(">")
            return (pa.list_ if word == "list" else pa.large_list)(item)
        if word == "struct":
            self.expect("<")
            fields = [] if self.take(">") else self.fields(">")
            if fields:
                self.expect(">")
            return pa.struct(fields)
        if word == "map":
            self.expect("<")
            key = self.type()
            self.expect(",")
            value = self.element(">")
            self.expect(">")
            return pa.map_(key, value)
        if self.text.startswith("[day]", self.pos) or self.text.startswith("[ms]", self.pos):
            self.pos = self.text.index("]", self.pos) + 1  # date32[day], date64[ms]
        name = self.text[start:self.pos].strip()
        if name in _SIMPLE:
            return _SIMPLE[name]
        self.pos = start
        raise InvalidRequest(f"Unknown column type {name!r}; use one of {_KNOWN}.")


def _unique(names: list[str], reader: _Reader) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise InvalidRequest(f"Schema {reader.text!r} names column {n!r} twice; column names must be unique.")
        seen.add(n)


def parse_type(text: str) -> pa.DataType:
    """One type: `int64`, `timestamp[us, tz=UTC]`, `decimal(10,2)`, `list<item: string>`, ..."""
    reader = _Reader(text.strip())
    t = reader.type()
    reader.skip()
    if reader.pos != len(reader.text):
        raise reader.error("unexpected text after the type")
    return t


def parse_spec(spec: str) -> pa.Schema:
    """`id:int64!,name:string,ts:timestamp[us]` (and what `format_spec` writes) as a schema."""
    reader = _Reader(spec.strip().rstrip(","))
    if not reader.text:
        raise InvalidRequest("The schema is empty; name the columns, e.g. 'id:int64!,name:string'.")
    fields = reader.fields("")
    reader.skip()
    if reader.pos != len(reader.text):
        raise reader.error("unexpected text after a column")
    return pa.schema(fields)


def _name(name: str) -> str:
    plain = name and name == name.strip() and not re.search(r"[,:`<>\[\]()!]", name)
    return name if plain else "`" + name.replace("`", "``") + "`"


def format_type(t: pa.DataType) -> str:
    """A type as `parse_type` reads it back (pyarrow's names; nested fields with their names)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{'list' if pa.types.is_list(t) else 'large_list'}<{format_field(t.value_field, ': ')}>"
    if pa.types.is_struct(t):
        return f"struct<{', '.join(format_field(t.field(i), ': ') for i in range(t.num_fields))}>"
    if pa.types.is_map(t):
        return f"map<{format_type(t.key_type)}, {format_field(t.item_field, ': ')}>"
    return str(t)


def format_field(f: pa.Field, sep: str = ":") -> str:
    return f"{_name(f.name)}{sep}{format_type(f.type)}{'' if f.nullable else '!'}"


def format_spec(schema: pa.Schema) -> str:
    """`id:int64!, name:string`: what --schema takes, for `list` to print."""
    return ", ".join(format_field(f) for f in schema)
