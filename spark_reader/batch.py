"""spark.read: one Spark partition per FlightInfo endpoint, filters pushed to the server."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader, EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull,
    LessThan, LessThanOrEqual, Not,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from flight_server.wire import names
from spark_reader.flight_io import (
    EndpointPartition, call, connect, paimon_base, paimon_info, partitions_of, read_partition,
)
from spark_reader.options import Options

_OPS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
_JSON_SCALARS = (bool, int, float, str)


def server_filter(f: Filter) -> list | None:
    """The server's `[column, op, value]` for a Spark filter, or None when it cannot be sent.

    Only plain top-level columns and JSON scalars travel: dates, decimals and nested fields stay
    with Spark rather than risk a different comparison on the server.
    """
    if isinstance(f, Not):
        inner = server_filter(f.child) if isinstance(f.child, EqualTo) else None
        return None if inner is None else [inner[0], "!=", inner[2]]
    column = getattr(f, "attribute", None)
    if not column or len(column) != 1:
        return None
    name = column[0]
    if type(f) in _OPS and isinstance(f.value, _JSON_SCALARS):
        return [name, _OPS[type(f)], f.value]
    if isinstance(f, In) and f.value and all(isinstance(v, _JSON_SCALARS) for v in f.value):
        return [name, "in", list(f.value)]
    if isinstance(f, IsNull):
        return [name, "is_null", None]
    if isinstance(f, IsNotNull):
        return [name, "is_not_null", None]
    return None


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark checks yielded batches against (nullability included)."""
    return to_arrow_schema(schema, timezone="UTC")


def paimon_command(opts: Options, filters: list) -> dict:
    """The server command for a batch read of a Paimon table under the user's options."""
    command = paimon_base(opts)
    if opts.snapshot_id is not None:
        command[names.SNAPSHOT] = opts.snapshot_id
    if opts.incremental_between:
        command[names.FROM_SNAPSHOT], command[names.TO_SNAPSHOT] = opts.incremental_between
    if filters:
        command["filter"] = filters
    return command


class BatchReader(DataSourceReader):
    """Plans a Paimon scan (one endpoint per bucket) or a push table's drain (one per partition)."""

    def __init__(self, opts: Options, schema: StructType):
        self.opts = opts
        self.schema = arrow_schema(schema)
        self.filters: list[list] = []

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        if self.opts.table:
            for f in filters:
                converted = server_filter(f)
                if converted is not None:
                    self.filters.append(converted)
        # Every filter is also handed back: the server's filter cuts what crosses the wire, and
        # Spark re-checking rows keeps results exact should a server filter only prune files.
        return filters

    def partitions(self) -> list[EndpointPartition]:
        client = connect(self.opts)
        try:
            if self.opts.table:
                parts = partitions_of(paimon_info(client, self.opts, paimon_command(self.opts, self.filters)), self.opts)
            else:
                parts = self._push_partitions(client)
        finally:
            client.close()
        # Spark needs at least one partition; an empty table reads as one empty partition.
        return parts or [EndpointPartition(b"", (), f"{self.opts.target} (empty)")]

    def _push_partitions(self, client) -> list[EndpointPartition]:
        """Each partition from its first uncommitted batch to EOF, committing nothing: a retried or
        speculative task, or the next action on the same DataFrame, reads the same batches again
        (a batch read ends before Spark's job does, and Spark tells a Python source nothing of the
        job's end). The server frees batches for a producer waiting for room once the reader has
        caught up; a commit (a stream's, or the commit action) or a drain frees the rest."""
        name = self.opts.push
        stats = call(self.opts, names.STATS, client.stats, name)[names.PUSH][name]["partitions"]
        parts = []
        for p, state in sorted(stats.items(), key=lambda kv: int(kv[0])):
            start = state["committed"]
            info = call(self.opts, "planning", client.replay_info, name, int(p), start, None)
            for part in partitions_of(info, self.opts):
                part.label = f"{self.opts.target} partition {p} from batch {start}"
                parts.append(part)
        return parts

    def read(self, partition: EndpointPartition) -> Iterator[pa.RecordBatch]:
        if partition.ticket:
            yield from read_partition(partition, self.schema, self.opts.credentials)
