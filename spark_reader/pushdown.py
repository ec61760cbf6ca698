"""Spark's pushed filters as the server's `filter`: hints that prune, never filters Spark drops.

With `spark.sql.python.filterPushdown.enabled=true`, PySpark hands a reader the filters it could
push; flight-paimon keeps the ones the server can prune by (partitions, file and row-group
statistics) and returns every filter to Spark, which still applies them all. So a filter left out
here (a type or value the JSON command cannot carry exactly) only reads more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql import datasource as ds
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

# Types whose Spark and Paimon comparisons agree and whose values JSON carries exactly (no
# floating point: NaN orders differently; no dates, timestamps or decimals: not JSON values).
_EXACT = (BooleanType, ByteType, ShortType, IntegerType, LongType, StringType)
_OPS = {ds.EqualTo: "=", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=", ds.LessThan: "<",
        ds.LessThanOrEqual: "<="}


def conditions(filters: Iterable[ds.Filter], schema: StructType, skip: Iterable[str] = ()) -> tuple[tuple, ...]:
    """The filters the server can prune by, as `[column, op, value]` conditions (a conjunction,
    as Spark's list is); columns in `skip` (e.g. a changelog's row kind) are left to Spark."""
    types = {f.name: f.dataType for f in schema.fields if f.name not in set(skip)}
    out = []
    for f in filters:
        attribute = getattr(f, "attribute", ())
        if len(attribute) != 1 or not isinstance(types.get(attribute[0]), _EXACT):
            continue
        column, kind = attribute[0], types[attribute[0]]
        cond = _condition(f, column, lambda v, kind=kind: _fits(v, kind))
        if cond is not None:
            out.append(cond)
    return tuple(out)


def _condition(f: ds.Filter, column: str, fits: Callable[[object], bool]) -> tuple | None:
    if isinstance(f, ds.IsNull):
        return column, "is_null"
    if isinstance(f, ds.IsNotNull):
        return column, "is_not_null"
    if isinstance(f, ds.EqualNullSafe):  # <=> NULL is IS NULL; <=> v is = v (v not null)
        return (column, "is_null") if f.value is None else (column, "=", f.value) if fits(f.value) else None
    if isinstance(f, ds.In):  # a NULL in the list matches nothing
        values = [v for v in f.value if v is not None]
        return (column, "in", values) if values and all(fits(v) for v in values) else None
    op = _OPS.get(type(f))
    if op is not None and f.value is not None and fits(f.value):
        return column, op, f.value
    return None


def _fits(value, kind) -> bool:
    if isinstance(kind, BooleanType):
        return isinstance(value, bool)
    if isinstance(kind, StringType):
        return isinstance(value, str)
    return isinstance(value, int) and not isinstance(value, bool)


class hint:
    """A reader's `pushFilters` that PySpark's planner sees as the default one.

    PySpark 4.3 refuses every read of a source that overrides `pushFilters` unless
    `spark.sql.python.filterPushdown.enabled` is true (it checks the method's `__func__`); a data
    source cannot set that conf. These filters are hints Spark still applies, so ignoring them
    costs only the pruning: with the conf off reads work and read everything, with it on Spark
    calls this and the server prunes.
    """

    def __init__(self, fn):
        self.fn = fn

    def __get__(self, reader, owner=None):
        if reader is None:
            return self
        return _Bound(self.fn, reader)


class _Bound:
    def __init__(self, fn, reader):
        self.fn, self.reader = fn, reader
        self.__func__ = ds.DataSourceReader.pushFilters  # what PySpark's check compares with

    def __call__(self, filters):
        return self.fn(self.reader, filters)
