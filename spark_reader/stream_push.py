"""spark.readStream over a push table: offsets are per-partition sequence numbers {"P": seq}.

A micro-batch [start, end) reads replay tickets, which the server keeps readable until a commit
passes `end`, so a re-run batch after a crash reads the same batches again. The server frees a
partition's batches only when Spark says they are processed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from flight_server.wire import names
from spark_reader.batch import arrow_schema
from spark_reader.flight_io import EndpointPartition, SourceError, call, connect, partitions_of, read_partition
from spark_reader.options import Options


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

    def _partitions(self) -> dict[str, dict]:
        stats = call(self.opts, names.STATS, self._c().stats, self.opts.push)
        try:
            return stats[names.PUSH][self.opts.push]["partitions"]
        except KeyError:
            raise SourceError(f"The server's stats lack {self.opts.target}; was it dropped?") from None

    def initialOffset(self) -> dict:
        # A new query starts where the last consumer's commits left off: nothing committed is
        # lost, since it was processed; everything uncommitted is still on the server.
        return {p: s["committed"] for p, s in self._partitions().items()}

    def latestOffset(self, start: dict, limit: ReadLimit = ReadAllAvailable()) -> dict:
        # Spark asks for the next offset only after the batch ending at `start` is in its commit
        # log, and calls commit() only once a next batch exists. Committing `start` here too
        # frees a full partition, whose producer would otherwise wait forever for that batch.
        self._commit(start)
        latest = {p: s["next_seq"] for p, s in self._partitions().items()}
        if self._target is not None:
            latest = {p: min(seq, self._target.get(p, seq)) for p, seq in latest.items()}
        return {p: max(seq, start.get(p, 0)) for p, seq in latest.items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {p: s["next_seq"] for p, s in self._partitions().items()}

    def partitions(self, start: dict, end: dict) -> list[EndpointPartition]:
        parts = []
        for p, stop in sorted(end.items(), key=lambda kv: int(kv[0])):
            begin = start.get(p, 0)
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

    def _commit(self, offsets: dict) -> None:
        if offsets:
            call(self.opts, names.COMMIT, self._c().commit, self.opts.push, {int(p): s for p, s in offsets.items()})

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
