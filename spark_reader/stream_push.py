"""spark.readStream over a push table: offsets are per-partition sequence numbers {"P": seq}.

A micro-batch [start, end) reads replay tickets, which the server keeps readable until a commit
passes `end`, so a re-run batch after a crash reads the same batches again. The server frees a
partition's batches only when Spark says they are processed.

Options as Spark's Kafka source names them: `startingOffsets` (earliest: the oldest batch still
held; latest: the next appended, the held ones freed unread; or '{"P": seq}', -2 and -1 as Kafka's),
`startingTimestamp` (each partition's first batch the server appended at or after then),
`maxOffsetsPerTrigger` (batches per micro-batch, over all partitions) and `failOnDataLoss`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from flight_server.wire import names
from flight_server.wire.actions import PartitionOffsets
from spark_reader import push_range
from spark_reader.batch import arrow_schema
from spark_reader.flight_io import (
    EndpointPartition,
    SourceError,
    call,
    connect,
    partitions_of,
    read_partition,
)
from spark_reader.options import EARLIEST, LATEST, Options

log = logging.getLogger(__name__)  # runs inside Spark: Spark's application configures logging


class PushStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over a push table's partitions, committed back to the server by Spark."""

    def __init__(self, opts: Options, schema: StructType):
        self.opts = opts
        self.schema = arrow_schema(schema)
        self._client = None  # opened lazily: this object is pickled before the planner uses it
        self._target: dict[str, int] | None = None  # the AvailableNow end, fixed at its start

    def _c(self):
        if self._client is None:
            self._client = connect(self.opts)
        return self._client

    def _partitions(self) -> dict[str, PartitionOffsets]:
        """Where each partition stands now (the server's `offsets` action), by partition number."""
        return call(self.opts, names.OFFSETS, self._c().offsets, self.opts.push)

    def initialOffset(self) -> dict:
        # By default a new query starts where the last consumer's commits left off: nothing
        # committed is lost, since it was processed; everything uncommitted is still on the server.
        at = self.opts.starting_timestamp
        found = None if at is None else call(self.opts, names.OFFSETS, self._c().offsets, self.opts.push, at)
        parts = self._partitions()  # after `found`: no partition stands before what it found
        start = self.opts.starting_offsets
        if start == "earliest" and found is None:
            return {p: s.committed for p, s in parts.items()}
        chosen = {p: s.next_seq for p, s in parts.items()} if start == "latest" else start
        if found is not None:  # each partition's first batch appended at or after startingTimestamp
            chosen = {p: push_range.at_timestamp(self.opts, s, "startingTimestamp") for p, s in found.items()}
        chosen = {p: {EARLIEST: parts[p].committed, LATEST: parts[p].next_seq}.get(seq, seq) if p in parts else seq
                  for p, seq in chosen.items()}  # Kafka's -2 and -1
        unknown = sorted(set(chosen) - set(parts), key=int)
        if unknown:
            raise SourceError(f"Option 'startingOffsets' names partition(s) {', '.join(unknown)} that "
                              f"{self.opts.target} does not have (it has {len(parts)}).")
        offsets = {p: chosen.get(p, s.committed) for p, s in parts.items()}
        offsets = {p: self._readable_from(p, seq, parts) for p, seq in offsets.items()}
        self._commit(offsets, discard=True)  # the held batches before the start are not this query's: free them
        return offsets

    def latestOffset(self, start: dict, limit: ReadLimit = ReadAllAvailable()) -> dict:  # noqa: B008 - pyspark's own signature
        # Spark asks for the next offset only after the batch ending at `start` is in its commit
        # log, and calls commit() only once a next batch exists. Committing `start` here too
        # frees a full partition, whose producer would otherwise wait forever for that batch.
        parts = self._partitions()
        start = {p: self._readable_from(p, seq, parts) for p, seq in start.items()}
        self._commit({p: seq for p, seq in start.items() if p in parts})
        latest = {p: s.next_seq for p, s in parts.items()}
        if self._target is not None:
            latest = {p: min(seq, self._target.get(p, seq)) for p, seq in latest.items()}
        latest = {p: max(seq, start.get(p, 0)) for p, seq in latest.items()}
        if self.opts.max_offsets_per_trigger:
            latest = _within(start, latest, self.opts.max_offsets_per_trigger)
        return latest

    def _readable_from(self, p: str, seq: int, parts: dict[str, PartitionOffsets]) -> int:
        """Where partition `p` can be read from when Spark's offset says `seq`: `seq`, unless the
        server no longer holds it (another consumer committed past it, or the table was registered
        anew): then failOnDataLoss decides between an error and going on from what is held."""
        state = parts.get(p)
        if state is None:
            lost = f"partition {p} no longer exists"
        elif seq < state.committed:
            lost = (f"batches [{seq}, {state.committed}) of partition {p} were committed by another "
                    "consumer and freed")
        elif seq > state.next_seq:
            lost = (f"partition {p} holds batches only up to {state.next_seq}, behind this query's offset "
                    f"{seq}: the table was registered anew (a server restart?)")
        else:
            return seq
        if self.opts.fail_on_data_loss:
            raise SourceError(f"{self.opts.target}: {lost}, so this query cannot read them. Start a new "
                              "checkpoint, or set .option('failOnDataLoss', 'false') to go on from what is held.")
        log.warning("push_stream_data_loss table=%s partition=%s detail=%s", self.opts.push, p, lost)
        return 0 if state is None else state.committed

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {p: s.next_seq for p, s in self._partitions().items()}

    def partitions(self, start: dict, end: dict) -> list[EndpointPartition]:
        parts, held = [], None
        for p, stop in sorted(end.items(), key=lambda kv: int(kv[0])):
            begin = start.get(p, 0)
            if not self.opts.fail_on_data_loss:  # start may be behind what is held (see latestOffset)
                held = held or self._partitions()
                begin = self._readable_from(p, begin, held) if p in held else stop
            if stop > begin:
                info = call(self.opts, "replay planning", self._c().replay_info, self.opts.push, int(p), begin, stop)
                for part in partitions_of(info, self.opts):
                    part.label = f"{self.opts.target} partition {p} batches [{begin}, {stop})"
                    parts.append(part)
        return parts

    def read(self, partition: EndpointPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.schema, self.opts.credentials)

    def commit(self, end: dict) -> None:
        self._commit(end)

    def _commit(self, offsets: dict, discard: bool = False) -> None:
        if offsets:
            call(self.opts, names.COMMIT, self._c().commit, self.opts.push, {int(p): s for p, s in offsets.items()},
                 discard)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _within(start: dict, latest: dict, budget: int) -> dict:
    """maxOffsetsPerTrigger: at most `budget` batches in all, split over the partitions in
    proportion to what each has waiting (as Spark's Kafka source splits records); at least one."""
    waiting = {p: latest[p] - start.get(p, 0) for p in latest}
    total = sum(waiting.values())
    if total <= budget:
        return latest
    share = {p: (n * budget) // total for p, n in waiting.items()}
    for p in sorted(waiting, key=lambda q: waiting[q] - share[q], reverse=True)[: budget - sum(share.values())]:
        share[p] += 1  # the rounding remainder goes to the partitions left furthest behind
    return {p: start.get(p, 0) + share[p] for p in latest}
