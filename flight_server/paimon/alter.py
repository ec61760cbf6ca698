"""`alter_table`: Paimon's schema changes, each checked (as Java Paimon checks it) before pypaimon
sees them, then applied by pypaimon as one new schema.

pypaimon 2.1 checks most of what Java Paimon does, with the same reasons. What it lets through
and Java Paimon refuses is refused here with Java's reason (docs/protocol.md, "Schema evolution"):
renaming a primary-key column (Paimon 0.9: "Cannot drop/rename primary key"); a narrowing type
change (one that is not one of Paimon's implicit casts, `DataTypeCasts` without explicit casts, or
that lowers a precision, scale or length); a `bucket` change on a table with snapshots that
Paimon refuses (`checkAlterTableOption`, `checkResetTableOption`) or, from N to M buckets, that
needs a rescale this server cannot do; `path`; and a schema whose `bucket-key`, `sequence.field`
or `rowkind.field` names a column it no longer has (Paimon's schema validation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from flight_server.paimon import compat, create
from flight_server.paimon.compat import schema as paimon_schema
from flight_server.wire import names
from flight_server.wire.actions import CHANGE_KEYS, SchemaChange, TableAltered
from flight_server.wire.errors import InvalidRequest, NotFound
from flight_server.wire.schemas import loosened
from flight_server.wire.type_spec import format_spec, format_type, parse_type

BUCKET, BUCKET_KEY, SEQUENCE_FIELD, ROWKIND_FIELD, PATH = "bucket", "bucket-key", "sequence.field", "rowkind.field", "path"
NULL_TO_NOT_NULL = "alter-column-null-to-not-null.disabled"
# The options create.check_options looks at: an alter setting or removing one is checked as create_table is.
SERVER_OPTIONS = {"changelog-producer", "deletion-vectors.enabled", "deletion-vectors.merge-on-read", BUCKET, BUCKET_KEY}


def parse_changes(value, table: str) -> list[SchemaChange]:
    """The body's `changes`: a non-empty list of schema changes, each with the keys its kind takes."""
    if not isinstance(value, list) or not value:
        raise InvalidRequest(f"alter_table {table!r}: 'changes' must be a non-empty list of schema changes such as "
                             '{"change": "add_column", "column": "email", "type": "string"}.')
    out = []
    for i, raw in enumerate(value, 1):
        if not isinstance(raw, dict) or raw.get("change") not in CHANGE_KEYS:
            got = raw.get("change") if isinstance(raw, dict) else raw
            raise InvalidRequest(f"alter_table {table!r}: change {i} is {got!r}, not one of Paimon's schema changes; "
                                 f"set 'change' to one of {', '.join(CHANGE_KEYS)}.")
        kind = raw["change"]
        needs, may = CHANGE_KEYS[kind]
        unknown = sorted(set(raw) - {"change", *needs, *may})
        missing = [k for k in needs if raw.get(k) is None]
        if unknown or missing:
            what = f"takes no key {unknown[0]!r}" if unknown else f"needs {missing[0]!r}"
            raise InvalidRequest(f"alter_table {table!r}: change {i} ({kind}) {what}; it takes "
                                 f"{', '.join(needs + may)}.")
        change = SchemaChange.from_json(raw, names.ALTER_TABLE)
        for key in ("column", "type", "after", "new_name", "key", "comment", "value"):
            got = getattr(change, key)
            if got is not None and not (isinstance(got, str) and (got or key in ("comment", "value"))):
                raise InvalidRequest(f"alter_table {table!r}: change {i} ({kind}): {key!r} must be a "
                                     f"{'string' if key in ('comment', 'value') else 'non-empty string'}, got {got!r}.")
        for key in ("first", "nullable"):
            if getattr(change, key) is not None and not isinstance(getattr(change, key), bool):
                raise InvalidRequest(f"alter_table {table!r}: change {i} ({kind}): {key!r} must be true or false, "
                                     f"got {getattr(change, key)!r}.")
        if change.first and change.after is not None:
            raise InvalidRequest(f"alter_table {table!r}: change {i} (add_column {change.column!r}) takes 'after' or "
                                 "'first', not both.")
        out.append(change)
    return out


@dataclass
class _State:
    """The table as the changes so far leave it: its columns in order, keys and options."""

    table: str
    columns: list[pa.Field]
    primary_keys: list[str]
    partition_keys: list[str]
    options: dict[str, str]
    old_options: dict[str, str]
    has_snapshots: bool
    touched: set[str] = field(default_factory=set)  # options set or removed

    def names(self) -> list[str]:
        return [f.name for f in self.columns]

    def column(self, name: str, what: str) -> pa.Field:
        for f in self.columns:
            if f.name == name:
                return f
        raise self.refuse(what, f"Column {name} does not exist",
                          f"the table's columns are {', '.join(self.names())}")

    def refuse(self, what: str, reason: str, todo: str) -> InvalidRequest:
        return InvalidRequest(f"alter_table {self.table!r}: {what}: Paimon refuses it ({reason}); {todo}; nothing "
                              "was changed.", table=self.table)


def _field(change: SchemaChange, state: _State, what: str) -> pa.Field:
    """The change's `type` as the column's Arrow field (`!`: NOT NULL), and one Paimon has a type for."""
    text = change.type.strip()
    not_null = text.endswith("!")
    try:
        f = pa.field(change.column, parse_type(text[:-1] if not_null else text), not not_null)
    except InvalidRequest as e:
        raise InvalidRequest(f"alter_table {state.table!r}: {what}: {e}", table=state.table) from None
    try:
        paimon_schema.paimon_type(f)
    except ValueError:
        raise state.refuse(what, f"Paimon has no type for {f.type}", "use one of int8, int16, int32, int64, float, "
                           "double, decimal(P,S), bool, string, binary, fixed_size_binary[N], date32, timestamp[UNIT], "
                           "time64[us], list<T>, map<K, V>, struct<...>") from None
    return f


# Paimon's type roots of Arrow types, and its implicit casts (Java DataTypeCasts: target <- sources).
_INTS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")
_NUMERIC = (*_INTS, "FLOAT", "DOUBLE", "DECIMAL")
_IMPLICIT = {
    "CHAR": ("CHAR",), "VARCHAR": ("CHAR", "VARCHAR"), "BOOLEAN": ("BOOLEAN",),
    "BINARY": ("BINARY",), "VARBINARY": ("BINARY", "VARBINARY"), "DECIMAL": _NUMERIC,
    "TINYINT": _INTS[:1], "SMALLINT": _INTS[:2], "INTEGER": _INTS[:3], "BIGINT": _INTS,
    "FLOAT": (*_INTS, "FLOAT", "DECIMAL"), "DOUBLE": _NUMERIC,
    "DATE": ("DATE", "TIMESTAMP"), "TIME": ("TIME", "TIMESTAMP"),
    "TIMESTAMP": ("TIMESTAMP", "TIMESTAMP_LTZ"), "TIMESTAMP_LTZ": ("TIMESTAMP_LTZ", "TIMESTAMP"),
}
_INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19}
_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _root(t: pa.DataType) -> str | None:
    checks = ((pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"), (pa.types.is_int32, "INTEGER"),
              (pa.types.is_int64, "BIGINT"), (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE"),
              (pa.types.is_decimal, "DECIMAL"), (pa.types.is_boolean, "BOOLEAN"),
              (pa.types.is_fixed_size_binary, "BINARY"), (pa.types.is_date32, "DATE"), (pa.types.is_time, "TIME"))
    for check, root in checks:
        if check(t):
            return root
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_binary(t):
        return "VARBINARY"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is None else "TIMESTAMP_LTZ"
    return None  # constructed types: pypaimon takes only the same type (its own check)


def _narrowing(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether old -> new is not one of Paimon's implicit casts, or lowers a precision, scale or
    length, or drops a timestamp's date or time of day."""
    a, b = _root(old), _root(new)
    if a is None or b is None:
        return False
    if a not in _IMPLICIT.get(b, ()) or (a.startswith("TIMESTAMP") and b in ("DATE", "TIME")):
        return True
    if b == "DECIMAL":
        if a == "DECIMAL":
            return new.scale < old.scale or new.precision - new.scale < old.precision - old.scale
        return a in _INT_DIGITS and new.precision - new.scale < _INT_DIGITS[a]
    if a == b and a.startswith("TIMESTAMP"):
        return _UNIT_DIGITS[new.unit] < _UNIT_DIGITS[old.unit]
    if a == b == "TIME":
        return _UNIT_DIGITS[new.unit] < _UNIT_DIGITS[old.unit]
    if a == b == "BINARY":
        return new.byte_width < old.byte_width
    return False


def _check(change: SchemaChange, i: int, state: _State) -> pa.Field | None:
    """Check one change against the table as the earlier ones leave it, and apply it to `state`;
    the Arrow field of its type, where it has one."""
    kind, column = change.change, change.column
    what = f"change {i} ({kind} {column!r})" if column is not None else f"change {i} ({kind} {change.key!r})"
    keys = state.primary_keys + [k for k in state.partition_keys if k not in state.primary_keys]
    if kind == names.ADD_COLUMN:
        if column in state.names():
            raise state.refuse(what, f"Column {column} already exists", "choose another name, or drop it first")
        f = _field(change, state, what)
        if not f.nullable:
            raise state.refuse(what, f"Column {column} cannot specify NOT NULL in the table",
                               "add it without '!' (rows written before have no value for it)")
        if change.after is not None:
            state.column(change.after, what)
            at = state.names().index(change.after) + 1
        else:
            at = 0 if change.first else len(state.columns)
        state.columns.insert(at, f)
        return f
    if kind in (names.SET_OPTION, names.REMOVE_OPTION):
        _check_option(change, what, state)
        return None
    old = state.column(column, what)
    at = state.names().index(column)
    if kind == names.DROP_COLUMN:
        if column in keys:
            raise state.refuse(what, f"Cannot drop partition key or primary key: [{column}]",
                               "a table's keys stay; copy the table into a new one without it")
        state.columns.pop(at)
        if not state.columns:
            raise state.refuse(what, "Cannot drop all fields in table", "keep at least one column")
    elif kind == names.RENAME_COLUMN:
        if column in state.partition_keys:
            raise state.refuse(what, f"Cannot rename partition column: [{column}]", "a table's keys keep their names")
        if column in state.primary_keys:
            raise state.refuse(what, f"Cannot drop/rename primary key[{column}]", "a table's keys keep their names")
        if change.new_name in state.names():
            raise state.refuse(what, f"Column {change.new_name} already exists", "choose another new name")
        state.columns[at] = old.with_name(change.new_name)
        for option in (BUCKET_KEY, SEQUENCE_FIELD):  # pypaimon renames the column in these two options
            if option in state.options:
                state.options[option] = ",".join(change.new_name if c == column else c
                                                 for c in state.options[option].split(","))
    elif kind == names.UPDATE_COLUMN_TYPE:
        if column in state.partition_keys:
            raise state.refuse(what, f"Cannot update partition column: [{column}]", "a table's keys keep their types")
        if column in state.primary_keys:
            raise state.refuse(what, "Cannot update primary key", "a table's keys keep their types")
        f = _field(change, state, what)
        if _narrowing(old.type, f.type):
            old_t, new_t = paimon_schema.paimon_type(old.with_nullable(True)), paimon_schema.paimon_type(f.with_nullable(True))
            raise state.refuse(what, f"Column type {column}[{old_t}] cannot be converted to {new_t} without losing "
                               "information", "only widening changes are taken (Paimon's implicit casts, as with "
                               "disable-explicit-type-casting), e.g. int32 to int64 or decimal(10,2) to decimal(12,2); "
                               f"to change it otherwise, add a new column of type {format_type(f.type)} and write that")
        if not f.nullable:
            _not_null(old, what, state)
        state.columns[at] = f if not f.nullable else f.with_nullable(old.nullable)
        return f
    elif kind == names.UPDATE_COLUMN_NULLABILITY:
        if change.nullable and column in state.primary_keys:
            raise state.refuse(what, "Cannot change nullability of primary key", "a primary key stays NOT NULL")
        if not change.nullable:
            _not_null(old, what, state)
        state.columns[at] = old.with_nullable(change.nullable)
    return None


def _not_null(old: pa.Field, what: str, state: _State) -> None:
    """A nullable column made NOT NULL: Paimon refuses it unless the table allows it (its rows
    may hold nulls)."""
    if old.nullable and state.old_options.get(NULL_TO_NOT_NULL, "true").lower() != "false":
        raise state.refuse(what, f"Cannot update column type from nullable to non nullable for {old.name}",
                           f"set table option '{NULL_TO_NOT_NULL}' = 'false' first (in an earlier call) to allow it, "
                           "once the column holds no nulls")


def _check_option(change: SchemaChange, what: str, state: _State) -> None:
    key = change.key
    state.touched.add(key)
    if change.change == names.SET_OPTION:  # removing a misspelt option stays possible
        create.check_option_name(key, "alter_table", state.table, "Nothing was changed.")
    if key == PATH:
        raise state.refuse(what, "Change path is not supported yet", "a table stays where it was created")
    if key == BUCKET and state.has_snapshots:
        if change.change == names.REMOVE_OPTION:
            raise state.refuse(what, "Cannot reset bucket", "a table with snapshots keeps its bucket option")
        old, new = state.old_options.get(BUCKET, "-1"), change.value
        if not (is_int_text(old) and is_int_text(new)):
            raise state.refuse(what, f"option 'bucket' must be an integer, got {new!r}", "set a bucket count such as 4")
        old_n, new_n = int(old), int(new)
        if old_n != new_n:
            reason = ("Cannot change bucket when it is -1" if old_n == -1 else "Cannot change bucket to -1"
                      if new_n == -1 else "Cannot change bucket for postpone bucket tables" if old_n == -2 else
                      f"the table's files are laid out in {old_n} buckets, and writing it with {new_n} needs a "
                      "rescale first (INSERT OVERWRITE), which this server does not do")
            raise state.refuse(what, reason, "rescale it with Spark or Flink (Paimon's INSERT OVERWRITE), or copy "
                               "it into a new table with the bucket count wanted")
    if change.change == names.SET_OPTION:
        state.options[key] = change.value
    else:
        state.options.pop(key, None)


def is_int_text(text: str) -> bool:
    try:
        int(text)
        return True
    except ValueError:
        return False


def _check_schema(state: _State) -> None:
    """What Paimon's schema validation checks of the schema the changes leave: the columns its
    options name, and the server's own refusals of options (as create_table's)."""
    columns = set(state.names())
    for option, reason in ((BUCKET_KEY, "Field names {columns} should contains all bucket keys {value}"),
                           (SEQUENCE_FIELD, "Sequence field: '{missing}' can not be found in table schema"),
                           (ROWKIND_FIELD, "Rowkind field: '{missing}' can not be found in table schema")):
        value = state.options.get(option)
        missing = [c for c in (value or "").split(",") if c.strip() and c.strip() not in columns]
        if missing:
            raise state.refuse(f"option {option!r}", reason.format(columns=sorted(columns), value=value,
                                                                   missing=missing[0]),
                               f"keep column {missing[0]!r}, or change option {option!r} in the same call")
    if state.touched & SERVER_OPTIONS:
        try:
            create.check_options(state.options, bool(state.primary_keys), "alter_table", state.table)
        except InvalidRequest as e:
            raise _unchanged(e, state.table) from None


def _unchanged(e: InvalidRequest, table: str, prefix: str = "") -> InvalidRequest:
    """A refusal of the options the changes leave, as one sentence saying nothing was changed."""
    return InvalidRequest(f"{prefix}{e.message.rstrip('.')}; nothing was changed.", table=table)


def alter_table(catalog, table, name: str, raw_changes,
                check_options: Callable[[dict[str, str], bool], None] | None = None) -> TableAltered:
    """Check `raw_changes` against `table` (loaded from `catalog`), then apply them as one schema
    change; `check_options` checks the options the table would have (the maintenance they ask for)."""
    changes = parse_changes(raw_changes, name)
    options = paimon_schema.schema_options(table)
    state = _State(name, list(compat.arrow_schema(table)), list(table.primary_keys), list(table.partition_keys),
                   dict(options), options, compat.latest_snapshot_id(table) is not None)
    fields = [_check(change, i, state) for i, change in enumerate(changes, 1)]
    _check_schema(state)
    if state.touched and check_options is not None:
        try:
            check_options(state.options, bool(state.primary_keys))
        except InvalidRequest as e:
            raise _unchanged(e, name, f"alter_table {name!r}: ") from None
    try:
        paimon_schema.alter_table(catalog, name, list(zip(changes, fields)))
    except compat.NOT_FOUND_ERRORS:
        raise NotFound(f"Paimon table {name!r} does not exist; `flight_cli list` names the tables.", table=name) from None
    except paimon_schema.AlterRefused as e:
        reason = str(e).rstrip(".")
        raise InvalidRequest(f"alter_table {name!r}: Paimon refuses the changes ({reason}); fix or leave out that "
                             "change; nothing was changed.", table=name) from None
    altered = catalog.get_table(name)
    return TableAltered(name, paimon_schema.schema_id(altered), format_spec(compat.arrow_schema(altered)),
                        paimon_schema.column_comments(altered), paimon_schema.schema_options(altered))


MERGE_ATTEMPTS = 5  # schema changes raced and recomputed before a merge gives up


def merge_changes(table_schema: pa.Schema, stream: pa.Schema) -> list[dict]:
    """The `alter_table` changes that let `stream` write into a table of `table_schema`: each
    column the table lacks added (nullable, at the end), each column whose stream type is a
    widening Paimon allows widened; a narrower stream type is left for the write to refuse."""
    changes = []
    for f in stream:
        i = table_schema.get_field_index(f.name)
        if i < 0:
            changes.append({"change": "add_column", "column": f.name, "type": format_type(f.type)})
            continue
        old = table_schema[i]
        if loosened(pa.schema([old])).field(0).type.equals(loosened(pa.schema([f])).field(0).type):
            continue
        if not _narrowing(old.type, f.type):
            changes.append({"change": "update_column_type", "column": f.name,
                            "type": format_type(f.type) + ("" if old.nullable else "!")})
    return changes


def merge_schema(catalog, load: Callable[[], object], name: str, stream: pa.Schema,
                 check_options: Callable[[dict[str, str], bool], None] | None = None) -> int | None:
    """A write's `merge_schema`: the table altered so that `stream` writes into it (`merge_changes`),
    in one schema change, once however many producers race to: a change that lost the race (another
    producer's ALTER came first) is computed again on the table as it is now. Returns the new
    schema id, or None when the table needed no change."""
    tried: list[dict] | None = None
    refused = InvalidRequest(f"the changes kept racing other writers' ({MERGE_ATTEMPTS} attempts); write again")
    for _ in range(MERGE_ATTEMPTS):
        table = load()
        changes = merge_changes(compat.arrow_schema(table), stream)
        if not changes:
            return None
        if changes == tried:  # nothing raced: the refusal is the table's answer
            break
        tried = changes
        try:
            return alter_table(catalog, table, name, changes, check_options).schema_id
        except InvalidRequest as e:
            refused = e
    raise InvalidRequest(f"merge_schema into Paimon table {name!r}: {refused.message}", table=name) from None
