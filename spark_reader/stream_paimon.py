"""spark.readStream over a Paimon table: offsets are snapshot ids, one delta read per micro-batch.

Offset N means "every snapshot up to N is delivered". A micro-batch (A, B] reads the delta of
snapshots A+1..B (`from_snapshot`/`to_snapshot`), which is immutable, so re-running any batch
from the checkpoint reads the same rows. In the "-full" scan modes the first batch, which starts
at offset 0, is instead a full scan pinned at its end snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxFiles, ReadMaxRows, SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from flight_server.wire import names
from spark_reader.batch import arrow_schema
from spark_reader.flight_io import EndpointPartition, call, connect, paimon_info, partitions_of, read_partition
from spark_reader.options import Options


def offset(snapshot: int) -> dict:
    """The stream offset: every snapshot up to `snapshot` is delivered."""
    return {names.SNAPSHOT: snapshot}


_MAX_ROW_PROBES = 1000  # snapshots inspected per trigger when admitting by row count


class PaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of Paimon snapshots with admission control and Trigger.AvailableNow."""

    def __init__(self, opts: Options, schema: StructType):
        self.opts = opts
        self.schema = arrow_schema(schema)
        self.full_start = opts.scan_mode.endswith("-full")
        self._client = None  # opened lazily: this object is pickled before the planner uses it
        self._target: int | None = None  # the AvailableNow end, fixed at its start

    def _c(self):
        if self._client is None:
            self._client = connect(self.opts)
        return self._client

    def _latest(self) -> int:
        result = call(self.opts, names.LATEST_SNAPSHOT, self._c().action, names.LATEST_SNAPSHOT,
                      {names.TABLE: self.opts.table})
        return result.get("snapshot_id") or 0

    def initialOffset(self) -> dict:
        if self.opts.consumer_id:
            # Like Paimon's connector: a consumer's recorded progress beats the scan mode.
            body = {names.TABLE: self.opts.table, names.CONSUMER_ID: self.opts.consumer_id}
            progress = call(self.opts, names.CONSUMER_PROGRESS, self._c().action, names.CONSUMER_PROGRESS, body)
            if progress.get("next_snapshot"):
                return offset(progress["next_snapshot"] - 1)
        mode = self.opts.scan_mode
        if mode == "latest":
            return offset(self._latest())
        if mode == "from-snapshot":
            return offset(max(self.opts.snapshot_id - 1, 0))
        return offset(0)  # the "-full" modes: the first batch is a full scan

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark's Python sources accept only built-in limits; a snapshot plays the role of a file.
        if self.opts.max_rows_per_trigger:
            return ReadMaxRows(self.opts.max_rows_per_trigger)
        if self.opts.max_snapshots_per_trigger:
            return ReadMaxFiles(self.opts.max_snapshots_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit = ReadAllAvailable()) -> dict:
        begin = start[names.SNAPSHOT]
        latest = self._latest() if self._target is None else self._target
        if self.full_start and begin == 0:
            # A full scan cannot be split: it ends at the latest snapshot, or at the one named.
            if self.opts.scan_mode == "from-snapshot-full":
                pinned = self.opts.snapshot_id
                return offset(pinned) if 0 < pinned <= self._latest() else start
            return offset(latest) if latest > 0 else start
        if latest <= begin:
            return start
        if isinstance(limit, ReadAllAvailable):
            return offset(latest)
        end = latest
        snapshots = self.opts.max_snapshots_per_trigger
        if isinstance(limit, ReadMaxFiles):
            snapshots = limit.max_files
        if snapshots:
            end = min(end, begin + snapshots)
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if rows:
            end = self._admit_rows(begin, end, rows)
        return offset(end)

    def _admit_rows(self, begin: int, end: int, max_rows: int) -> int:
        """The last snapshot whose deltas since `begin` fit in `max_rows` (at least one snapshot)."""
        admitted, total = begin + 1, 0
        for snap in range(begin + 1, min(end, begin + _MAX_ROW_PROBES) + 1):
            info = paimon_info(self._c(), self.opts, {names.FROM_SNAPSHOT: snap - 1, names.TO_SNAPSHOT: snap})
            if info.total_records < 0:
                return admitted  # the server does not count rows: admit one snapshot at a time
            total += info.total_records
            if total > max_rows and snap > begin + 1:
                break
            admitted = snap
        return admitted

    def command(self, start: int, end: int) -> dict:
        """The server command for the batch (start, end]: deterministic for any replay."""
        if self.full_start and start == 0:
            return {names.SNAPSHOT: end}
        return {names.FROM_SNAPSHOT: start, names.TO_SNAPSHOT: end}

    def partitions(self, start: dict, end: dict) -> list[EndpointPartition]:
        a, b = start[names.SNAPSHOT], end[names.SNAPSHOT]
        if b <= a:
            return []
        return partitions_of(paimon_info(self._c(), self.opts, self.command(a, b)), self.opts)

    def read(self, partition: EndpointPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.schema, self.opts.credentials)

    def commit(self, end: dict) -> None:
        # Offsets live in Spark's checkpoint; a consumer id also records them in the table, so
        # Paimon keeps those snapshots and a query without the checkpoint resumes there.
        if self.opts.consumer_id:
            body = {names.TABLE: self.opts.table, names.CONSUMER_ID: self.opts.consumer_id,
                    "next_snapshot": end[names.SNAPSHOT] + 1}
            call(self.opts, names.CONSUMER_COMMIT, self._c().action, names.CONSUMER_COMMIT, body)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
