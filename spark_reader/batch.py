"""spark.read: Spark partitions planned once, endpoints planned by each task when it reads.

PySpark 4.3 plans a Python data source's partitions once per DataFrame and reuses them, with the
reader that planned them, for every later action on it (and a query with filters replaces them
with its own, which later queries without filters then reuse). So nothing a partition or this
reader holds may depend on one query: a partition is a slot (k of K), and each task plans the read
when it runs, so every action reads the table as it is then. The tasks of one action agree on the
snapshot through a pin (this planning's token and the action's SQL execution id): the server reads
a pin's first plan at the latest snapshot and every later plan of that pin at the same one.
Filters Spark pushes (spark.sql.python.filterPushdown.enabled) go to the server as pruning hints
that Spark still applies; a planning's filters would outlive its query, so the server prunes only
the reads it can tell are that query's (flight_server/paimon/guard.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from flight_server.wire import names
from flight_server.wire.requests import PaimonRequest
from spark_reader import push_range, pushdown
from spark_reader.flight_io import (
    EndpointPartition,
    call,
    connect,
    paimon_base,
    paimon_info,
    partitions_of,
    read_partition,
)
from spark_reader.options import Options


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark checks yielded batches against (nullability included)."""
    return to_arrow_schema(schema, timezone="UTC")


def paimon_command(opts: Options) -> PaimonRequest:
    """The server's request for a batch read of a Paimon table under the user's options."""
    request = replace(paimon_base(opts), snapshot=opts.snapshot_id)
    if opts.incremental_between:
        request = replace(request, from_snapshot=opts.incremental_between[0], to_snapshot=opts.incremental_between[1])
    return request


class Slot(InputPartition):
    """Spark partition k of K: endpoints k, k + K, k + 2K, ... of the plan its task makes."""

    def __init__(self, index: int, count: int, token: str, label: str):
        super().__init__(index)
        self.index, self.count, self.token, self.label = index, count, token, label


def running_action() -> str:
    """The running action: the same for every task (and retry) of one action, new for the next
    action on the same DataFrame."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # outside a Spark task (a direct call): one action per call
        return secrets.token_hex(4)
    execution = context.getLocalProperty("spark.sql.execution.id")
    return execution if execution is not None else f"stage-{context.stageId()}"


class BatchReader(DataSourceReader):
    """A Paimon table (slots over its endpoints, one per bucket or split group) or a push table's
    partitions (slot k is partition k, the range push_range.py bounds)."""

    def __init__(self, opts: Options, schema: StructType, relation: str = "direct"):
        self.opts = opts
        self.schema = arrow_schema(schema)
        self.spark_schema = schema
        self.relation = relation  # the DataFrame's load(): FlightPaimonDataSource.relation
        self.filter: tuple[tuple, ...] = ()

    def _push(self, filters):
        # Asked for by the read (PySpark 4.3 can hand a planning's filters to reads they were not
        # planned for: spark_reader/README.md); a changelog's -U/-D rows are left to Spark.
        if self.opts.table and self.opts.filter_pushdown and not (self.opts.changelog or self.opts.system):
            self.filter = pushdown.conditions(filters, self.spark_schema)
        return filters  # Spark applies every filter: the server's pruning only has to be a superset

    pushFilters = pushdown.hint(_push)

    def partitions(self) -> list[Slot]:
        # Planned now only to size the read (and refuse a bad one on the driver); each task plans again.
        token = secrets.token_hex(8)
        client = connect(self.opts)
        try:
            if self.opts.table:
                count = len(paimon_info(client, self.opts, self._request(token, None)).endpoints)
            else:
                count = len(call(self.opts, "lookup", client.info, self.opts.push).endpoints)
                push_range.check_batch(self.opts, count)
        finally:
            client.close()
        count = max(count, 1)
        return [Slot(k, count, token, f"{self.opts.target} slot {k} of {count}") for k in range(count)]

    def read(self, partition: Slot) -> Iterator[pa.RecordBatch]:
        for part in self._endpoints(partition):
            yield from read_partition(part, self.schema, self.opts.credentials)

    def _endpoints(self, slot: Slot) -> list[EndpointPartition]:
        client = connect(self.opts)
        try:
            if self.opts.table:
                parts = partitions_of(paimon_info(client, self.opts, self._request(slot.token, running_action())),
                                      self.opts)
                return parts[slot.index::slot.count]
            return self._push_partition(client, slot.index)
        finally:
            client.close()

    def _request(self, token: str, action: str | None) -> PaimonRequest:
        """The planner's sizing plan (`action` None: registers this planning's filter) or a task's
        plan for `action`, pinned to its snapshot, pruned by the filter if the server allows."""
        request = paimon_command(self.opts)
        if action is not None and request.snapshot is None and request.from_snapshot is None:
            request = replace(request, pin=f"{token}:{action}")
        if self.filter:
            guard = f"{self.relation}:{token}" + (f":{action}" if action is not None else "")
            request = replace(request, filter=self.filter, filter_guard=guard)
        return request

    def _push_partition(self, client, p: int) -> list[EndpointPartition]:
        """Partition p from startingOffsets to endingOffsets (push_range.py), resolved now, when the
        task reads: each action reads the partition as it stands then. It commits nothing, so a
        retried or speculative task, or the next action on the same DataFrame, reads the batches
        again (a batch read ends before Spark's job does, and Spark tells a Python source nothing
        of the job's end). A read to EOF frees batches for a producer waiting for room once it has
        caught up; a commit (a stream's, or the commit action) or a drain frees the rest."""
        name, opts = self.opts.push, self.opts
        at = {}  # startingTimestamp / endingTimestamp: the batch the server finds for each
        for key, ms in (("startingTimestamp", opts.starting_timestamp), ("endingTimestamp", opts.ending_timestamp)):
            if ms is not None:
                found = call(opts, names.OFFSETS, client.offsets, name, ms).get(str(p))
                at[key] = None if found is None else push_range.at_timestamp(opts, found, key)
        state = call(opts, names.OFFSETS, client.offsets, name).get(str(p))
        if state is None:
            return []
        start, end = push_range.batch_range(opts, p, state, at.get("startingTimestamp"), at.get("endingTimestamp"))
        if end == start:
            return []  # nothing to read: no endpoint (an open partition is not waited for)
        parts = partitions_of(call(self.opts, "planning", client.replay_info, name, p, start, end), self.opts)
        for part in parts:
            part.label = f"{self.opts.target} partition {p} batches [{start}, {'EOF' if end is None else end})"
        return parts
