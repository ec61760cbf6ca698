"""spark.readStream over a Paimon table: offsets are snapshot ids, one delta read per micro-batch.

Offset N means "every snapshot up to N is delivered". A micro-batch (A, B] reads the delta of
snapshots A+1..B (`from_snapshot`/`to_snapshot`), which is immutable, so re-running any batch
from the checkpoint reads the same rows. In the "-full" scan modes the first batch, which starts
at offset 0, is instead a full scan pinned at its end snapshot.

A query keeps the columns the table had when it was defined (`load()`). A micro-batch planned
after the table's columns changed (an ALTER TABLE: a column added, renamed, dropped or retyped)
stops the query with an error saying so, before it reads anything of that batch; the query
restarted from its checkpoint reads the table's new columns from that batch on (every snapshot
read with the table's current schema, as Paimon reads old files), so nothing is lost or read
twice. As Delta's and Paimon's own Spark sources: a restart picks the new schema up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
import tenacity
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from flight_server.wire import messages, names
from flight_server.wire.requests import PaimonRequest
from spark_reader.batch import arrow_schema
from spark_reader.flight_io import (
    EndpointPartition,
    SourceError,
    call,
    connect,
    paimon_base,
    paimon_info,
    partitions_of,
    read_partition,
    spark_schema,
)
from spark_reader.options import Options


def offset(snapshot: int) -> dict:
    """The stream offset: every snapshot up to `snapshot` is delivered."""
    return {names.SNAPSHOT: snapshot}


_PROTECT_ATTEMPTS = 5  # a full scan's snapshot chosen again after it expired before it was recorded
_MAX_PROBES = 1000  # snapshots inspected per trigger when admitting by rows, bytes or files
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # as Spark's Kafka source's maxTriggerDelay


class _Expired(SourceError):
    """The full scan's snapshot expired before the consumer recorded it: chosen again."""


def _expired(error: BaseException) -> bool:
    return isinstance(error, SourceError) and "expired" in str(error)


@contextlib.contextmanager
def expired_means_new_checkpoint(opts: Options):
    """A batch whose snapshots expired can never be read again from this checkpoint: say what to do."""
    try:
        yield
    except SourceError as e:
        if "expired" not in str(e):
            raise
        keep = ("its consumer kept only what it had recorded" if opts.consumer_id else
                "set .option('consumer-id', ID) so expiry keeps what the stream has yet to read")
        raise SourceError(
            f"{str(e).rstrip('.')}. The stream cannot go on from its checkpoint: start it on a new checkpointLocation (scan.mode "
            f"'latest-full' reads the table as it is now){' under a new consumer-id' if opts.consumer_id else ''}; "
            f"to keep this from happening, {keep}, or raise snapshot.time-retained.") from None


class PaimonStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of Paimon snapshots with admission control and Trigger.AvailableNow."""

    def __init__(self, opts: Options, schema: StructType, source: StructType | None = None):
        self.opts = opts
        self.schema = arrow_schema(schema)
        self.source = source  # the table's columns when the query was defined: a change stops it
        self.full_start = opts.scan_mode.endswith("-full")
        self._client = None  # opened lazily: this object is pickled before the planner uses it
        self._target: int | None = None  # the AvailableNow end, fixed at its start
        self._initial: dict | None = None  # the start offset, as first answered
        self._recorded: int | None = None  # the next snapshot last recorded as the consumer's (consumer-id)
        self._last_batch: float | None = None  # when the last micro-batch was admitted (minRowsPerTrigger)

    def _c(self):
        if self._client is None:
            self._client = connect(self.opts)
        return self._client

    def _latest(self) -> int:
        return call(self.opts, names.LATEST_SNAPSHOT, self._c().latest_snapshot, self.opts.table).snapshot_id or 0

    def initialOffset(self) -> dict:
        # Once: Spark may ask again after the first batch's consumer progress is recorded, which
        # must not move the start it already planned from.
        if self._initial is None:
            self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> dict:
        if self.opts.consumer_id:
            # Like Paimon's connector: a consumer's recorded progress beats the scan mode.
            progress = call(self.opts, names.CONSUMER_PROGRESS, self._c().consumer_progress, self.opts.table,
                            self.opts.consumer_id)
            if progress:
                return offset(progress - 1)
        mode = self.opts.scan_mode
        if mode == "latest":
            return offset(self._latest())
        if mode == "from-snapshot":
            return offset(max(self.opts.snapshot_id - 1, 0))
        return offset(0)  # the "-full" modes: the first batch is a full scan

    def getDefaultReadLimit(self) -> ReadLimit:
        # Admission is this reader's own (latestOffset below): Spark's Python sources take one
        # built-in limit, and Paimon's options combine several (min rows with a delay, max rows,
        # bytes, files, snapshots).
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit = ReadAllAvailable()) -> dict:  # noqa: B008 - pyspark's own signature
        begin = start[names.SNAPSHOT]
        # Spark asks for the next offset only once the batch ending at `start` is in its commit
        # log; the source's commit() of the last batch comes only at the next start (never, for
        # an AvailableNow query's last batch), so a consumer id records its progress here too.
        # It is recorded before the next batch is planned: the consumer then keeps every snapshot
        # that batch reads from expiry, the query's first batch included.
        if self.full_start and begin == 0 and self.opts.consumer_id:
            end = self._protected_full_scan()
        else:
            self._record_progress(begin)
            end = self._admit(begin)
        if end != begin:
            self._last_batch = time.monotonic()
        return offset(end)

    def _protected_full_scan(self) -> int:
        """The first batch's full-scan snapshot, recorded as the consumer's next snapshot before it
        is read (so expiry keeps it); a snapshot that expired between choosing and recording it
        (a busy table) is chosen again, at once (the next one is there already)."""

        def give_up(state: tenacity.RetryCallState):
            raise SourceError(
                f"{self.opts.target}: the snapshot of the first batch's full scan expired {_PROTECT_ATTEMPTS} "
                f"times before its consumer {self.opts.consumer_id!r} could keep it; raise "
                "snapshot.time-retained or snapshot.num-retained.min.") from state.outcome.exception().__cause__

        return tenacity.Retrying(retry=tenacity.retry_if_exception_type(_Expired),
                                 stop=tenacity.stop_after_attempt(_PROTECT_ATTEMPTS),
                                 retry_error_callback=give_up)(self._protect_once)

    def _protect_once(self) -> int:
        end = self._admit(0)
        if end != 0:
            try:
                self._record(end)
            except SourceError as e:
                if _expired(e):  # recording's "expired" is chosen again; choosing's errors are not
                    raise _Expired(str(e)) from e
                raise
        return end

    def _admit(self, begin: int) -> int:
        latest = self._latest() if self._target is None else self._target
        if self.full_start and begin == 0:
            # A full scan cannot be split: it ends at the latest snapshot, or at the one named.
            if self.opts.scan_mode == "from-snapshot-full":
                pinned = self.opts.snapshot_id
                return pinned if 0 < pinned <= self._latest() else begin
            return max(latest, begin)
        if latest <= begin:
            return begin
        o = self.opts
        if o.min_rows_per_trigger and self._target is None and not self._enough_rows(begin, latest):
            return begin  # hold the trigger: too few rows, and the delay has not passed
        end = min(latest, begin + o.max_snapshots_per_trigger) if o.max_snapshots_per_trigger else latest
        if o.max_rows_per_trigger or o.max_bytes_per_trigger or o.max_files_per_trigger:
            end = self._admit_within_limits(begin, end)
        return end

    def _delta_info(self, begin: int, end: int):
        return paimon_info(self._c(), self.opts, replace(paimon_base(self.opts), from_snapshot=begin, to_snapshot=end))

    def _enough_rows(self, begin: int, latest: int) -> bool:
        """read.stream.minRowsPerTrigger: the deltas since `begin` hold that many rows, or the last
        micro-batch is read.stream.maxTriggerDelayMs old (a row count the server cannot give, with
        a filter or too many snapshots, counts as enough)."""
        delay_ms = self.opts.max_trigger_delay_ms or DEFAULT_MAX_TRIGGER_DELAY_MS
        if self._last_batch is None:
            self._last_batch = time.monotonic()  # the query's first look: its delay starts now
        if (time.monotonic() - self._last_batch) * 1000 >= delay_ms:
            return True
        rows = self._delta_info(begin, latest).total_records
        return rows < 0 or rows >= self.opts.min_rows_per_trigger

    def _admit_within_limits(self, begin: int, end: int) -> int:
        """The last snapshot whose deltas since `begin` stay within read.stream.maxRowsPerTrigger,
        maxBytesPerTrigger (data files on storage) and maxFilesPerTrigger; at least one snapshot."""
        o = self.opts
        limits = [(o.max_rows_per_trigger, lambda i: i.total_records), (o.max_bytes_per_trigger, lambda i: i.total_bytes),
                  (o.max_files_per_trigger, _files)]
        limits = [(cap, measure) for cap, measure in limits if cap]
        admitted, totals = begin + 1, [0] * len(limits)
        for snap in range(begin + 1, min(end, begin + _MAX_PROBES) + 1):
            info = self._delta_info(snap - 1, snap)
            sizes = [measure(info) for _, measure in limits]
            if min(sizes) < 0:
                return admitted  # the server cannot measure this delta: admit one snapshot at a time
            totals = [t + s for t, s in zip(totals, sizes)]
            if snap > begin + 1 and any(t > cap for t, (cap, _) in zip(totals, limits)):
                break
            admitted = snap
        return admitted

    def command(self, start: int, end: int) -> PaimonRequest:
        """The server's request for the batch (start, end]: deterministic for any replay."""
        if self.full_start and start == 0:
            return replace(paimon_base(self.opts), snapshot=end)
        return replace(paimon_base(self.opts), from_snapshot=start, to_snapshot=end)

    def partitions(self, start: dict, end: dict) -> list[EndpointPartition]:
        a, b = start[names.SNAPSHOT], end[names.SNAPSHOT]
        if b <= a:
            return []
        with expired_means_new_checkpoint(self.opts):
            info = paimon_info(self._c(), self.opts, self.command(a, b))
        self._check_columns(info, a, b)
        return partitions_of(info, self.opts)

    def _check_columns(self, info, start: int, end: int) -> None:
        """Stop the query, before it reads (start, end], when the table's columns are no longer those
        it was defined with (see the module's docstring)."""
        if self.source is None:
            return
        now = from_arrow_schema(spark_schema(info))
        if now == self.source:
            return
        raise SourceError(
            f"{self.opts.target}: the table's schema changed since this query started (an ALTER TABLE): the query "
            f"reads ({_columns(self.source)}), the table now has ({_columns(now)}). A running query keeps the "
            f"columns it started with, so it stops here, before reading snapshots {start + 1}..{end}; restart it "
            "from its checkpoint to read on with the new columns from there (nothing is lost or read twice).")

    def read(self, partition: EndpointPartition) -> Iterator[pa.RecordBatch]:
        with expired_means_new_checkpoint(self.opts):
            try:
                yield from read_partition(partition, self.schema, self.opts.credentials)
            except KeyError as e:  # a column the query reads was renamed or dropped after the batch was planned
                raise SourceError(
                    f"Reading {partition.label} failed: the table's schema changed while this micro-batch was read "
                    f"(an ALTER TABLE; the query reads ({', '.join(self.schema.names)}), a column is gone: {e}); "
                    "restart the query from its checkpoint to read on with the new columns (nothing is lost or "
                    "read twice).") from None

    def commit(self, end: dict) -> None:
        self._record_progress(end[names.SNAPSHOT])

    def _record_progress(self, delivered: int) -> None:
        """Offsets live in Spark's checkpoint; a consumer id also records them in the table (the
        file `flight_cli tail --consumer-id` and Paimon's connectors use), so Paimon keeps those
        snapshots and a query on a new checkpoint resumes after them."""
        if not self.opts.consumer_id or delivered < 0 or delivered + 1 == self._recorded:
            return
        self._record(delivered + 1)

    def _record(self, next_snapshot: int) -> None:
        call(self.opts, names.CONSUMER_COMMIT, self._c().consumer_commit, self.opts.table, self.opts.consumer_id,
             next_snapshot)
        self._recorded = next_snapshot

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _columns(schema: StructType) -> str:
    return ", ".join(f"{f.name} {f.dataType.simpleString()}{'' if f.nullable else ' not null'}" for f in schema.fields)


def _files(info) -> int:
    """The data files a delta's plan reads, from its FlightInfo's `{"files": K}` (-1: not said)."""
    files = messages.read_plan_mark(info.app_metadata).files
    return -1 if files is None else files
