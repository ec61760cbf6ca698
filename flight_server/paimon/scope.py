"""One Paimon table as one request sees it: its projection, filter and row kind, scans and reads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import pyarrow as pa

from flight_server.paimon import compat
from flight_server.paimon.filter import build_predicate
from flight_server.tickets import PaimonTicket
from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest, NotFound
from flight_server.wire.requests import PaimonRequest

BATCH_ROWS = 65536


def _native_read_options() -> dict:
    """read.native.enabled where pypaimon-rust is installed (the server extra pins it): it merges
    primary-key reads far faster (docs/benchmarks_paimon.md); pypaimon falls back to Python for
    routes the native reader does not support."""
    try:
        import pypaimon_rust  # noqa: F401
    except ImportError:
        return {}
    return {"read.native.enabled": "true"}


NATIVE_READ = _native_read_options()


class Scope:
    """A table plus one request's projection, filter and row kind: builds scans and reads."""

    def __init__(self, table, req: PaimonRequest):
        self.name = req.table
        self.req = req
        # audit_log of a primary-key table: merged as Java's AuditLogTable is, retractions kept
        self.audit = req.system == names.AUDIT_LOG and bool(table.primary_keys)
        read_options = compat.AUDIT_READ_OPTIONS if self.audit else NATIVE_READ
        self.table = table.copy({"read.batch-size": str(BATCH_ROWS), **read_options})
        self.predicate = build_predicate(self.table, req)
        if req.columns is not None:
            missing = [c for c in req.columns if c not in self.table.field_names]
            if missing:
                raise InvalidRequest(
                    f"Paimon table {req.table!r} has no column {missing[0]!r} (in 'columns'); "
                    f"its columns are {', '.join(self.table.field_names)}."
                )
        builder = self.table.new_stream_read_builder().with_include_row_kind(req.row_kind is not None)
        if self.predicate is not None:
            builder = builder.with_filter(self.predicate)
        if req.columns is not None and not self.audit:
            builder = builder.with_projection(list(req.columns))
        self.reader = builder.new_read()
        if self.audit:
            compat.keep_retractions(self.reader)
        schema = compat.output_schema(self.reader)
        self._select = None  # the columns an audit_log read projects itself (keep_retractions reads them all)
        if self.audit and req.columns is not None:
            self._select = [schema.names[0], *req.columns]
            schema = pa.schema([schema.field(name) for name in self._select])
        if req.row_kind is not None and req.row_kind != schema.names[0]:  # audit_log: Paimon's name
            schema = schema.set(0, pa.field(req.row_kind, pa.string(), nullable=False))
        self.schema = schema

    def snapshot_splits(self, snapshot_id: int | None) -> list:
        """Splits of a full scan pinned at `snapshot_id`, in a stable order."""
        if snapshot_id is None:
            return []
        pinned = self.table.copy({"scan.snapshot-id": str(snapshot_id), **_split_options(self.table)})
        builder = pinned.new_read_builder()
        if self.predicate is not None:
            builder = builder.with_filter(self.predicate)
        if self.req.columns is not None:
            builder = builder.with_projection(list(self.req.columns))
        with self.expired_named([snapshot_id]):  # chosen (latest, a pin's) then expired before planning
            return sorted(builder.new_scan().plan().splits(), key=compat.split_sort_key)

    @contextlib.contextmanager
    def expired_named(self, snapshot_ids: Iterable[int | None]):
        """A read or plan of these snapshots that fails because one expired meanwhile (its snapshot
        file or its data files deleted: pypaimon and pypaimon-rust say so in several ways) ends
        NOT_FOUND naming it, not as an internal error; other errors pass unchanged."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - re-raised unless a snapshot of the read is gone
            if isinstance(e, NotFound) or compat.classify(e) is not compat.Outcome.MISSING_FILE:
                raise
            sm = self.table.snapshot_manager()
            gone = [sid for sid in snapshot_ids if sid is not None and compat.snapshot(sm, sid) is None]
            if not gone:
                raise
            raise NotFound(
                f"Snapshot {gone[0]} of Paimon table {self.name!r} expired while it was read (snapshot expiry "
                "deleted it and its files); plan the read again (it then reads a kept snapshot), or keep the "
                "snapshot with a tag or a consumer.", table=self.name, snapshot=gone[0]) from e

    def batches(self, splits: list, meta: bytes | None = None) -> Iterator:
        """`(batch, app_metadata)` as pypaimon reads them (up to BATCH_ROWS rows each), cast to
        `schema`. Passed through, not re-chunked: concatenating small batches cost time here and
        CPU in every consumer (larger batches fault more pages in)."""
        if not splits:
            return
        reader = self.reader.to_arrow_batch_reader(splits)
        try:
            for batch in reader:
                if batch.num_rows:
                    if self._select is not None:
                        batch = batch.select(self._select)
                    yield _as(batch, self.schema), meta
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()

    def snapshot(self, snapshot_id: int):
        """The snapshot, or NotFound saying whether it expired or is yet to come."""
        sm = self.table.snapshot_manager()
        snap = compat.snapshot(sm, snapshot_id) if snapshot_id >= 1 else None
        if snap is None:
            raise NotFound(_missing_snapshot(self.name, snapshot_id, sm), table=self.name, snapshot=snapshot_id)
        return snap


def _as(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch in the output schema: cast, and its row-kind column renamed where the read names it
    as Paimon's audit_log does."""
    if batch.schema.equals(schema):
        return batch
    if batch.schema.names != schema.names:
        batch = batch.rename_columns(schema.names)
    return batch.cast(schema)


def _split_options(table) -> dict:
    """An append table without fixed buckets: one split per data file (pypaimon packs small files
    into 128 MiB splits), so its endpoints (split groups) spread even a small table over a stage."""
    if table.primary_keys or compat.fixed_buckets(table) is not None:
        return {}
    return {"source.split.target-size": "1kb"}


def _missing_snapshot(name: str, snapshot_id: int, sm) -> str:
    latest, earliest = sm.get_latest_snapshot(), compat.earliest_snapshot_id(sm)
    if latest is None:
        return f"Snapshot {snapshot_id} of Paimon table {name!r} does not exist: the table has no snapshot yet."
    if snapshot_id > latest.id:
        return (f"Snapshot {snapshot_id} of Paimon table {name!r} does not exist yet: the latest is {latest.id}; "
                "use latest_snapshot to find it.")
    return (f"Snapshot {snapshot_id} of Paimon table {name!r} has expired or never existed: "
            f"snapshots {earliest or '?'}..{latest.id} are available.")


def bucket_set(buckets) -> set | None:
    return None if buckets is None else set(buckets)


def ticket_buckets(ticket: PaimonTicket) -> set | None:
    """The buckets one endpoint reads: its own bucket, else the request's `buckets`, else all."""
    return {ticket.bucket} if ticket.bucket is not None else bucket_set(ticket.request.buckets)


def select_splits(splits: list, buckets: set | None, group: tuple[int, int] | None) -> list:
    """The splits of `buckets`, then group i of n in the stable split order."""
    if buckets is not None:
        splits = [s for s in splits if s.bucket in buckets]
    if group is not None:
        i, n = group
        splits = sorted(splits, key=compat.split_sort_key)[i::n]
    return splits
