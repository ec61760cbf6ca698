"""Paimon tables of one warehouse: plans per bucket (or split group) and reads them in Arrow batches.

Planning happens once, in `plan` (FlightInfo time): each endpoint's ticket pins its splits per
snapshot (`PaimonTicket.pinned`), so serving it reads no manifest, and any server over the same
warehouse can serve it. A plan too large for a ticket (more than MAX_PINNED_BYTES of splits, or a
delta over more than MAX_COUNTED_SNAPSHOTS snapshots) pins the snapshot ids only, and the server
that reads it plans those snapshots again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa
import structlog

from flight_server.paimon import alter, compat, create, follow
from flight_server.paimon.guard import FilterGuard
from flight_server.paimon.pins import SnapshotPins
from flight_server.paimon.scope import Scope, bucket_set, select_splits, ticket_buckets
from flight_server.source import Items, ReadPlan
from flight_server.tickets import PaimonTicket
from flight_server.wire import messages, names
from flight_server.wire.actions import TableAltered, TableCreated
from flight_server.wire.errors import InvalidRequest, NotFound
from flight_server.wire.requests import PaimonRequest

log = structlog.get_logger(__name__)

MAX_COUNTED_SNAPSHOTS = 64  # a delta is planned (pinned, its rows counted) at FlightInfo time up to this
MAX_SPLIT_GROUPS = 16  # endpoints for a bucket=-1 snapshot read: enough parallelism for a Spark stage
MAX_PINNED_BYTES = 256 << 10  # serialized splits one ticket may carry (~1.4 KB per split)


@dataclass
class TableSummary:
    """One table as `list_flights` shows it."""

    name: str
    schema: pa.Schema
    buckets: int
    latest_snapshot: int | None
    primary_keys: list[str] = field(default_factory=list)
    partition_keys: list[str] = field(default_factory=list)


class PaimonSource:
    """The Paimon tables of one warehouse: planning, reading and following them, no Flight."""

    def __init__(self, warehouse: str | None, options: dict[str, str] | None = None):
        """`options`: pypaimon's catalog and filesystem options (e.g. an s3:// warehouse's
        `s3.endpoint`, `s3.region`, `s3.access-key`, `s3.secret-key`, `s3.path-style-access`)."""
        self.warehouse = warehouse
        self.options = dict(options or {})
        self._catalog = None
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._follows: set[follow.Position] = set()  # open follow streams: a gone client must end its own
        self._pins = SnapshotPins()
        self._guard = FilterGuard()

    def catalog(self):
        with self._lock:
            if self._catalog is None:
                if not self.warehouse:
                    raise NotFound("This server has no Paimon warehouse; start it with --warehouse DIR.")
                self._catalog = compat.create_catalog(self.warehouse, self.options)
            return self._catalog

    def table(self, name: str):
        try:
            return self.catalog().get_table(name)
        except compat.NOT_FOUND_ERRORS as e:
            raise NotFound(
                f"Paimon table {name!r} does not exist; `flight_cli list` names the tables.", table=name) from e

    def latest_snapshot(self, name: str) -> int | None:
        return compat.latest_snapshot_id(self.table(name))

    def earliest_snapshot(self, name: str) -> int | None:
        return compat.earliest_snapshot_id(self.table(name).snapshot_manager())

    def snapshots_around(self, name: str, millis: int) -> tuple[int | None, int | None]:
        """The last snapshot committed at or before `millis` and the first at or after it (None
        where there is none yet, or none kept)."""
        return compat.snapshots_around(self.table(name).snapshot_manager(), millis)

    def tag_snapshot(self, name: str, tag: str) -> int:
        table = self.table(name)
        snapshot = compat.tag_snapshot(table, tag)
        if snapshot is None:
            tags = compat.tag_names(table)
            raise NotFound(f"Paimon table {name!r} has no tag {tag!r}; its tags are: {', '.join(tags) or 'none'}.",
                           table=name)
        return snapshot

    def create_tag(self, name: str, tag: str, snapshot: int | None, time_retained_ms: int | None) -> int:
        """Tag `snapshot` (the latest when None) as Paimon's create_tag does; returns the snapshot
        tagged. The caller keeps this server's expiry of the table out meanwhile
        (Maintainer.create_tag); the snapshot is looked for again after the write, for another
        server's expiry, and the tag taken back if it went."""
        table = self.table(name)
        existing = compat.tag_snapshot(table, tag)
        if existing is not None:
            raise InvalidRequest(f"Paimon table {name!r} already has tag {tag!r} (on snapshot {existing}); delete it "
                                 "first (delete_tag) or choose another name.", table=name)
        manager = table.snapshot_manager()
        if snapshot is None:
            snapshot = compat.latest_snapshot_id(table)
            if snapshot is None:
                raise NotFound(f"Paimon table {name!r} has no snapshot to tag yet; commit to it first.", table=name)
        elif compat.snapshot(manager, snapshot) is None:
            raise self._untaggable(table, name, snapshot)
        try:
            compat.create_tag(table, tag, snapshot, time_retained_ms)
        except (ValueError, FileNotFoundError):
            if compat.tag_snapshot(table, tag) is not None:  # made meanwhile by another caller
                raise InvalidRequest(f"Paimon table {name!r} already has tag {tag!r}; delete it first (delete_tag) "
                                     "or choose another name.", table=name) from None
            raise self._untaggable(table, name, snapshot) from None
        if compat.snapshot(manager, snapshot) is None:  # expired meanwhile: its files may be going
            compat.delete_tag(table, tag)
            raise self._untaggable(table, name, snapshot)
        return snapshot

    @staticmethod
    def _untaggable(table, name: str, snapshot: int) -> NotFound:
        earliest = compat.earliest_snapshot_id(table.snapshot_manager())
        latest = compat.latest_snapshot_id(table)
        kept = "it has no snapshot yet" if latest is None else f"its snapshots are {earliest} to {latest}"
        return NotFound(f"Paimon table {name!r} has no snapshot {snapshot} to tag ({kept}); name a kept snapshot, "
                        "or leave the snapshot out to tag the latest.", table=name)

    def delete_tags(self, name: str, tags: list[str]) -> list[str]:
        """Delete the tags (their files only, as Paimon's delete_tag), all of them or, when one is
        unknown, none."""
        table = self.table(name)
        missing = [tag for tag in tags if compat.tag_snapshot(table, tag) is None]
        if missing:
            known = compat.tag_names(table)
            raise NotFound(f"Paimon table {name!r} has no tag {missing[0]!r} (its tags are: {', '.join(known) or 'none'}"
                           "); nothing was deleted.", table=name)
        for tag in tags:
            compat.delete_tag(table, tag)
        return tags

    def consumer_progress(self, name: str, consumer_id: str) -> int | None:
        """The next snapshot the consumer will read, None if it has recorded no progress."""
        return compat.read_consumer(self.table(name), consumer_id)

    def consumer_commit(self, name: str, consumer_id: str, next_snapshot: int) -> None:
        """Record that the consumer has read every snapshot before `next_snapshot`.

        Progress past the latest snapshot + 1 would make a resumed read skip snapshots that are
        committed later, so it is refused; so is progress to a snapshot that is expired (NOT_FOUND:
        a resumed read could not start there). The caller keeps this server's expiry of the table
        out meanwhile (Maintainer.consumer_commit); the snapshot is looked for again after the
        write, for another server's.
        """
        table = self.table(name)
        limit = (compat.latest_snapshot_id(table) or 0) + 1
        if next_snapshot > limit:
            raise InvalidRequest(
                f"Consumer {consumer_id!r} of Paimon table {name!r}: next_snapshot {next_snapshot} is past "
                f"the latest snapshot + 1 ({limit}); commit only snapshots that were read.",
                table=name)
        self._check_kept(table, name, consumer_id, next_snapshot, limit)
        before = compat.read_consumer(table, consumer_id)
        compat.write_consumer(table, consumer_id, next_snapshot)
        try:
            self._check_kept(table, name, consumer_id, next_snapshot, limit)
        except NotFound:  # another server expired it meanwhile: a consumer on a gone snapshot would stop expiry
            compat.restore_consumer(table, consumer_id, before)
            raise

    @staticmethod
    def _check_kept(table, name: str, consumer_id: str, next_snapshot: int, limit: int) -> None:
        if next_snapshot < limit and compat.snapshot(table.snapshot_manager(), next_snapshot) is None:
            raise NotFound(
                f"Consumer {consumer_id!r} of Paimon table {name!r}: snapshot {next_snapshot} has expired, so "
                "the consumer cannot resume there; start it over from 'latest-full' (or under a new consumer "
                "id), and commit progress more often than snapshot.time-retained.", table=name)

    def create_table(self, name: str, schema: pa.Schema, primary_keys, partition_keys, options) -> TableCreated:
        return create.create_table(self.catalog(), name, schema, primary_keys, partition_keys, options)

    def alter_table(self, name: str, changes, check_options=None) -> TableAltered:
        """Paimon's ALTER TABLE: `changes` checked, then applied as one new schema (paimon/alter.py)."""
        return alter.alter_table(self.catalog(), self.table(name), name, changes, check_options)

    def merge_schema(self, name: str, stream: pa.Schema, check_options=None) -> int | None:
        """A write's `merge_schema`: the stream's new columns added, types widened (paimon/alter.py)."""
        return alter.merge_schema(self.catalog(), lambda: self.table(name), name, stream, check_options)

    def table_names(self) -> list[str]:
        """Every table's DB.TABLE, sorted (none is loaded)."""
        return compat.list_tables(self.catalog())

    def tables(self, keep: Callable[[str], bool] = lambda name: True) -> list[TableSummary]:
        """The tables whose names `keep` lets through (the others are never loaded)."""
        out = []
        for name in filter(keep, compat.list_tables(self.catalog())):
            try:
                table = self.table(name)
                scope = Scope(table, PaimonRequest(table=name))
            except NotFound:
                continue  # dropped while we listed
            out.append(TableSummary(name, scope.schema, table.options.bucket(), compat.latest_snapshot_id(table),
                                    list(table.primary_keys), list(table.partition_keys)))
        return out

    def schema(self, req: PaimonRequest) -> pa.Schema:
        return Scope(self.table(req.table), req).schema

    def plan(self, req: PaimonRequest) -> ReadPlan:
        if req.filter_guard is not None:  # a Spark read's filter may be a later action's (guard.py)
            keep = self._guard.allows(req.table, req.filter_guard)
            req = replace(req, filter=req.filter if keep else (), filter_guard=None)
        scope = Scope(self.table(req.table), req)
        buckets = compat.fixed_buckets(scope.table)
        if req.buckets is not None and buckets is not None and req.buckets[-1] >= buckets:
            raise InvalidRequest(
                f"Bucket {req.buckets[-1]} of Paimon table {req.table!r} does not exist; it has {buckets} buckets (0..{buckets - 1})."
            )
        latest_id = compat.latest_snapshot_id(scope.table)
        if req.pin is not None:  # the snapshot the pin's first plan read; the ticket needs no pin
            latest_id = self._pins.resolve(req.table, req.pin, latest_id)
            req = replace(req, pin=None)
        base = PaimonTicket(req, compat.table_identity(scope.table), req.mode)
        if req.mode == names.FOLLOW_READ:
            full, nxt = follow.start_position(scope, req, latest_id)
            return ReadPlan(scope.schema, self._per_bucket(replace(base, full=full, next=nxt), buckets))
        if req.mode == names.DELTA_READ:
            if req.from_snapshot > (latest_id or 0):
                scope.snapshot(req.from_snapshot)  # raises: a delta cannot start in the future
            to_s = (latest_id or 0) if req.to_snapshot is None else req.to_snapshot
            if to_s > req.from_snapshot:
                scope.snapshot(to_s)
                scope.snapshot(req.from_snapshot + 1)
            delta = replace(base, from_snapshot=req.from_snapshot, to_snapshot=to_s)
            plan = _delta_plan(scope, req, to_s)
            if plan is None:
                return ReadPlan(scope.schema, self._per_bucket(delta, buckets))
            splits = [s for _, group in plan for s in group]
            total = -1 if req.filter else sum(s.row_count for s in splits)
            return ReadPlan(scope.schema, _pinned(self._per_bucket(delta, buckets), plan), total,
                            messages.files_mark(sum(len(s.files) for s in splits)), sum(s.file_size for s in splits))
        snap_id = req.snapshot if req.snapshot is not None else latest_id
        if req.snapshot is not None:
            scope.snapshot(req.snapshot)
        base = replace(base, snapshot=snap_id)
        splits = select_splits(scope.snapshot_splits(snap_id), bucket_set(req.buckets), None)
        if buckets is not None:
            tickets = self._per_bucket(base, buckets)
        else:
            n = max(1, min(len(splits), MAX_SPLIT_GROUPS))
            tickets = [replace(base, group=(i, n)) for i in range(n)] if n > 1 else [base]
        counts = [compat.merged_row_count(s) for s in splits]
        total = sum(counts) if not req.filter and None not in counts else -1
        plan = [(snap_id, splits)] if snap_id is not None else []
        return ReadPlan(scope.schema, _pinned(tickets, plan), total, messages.snapshot_mark(snap_id) if snap_id else b"")

    @staticmethod
    def _per_bucket(base: PaimonTicket, buckets: int | None) -> list[PaimonTicket]:
        if buckets is None:  # bucket=-1: new data lands anywhere, so one endpoint follows it all
            return [base]
        chosen = base.request.buckets if base.request.buckets is not None else range(buckets)
        return [replace(base, bucket=b) for b in chosen]

    def open(self, ticket: PaimonTicket, is_cancelled: Callable[[], bool]) -> tuple[pa.Schema, Items]:
        """The schema and `(batch, app_metadata)` stream of one endpoint's ticket."""
        req = ticket.request
        scope = Scope(self.table(req.table), req)
        follow.check_identity(scope.table, req.table, ticket.identity)
        if ticket.mode == names.FOLLOW_READ:
            position = follow.Position(req.table, ticket.full if ticket.full is not None else ticket.next)
            stream = follow.follow(scope, ticket, is_cancelled, self.stopping, position)
            return scope.schema, self._counted(stream, position)
        if ticket.mode == names.DELTA_READ:
            return scope.schema, _expired_named(scope, ticket, _delta(scope, ticket))
        return scope.schema, _expired_named(scope, ticket, _snapshot(scope, ticket))

    @property
    def open_follows(self) -> int:
        with self._lock:
            return len(self._follows)

    def follow_lag(self) -> dict[str, int]:
        """Per table with open follows: how many committed snapshots the furthest-behind one has
        yet to send (0 when every follow has sent everything committed)."""
        with self._lock:
            positions = list(self._follows)
        lag: dict[str, int] = {}
        for p in positions:
            try:
                latest = self.latest_snapshot(p.table) or 0
            except NotFound:
                continue  # dropped: its follows are ending
            lag[p.table] = max(lag.get(p.table, 0), latest - (p.next - 1), 0)
        return lag

    def _counted(self, stream: Iterator, position: follow.Position) -> Iterator:
        with self._lock:
            self._follows.add(position)
        try:
            yield from stream
        finally:
            stream.close()
            with self._lock:
                self._follows.discard(position)


def _delta_plan(scope: Scope, req: PaimonRequest, to_s: int) -> list[tuple[int, list]] | None:
    """The splits each snapshot of the delta (A, B] committed, in the request's buckets; None when
    the delta spans more than MAX_COUNTED_SNAPSHOTS snapshots (its readers plan it themselves).

    Delta splits are not merged, so their row counts are exact without a filter.
    """
    if to_s - req.from_snapshot > MAX_COUNTED_SNAPSHOTS:
        return None
    planner = compat.new_delta_planner(scope.table, scope.predicate, req.columns)
    buckets = bucket_set(req.buckets)
    try:
        plan = []
        for sid in range(req.from_snapshot + 1, to_s + 1):
            snap = scope.snapshot(sid)
            if follow.scans(scope, planner, snap):
                plan.append((sid, select_splits(compat.delta_splits(planner, snap), buckets, None)))
        return plan
    finally:
        compat.close_planner(planner)


def _pinned(tickets: list[PaimonTicket], plan: list[tuple[int, list]] | None) -> list[PaimonTicket]:
    """Each ticket with its own splits of `plan` pinned in it, while they fit in MAX_PINNED_BYTES."""
    if plan is None:
        return tickets
    out = []
    for t in tickets:
        mine = [(sid, sorted(select_splits(splits, ticket_buckets(t), None), key=compat.split_sort_key)) for sid, splits in plan]
        if t.group is not None:
            mine = [(sid, select_splits(splits, None, t.group)) for sid, splits in mine]
        pinned = tuple((sid, tuple(compat.pin_splits(splits))) for sid, splits in mine)
        size = sum(len(s) for _, splits in pinned for s in splits)
        out.append(replace(t, pinned=pinned) if size <= MAX_PINNED_BYTES else t)
    return out


def _expired_named(scope: Scope, ticket: PaimonTicket, items: Iterator) -> Iterator:
    """A pinned read whose files snapshot expiry deleted meanwhile ends naming the snapshot."""
    wanted = [ticket.snapshot] if ticket.mode == names.SNAPSHOT_READ else range(ticket.from_snapshot + 1,
                                                                                ticket.to_snapshot + 1)
    with scope.expired_named(wanted):
        yield from items


def _snapshot(scope: Scope, ticket: PaimonTicket) -> Iterator:
    if ticket.snapshot is None:
        return
    if ticket.pinned is not None:
        splits = [s for _, pinned in ticket.pinned for s in compat.unpin_splits(scope.table, list(pinned))]
    else:
        splits = select_splits(scope.snapshot_splits(ticket.snapshot), ticket_buckets(ticket), ticket.group)
    yield from scope.batches(splits)  # the snapshot is FlightInfo's app_metadata: no per-batch marks


def _delta(scope: Scope, ticket: PaimonTicket) -> Iterator:
    if ticket.pinned is not None:
        for sid, pinned in ticket.pinned:
            yield from scope.batches(compat.unpin_splits(scope.table, list(pinned)), messages.snapshot_mark(sid))
        return
    planner = compat.new_delta_planner(scope.table, scope.predicate, scope.req.columns)
    buckets = ticket_buckets(ticket)
    try:
        for sid in range(ticket.from_snapshot + 1, ticket.to_snapshot + 1):
            yield from follow.snapshot_delta(scope, planner, scope.snapshot(sid), buckets)
    finally:
        compat.close_planner(planner)
