"""Paimon tables of one warehouse: plans per bucket (or split group) and reads them in Arrow batches.

Planning happens in `plan` (FlightInfo time) and pins everything a reader needs into one
self-contained ticket payload per endpoint, so any server over the same warehouse can serve it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import structlog

from flight_server import paimon_compat as compat
from flight_server import paimon_follow
from flight_server.wire.errors import InvalidRequest, NotFound
from flight_server.paimon_filter import build_predicate
from flight_server.wire.requests import PaimonRequest
from flight_server.wire import messages

log = structlog.get_logger(__name__)

BATCH_ROWS = 65536
MAX_COUNTED_SNAPSHOTS = 64  # FlightInfo counts a delta's rows only when planning it stays cheap
MAX_SPLIT_GROUPS = 16  # endpoints for a bucket=-1 snapshot read: enough parallelism for a Spark stage



@dataclass
class ReadPlan:
    """What FlightInfo needs: the output schema and one ticket payload per endpoint."""

    schema: pa.Schema
    tickets: list[dict]
    total_records: int = -1


@dataclass
class TableSummary:
    """One table as `list_flights` shows it."""

    name: str
    schema: pa.Schema
    buckets: int
    latest_snapshot: int | None
    primary_keys: list[str] = field(default_factory=list)
    partition_keys: list[str] = field(default_factory=list)


def _native_read_options() -> dict:
    """pypaimon-rust merges primary-key reads ~12x faster (docs/benchmarks.md); pypaimon falls
    back to Python for routes the native reader does not support."""
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
        self.table = table.copy({"read.batch-size": str(BATCH_ROWS), **NATIVE_READ})
        self.predicate = build_predicate(self.table, req)
        if req.columns is not None:
            missing = [c for c in req.columns if c not in self.table.field_names]
            if missing:
                raise InvalidRequest(
                    f"Paimon table {req.table!r} has no column {missing[0]!r} (in 'columns'); "
                    f"its columns are {', '.join(self.table.field_names)}."
                )
        builder = self.table.new_stream_read_builder().with_include_row_kind(req.changelog)
        if self.predicate is not None:
            builder = builder.with_filter(self.predicate)
        if req.columns is not None:
            builder = builder.with_projection(list(req.columns))
        self.reader = builder.new_read()
        self.schema = compat.output_schema(self.reader)

    def snapshot_splits(self, snapshot_id: int | None) -> list:
        """Splits of a full scan pinned at `snapshot_id`, in a stable order."""
        if snapshot_id is None:
            return []
        pinned = self.table.copy({"scan.snapshot-id": str(snapshot_id)})
        builder = pinned.new_read_builder()
        if self.predicate is not None:
            builder = builder.with_filter(self.predicate)
        if self.req.columns is not None:
            builder = builder.with_projection(list(self.req.columns))
        return sorted(builder.new_scan().plan().splits(), key=compat.split_sort_key)

    def batches(self, splits: list, meta: bytes | None = None) -> Iterator:
        """`(batch, app_metadata)` of at least BATCH_ROWS rows (but the last), cast to `schema`."""
        if not splits:
            return
        reader = self.reader.to_arrow_batch_reader(splits)
        pending, rows = [], 0
        try:
            for batch in reader:
                if batch.num_rows == 0:
                    continue
                pending.append(batch)
                rows += batch.num_rows
                if rows >= BATCH_ROWS:
                    yield self._combine(pending), meta
                    pending, rows = [], 0
            if pending:
                yield self._combine(pending), meta
        finally:
            close = getattr(reader, "close", None)
            if close is not None:
                close()

    def _combine(self, batches: list) -> pa.RecordBatch:
        batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        return batch if batch.schema.equals(self.schema) else batch.cast(self.schema)

    def snapshot(self, snapshot_id: int):
        """The snapshot, or NotFound saying whether it expired or is yet to come."""
        sm = self.table.snapshot_manager()
        snap = sm.get_snapshot_by_id(snapshot_id) if snapshot_id >= 1 else None
        if snap is None:
            raise NotFound(_missing_snapshot(self.name, snapshot_id, sm), table=self.name, snapshot=snapshot_id)
        return snap


def _missing_snapshot(name: str, snapshot_id: int, sm) -> str:
    latest, earliest = sm.get_latest_snapshot(), compat.earliest_snapshot_id(sm)
    if latest is None:
        return f"Snapshot {snapshot_id} of Paimon table {name!r} does not exist: the table has no snapshot yet."
    if snapshot_id > latest.id:
        return (f"Snapshot {snapshot_id} of Paimon table {name!r} does not exist yet: the latest is {latest.id}; "
                "use latest_snapshot to find it.")
    return (f"Snapshot {snapshot_id} of Paimon table {name!r} has expired or never existed: "
            f"snapshots {earliest or '?'}..{latest.id} are available.")


class PaimonSource:
    """The Paimon tables of one warehouse: planning, reading and following them, no Flight."""

    def __init__(self, warehouse: str | None):
        self.warehouse = warehouse
        self._catalog = None
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.open_follows = 0  # follow streams still running: a gone client must bring this down

    def catalog(self):
        with self._lock:
            if self._catalog is None:
                if not self.warehouse:
                    raise NotFound("This server has no Paimon warehouse; start it with --warehouse DIR.")
                self._catalog = compat.create_catalog(self.warehouse)
            return self._catalog

    def table(self, name: str):
        try:
            return self.catalog().get_table(name)
        except compat.NOT_FOUND_ERRORS as e:
            raise NotFound(
                f"Paimon table {name!r} does not exist in warehouse {self.warehouse}; "
                "list_flights names the tables.", table=name) from e

    def latest_snapshot(self, name: str) -> int | None:
        snap = self.table(name).snapshot_manager().get_latest_snapshot()
        return None if snap is None else snap.id

    def consumer_progress(self, name: str, consumer_id: str) -> int | None:
        """The next snapshot the consumer will read, None if it has recorded no progress."""
        return compat.read_consumer(self.table(name), consumer_id)

    def consumer_commit(self, name: str, consumer_id: str, next_snapshot: int) -> None:
        """Record that the consumer has read every snapshot before `next_snapshot`.

        Progress past the latest snapshot + 1 would make a resumed read skip snapshots that are
        committed later, so it is refused.
        """
        table = self.table(name)
        latest = table.snapshot_manager().get_latest_snapshot()
        limit = (latest.id if latest is not None else 0) + 1
        if next_snapshot > limit:
            raise InvalidRequest(
                f"Consumer {consumer_id!r} of Paimon table {name!r}: next_snapshot {next_snapshot} is past "
                f"the latest snapshot + 1 ({limit}); commit only snapshots that were read.",
                table=name)
        compat.write_consumer(table, consumer_id, next_snapshot)

    def tables(self) -> list[TableSummary]:
        out = []
        for name in compat.list_tables(self.catalog()):
            try:
                table = self.table(name)
                scope = Scope(table, PaimonRequest(table=name))
            except NotFound:
                continue  # dropped while we listed
            latest = table.snapshot_manager().get_latest_snapshot()
            out.append(TableSummary(name, scope.schema, table.options.bucket(), latest and latest.id,
                                    list(table.primary_keys), list(table.partition_keys)))
        return out

    def plan(self, req: PaimonRequest) -> ReadPlan:
        scope = Scope(self.table(req.table), req)
        buckets = compat.fixed_buckets(scope.table)
        if req.buckets is not None and buckets is not None and req.buckets[-1] >= buckets:
            raise InvalidRequest(
                f"Bucket {req.buckets[-1]} of Paimon table {req.table!r} does not exist; it has {buckets} buckets (0..{buckets - 1})."
            )
        base = {"paimon": req.table, "r": req.to_json(), "id": compat.table_identity(scope.table)}
        sm = scope.table.snapshot_manager()
        latest = sm.get_latest_snapshot()
        latest_id = latest.id if latest else None
        if req.mode == "follow":
            base.update(paimon_follow.start_position(scope, req, latest_id))
            return ReadPlan(scope.schema, self._per_bucket(base, req, buckets))
        if req.mode == "delta":
            if req.from_snapshot > (latest_id or 0):
                scope.snapshot(req.from_snapshot)  # raises: a delta cannot start in the future
            to_s = (latest_id or 0) if req.to_snapshot is None else req.to_snapshot
            if to_s > req.from_snapshot:
                scope.snapshot(to_s)
                scope.snapshot(req.from_snapshot + 1)
            base.update(m="delta", a=req.from_snapshot, b=to_s)
            return ReadPlan(scope.schema, self._per_bucket(base, req, buckets), _delta_rows(scope, req, to_s))
        snap_id = req.snapshot if req.snapshot is not None else latest_id
        if req.snapshot is not None:
            scope.snapshot(req.snapshot)
        base.update(m=req.mode, s=snap_id)
        splits = pick(scope.snapshot_splits(snap_id), _bucket_set(req.buckets), None)
        if buckets is not None:
            tickets = self._per_bucket(base, req, buckets)
        else:
            n = max(1, min(len(splits), MAX_SPLIT_GROUPS))
            tickets = [dict(base, g=[i, n]) for i in range(n)]
        counts = [compat.merged_row_count(s) for s in splits]
        total = sum(counts) if not req.filter and None not in counts else -1
        return ReadPlan(scope.schema, tickets, total)

    @staticmethod
    def _per_bucket(base: dict, req: PaimonRequest, buckets: int | None) -> list[dict]:
        if buckets is None:  # bucket=-1: new data lands anywhere, so one endpoint follows it all
            return [dict(base)]
        chosen = req.buckets if req.buckets is not None else range(buckets)
        return [dict(base, bk=b) for b in chosen]

    def read(self, ticket: dict, is_cancelled: Callable[[], bool]) -> tuple[pa.Schema, Iterator]:
        """The schema and `(batch, app_metadata)` stream of one endpoint's ticket."""
        req = PaimonRequest(**_request_args(ticket["r"]))
        scope = Scope(self.table(req.table), req)
        paimon_follow.check_identity(scope.table, req.table, ticket.get("id"))
        if ticket["m"] == "follow":
            return scope.schema, self._counted(paimon_follow.follow(scope, ticket, is_cancelled, self.stopping))
        if ticket["m"] == "delta":
            return scope.schema, _delta(scope, ticket)
        return scope.schema, _snapshot(scope, ticket)


    def _counted(self, stream: Iterator) -> Iterator:
        with self._lock:
            self.open_follows += 1
        try:
            yield from stream
        finally:
            stream.close()
            with self._lock:
                self.open_follows -= 1


def _request_args(raw: dict) -> dict:
    args = dict(raw)
    for key in ("columns", "buckets"):
        if key in args:
            args[key] = tuple(args[key])
    if "filter" in args:
        args["filter"] = tuple(tuple(c) for c in args["filter"])
    return args


def _bucket_set(buckets) -> set | None:
    return None if buckets is None else set(buckets)


def ticket_buckets(ticket: dict, req: PaimonRequest) -> set | None:
    """The buckets one endpoint reads: its own bucket, else the request's `buckets`, else all."""
    return {ticket["bk"]} if ticket.get("bk") is not None else _bucket_set(req.buckets)


def pick(splits: list, buckets: set | None, group: list | None) -> list:
    """The splits of `buckets`, then group i of n in the stable split order."""
    if buckets is not None:
        splits = [s for s in splits if s.bucket in buckets]
    if group is not None:
        i, n = group
        splits = sorted(splits, key=compat.split_sort_key)[i::n]
    return splits


def _delta_rows(scope: Scope, req: PaimonRequest, to_s: int) -> int:
    """Rows in the delta (A, B], for readers that admit snapshots by row count; -1 when unknown.

    Delta splits are not merged, so their row counts are exact without a filter.
    """
    if req.filter or to_s - req.from_snapshot > MAX_COUNTED_SNAPSHOTS:
        return -1
    planner = compat.new_delta_planner(scope.table, None, None)
    buckets = _bucket_set(req.buckets)
    try:
        total = 0
        for sid in range(req.from_snapshot + 1, to_s + 1):
            snap = scope.snapshot(sid)
            if compat.should_scan(planner, snap):
                total += sum(s.row_count for s in pick(compat.delta_splits(planner, snap), buckets, None))
        return total
    finally:
        compat.close_planner(planner)


def _snapshot(scope: Scope, ticket: dict) -> Iterator:
    if ticket["s"] is None:
        return
    splits = pick(scope.snapshot_splits(ticket["s"]), ticket_buckets(ticket, scope.req), ticket.get("g"))
    yield from scope.batches(splits, messages.snapshot_mark(ticket["s"]))


def _delta(scope: Scope, ticket: dict) -> Iterator:
    planner = compat.new_delta_planner(scope.table, scope.predicate, scope.req.columns)
    buckets = ticket_buckets(ticket, scope.req)
    try:
        for sid in range(ticket["a"] + 1, ticket["b"] + 1):
            yield from paimon_follow.snapshot_delta(scope, planner, scope.snapshot(sid), buckets)
    finally:
        compat.close_planner(planner)
