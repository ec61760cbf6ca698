"""Live follow of a Paimon table: a start position, then each new snapshot's delta in commit order.

Our own polling loop over pypaimon's per-snapshot delta planner, not `stream_sync()`: that one
owns an event loop and a prefetch thread with no way to stop them when the client goes, skips
the bucket filter on its first plan, and fails on a table with no snapshot
(TypeError in pypaimon 2.1).

Consumer progress (`consumer_id`) is the consumer's to record: the server cannot know what a
client has processed (gRPC buffers MiBs of what was sent). A follow starts at the consumer's
recorded progress and, after each snapshot, sends a zero-row batch marked `{"done": N}`; a
consumer that has processed everything before that mark on every endpoint commits N + 1 with
`consumer_commit`. A crash repeats what was not committed and never skips.

A follow also checks, whenever it reaches a new snapshot and while it waits, that its table is
the one it was planned on (`compat.table_identity`): a dropped table ends the follow with an
error, and a table created again under the same name is never read.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import structlog

from flight_server.paimon import compat
from flight_server.paimon.scope import select_splits, ticket_buckets
from flight_server.polling import Slices
from flight_server.tickets import PaimonTicket
from flight_server.wire import messages, names
from flight_server.wire.errors import (
    Cancelled,
    NotFound,
    SchemaChanged,
    Unavailable,
    WrongState,
)
from flight_server.wire.requests import PaimonRequest

log = structlog.get_logger(__name__)

def start_position(scope, req: PaimonRequest, latest_id: int | None) -> tuple[int | None, int]:
    """Pin the follow's start into the ticket: an optional full scan, then the first delta.

    A consumer's recorded progress beats the start position (as in Paimon's connectors).
    """
    sm = scope.table.snapshot_manager()
    earliest = compat.earliest_snapshot_id(sm) if latest_id is not None else None
    full, nxt = None, (latest_id or 0) + 1
    stored = compat.read_consumer(scope.table, req.consumer_id) if req.consumer_id else None
    if stored is not None:
        nxt = stored
    elif req.start == "latest-full":
        full = latest_id
    elif req.start == "earliest" and earliest is not None:
        # Deltas from snapshot 1 replay every commit in order; once early snapshots have
        # expired, the earliest one's full content stands in for them.
        full, nxt = (None, 1) if earliest == 1 else (earliest, earliest + 1)
    elif req.start_snapshot is not None:
        n = req.start_snapshot
        if n > nxt:
            raise NotFound(
                f"Follow of Paimon table {req.table!r} cannot start at snapshot {n}: the latest is "
                f"{latest_id}; start at most at snapshot:{nxt}.", table=req.table, snapshot=n)
        if earliest is not None and n < earliest:
            raise NotFound(
                f"Follow of Paimon table {req.table!r} cannot start at snapshot {n}: it has expired; "
                f"the earliest is {earliest}.", table=req.table, snapshot=n)
        if req.start.startswith("snapshot-full:"):
            if n > (latest_id or 0):
                raise NotFound(
                    f"Follow of Paimon table {req.table!r} cannot read snapshot {n} in full: the latest is "
                    f"{latest_id}.", table=req.table, snapshot=n)
            full, nxt = n, n + 1
        else:
            nxt = n
    return full, nxt


def scans(scope, planner, snapshot) -> bool:
    """Whether the snapshot has rows for a delta or follow read. Raises when rows it committed can
    never arrive: a table whose changelog only compaction writes (changelog-producer lookup or
    full-compaction) where no recent snapshot has one, so nothing writes it (neither pypaimon nor this
    server's compaction does),
    and a follow would wait forever on an empty stream."""
    if compat.should_scan(planner, snapshot):
        return True
    producer = compat.compaction_changelog_producer(scope.table)
    if producer and compat.is_data_commit(snapshot) and not compat.recent_changelog(scope.table.snapshot_manager()):
        raise WrongState(
            f"Paimon table {scope.name!r} has changelog-producer {producer!r}: its changelog is written by "
            f"compaction, and none of its last {compat.RECENT_SNAPSHOTS} snapshots has one (snapshot "
            f"{snapshot.id} committed rows without it), so nothing writes it and a delta or follow read "
            "would stay empty. Read it in full (a snapshot), run Paimon's compaction on it (Spark or Flink "
            "`compact`), or create it with changelog-producer 'input'.", table=scope.name, snapshot=snapshot.id)
    return False


def snapshot_delta(scope, planner, snapshot, buckets: set | None) -> Iterator:
    """`(batch, app_metadata)` of the rows one snapshot committed, in the given buckets."""
    if not scans(scope, planner, snapshot):
        return
    splits = compat.delta_splits(planner, snapshot)
    if buckets is not None:
        splits = [s for s in splits if s.bucket in buckets]
    splits.sort(key=compat.split_sort_key)
    yield from scope.batches(splits, messages.snapshot_mark(snapshot.id))


def followed_delta(scope, planner, snapshot, buckets: set | None, identity: str | None) -> Iterator:
    """A follow's `snapshot_delta`: a table dropped under it ends NOT_FOUND saying so, a snapshot
    expired between the follow finding it and reading its files NOT_FOUND naming it (as every
    other read, `Scope.expired_named`); other errors pass unchanged."""
    with scope.expired_named([snapshot.id]):  # outside: a dropped table is named as dropped, not expired
        with _dropped_is_not_found(scope.table, scope.name, identity):
            yield from snapshot_delta(scope, planner, snapshot, buckets)


def check_identity(table, name: str, identity: str | None) -> None:
    """Raise unless the table is still the one a ticket was planned on."""
    now = compat.table_identity(table)
    if now == identity:
        return
    if now is None:
        raise NotFound(f"Paimon table {name!r} was dropped; the read ends here.", table=name)
    raise NotFound(
        f"Paimon table {name!r} was dropped and created again; this read belonged to the earlier "
        "table and ends here. Plan a new read for the new table.", table=name)


class Position:
    """Where one open follow is: the next snapshot it will send (read by the metrics' lag)."""

    def __init__(self, table: str, next_snapshot: int):
        self.table, self.next = table, next_snapshot


def follow(scope, ticket: PaimonTicket, is_cancelled: Callable[[], bool], stopping: threading.Event,
           position: Position) -> Iterator:
    """The unbounded stream of one follow endpoint; ends only with the client, the server or the table."""
    req, table = scope.req, scope.table
    buckets = ticket_buckets(ticket)
    full, nxt, identity = ticket.full, ticket.next, ticket.identity
    log.info("follow_start", table=req.table, buckets=sorted(buckets) if buckets else None,
             full=full, next=nxt, consumer_id=req.consumer_id)
    planner = compat.new_delta_planner(table, scope.predicate, req.columns)
    sm = table.snapshot_manager()
    poll_s = req.poll_interval_ms / 1000.0
    no_rows = pa.RecordBatch.from_pylist([], schema=scope.schema)  # carries the done marks
    opened = compat.columns_of(table)  # the columns it opened with, which it keeps
    schema_id = opened.schema_id
    ends_at_change = req.on_schema_change == names.SCHEMA_CHANGE_END
    retypes: dict[int, bool] = {}  # schema id -> whether it changed the type of a column the follow reads
    try:
        if full is not None:  # a consumer's first full read is protected by nothing: expiry may take it
            with scope.expired_named([full]):
                splits = select_splits(scope.snapshot_splits(full), buckets, None)
                yield from scope.batches(splits, messages.snapshot_mark(full))
            nxt = full + 1
        position.next = nxt
        if nxt > 1:
            yield no_rows, messages.done_mark(nxt - 1)  # everything before the start is done
        while True:
            with _dropped_is_not_found(table, req.table, identity):
                snap = compat.snapshot(sm, nxt)
                check_identity(table, req.table, identity)  # after the read: that snapshot was ours
                if snap is None:
                    _check_not_expired(req.table, sm, nxt)
            if snap is None:
                _wait(poll_s, is_cancelled, stopping, req.table)
                continue
            if snap.schema_id > schema_id and (ends_at_change or _retypes(table, opened, snap.schema_id, retypes)):
                raise _schema_changed(req.table, snap, schema_id)  # going on would read its values in old types
            yield from followed_delta(scope, planner, snap, buckets, identity)
            yield no_rows, messages.done_mark(nxt)
            nxt += 1
            position.next = nxt
    finally:
        compat.close_planner(planner)


def _retypes(table, opened, schema_id: int, known: dict[int, bool]) -> bool:
    """Whether schema `schema_id` changed the type of a column the follow reads: read in the type
    it opened with, a widened value could come out wrong (null), so even a follow that goes on
    across changes ends there."""
    if schema_id not in known:
        later = compat.columns_at(table, schema_id)
        known[schema_id] = later is not None and bool(compat.retyped(opened, later))
    return known[schema_id]


def _schema_changed(name: str, snap, schema_id: int) -> SchemaChanged:
    """The end of a follow (`"on_schema_change": "end"`) at the first snapshot of a newer schema."""
    return SchemaChanged(
        f"Paimon table {name!r} changed its schema: snapshot {snap.id} was written with schema {snap.schema_id}, "
        f"this follow opened with schema {schema_id}; every row before snapshot {snap.id} was sent. Open the "
        f"follow again at snapshot {snap.id} (\"start\": \"snapshot:{snap.id}\", or its consumer_id once it "
        f"committed {snap.id}) to read on with the new columns.",
        table=name, snapshot=snap.id, schema_id=snap.schema_id, opened_with=schema_id)


@contextlib.contextmanager
def _dropped_is_not_found(table, name: str, identity: str | None):
    """A file that vanishes under a read (the table was dropped meanwhile) ends the follow with the
    clear NotFound of `check_identity`, not an internal error; other errors pass unchanged."""
    try:
        yield
    except (OSError, RuntimeError):
        check_identity(table, name, identity)
        raise


def _check_not_expired(name: str, sm, nxt: int) -> None:
    earliest = compat.earliest_snapshot_id(sm)
    if earliest is not None and earliest > nxt:
        raise NotFound(
            f"Follow of Paimon table {name!r} needs snapshot {nxt}, which has expired (the earliest is "
            f"{earliest}); restart the follow from 'latest-full' or a fresh consumer_id.",
            table=name, snapshot=nxt)


def _wait(seconds: float, is_cancelled: Callable[[], bool], stopping: threading.Event, name: str) -> None:
    deadline = time.monotonic() + seconds
    slices = Slices()
    while True:
        if is_cancelled():
            raise Cancelled(f"The client of the follow of Paimon table {name!r} went away.")
        if stopping.is_set():
            raise Unavailable(f"The follow of Paimon table {name!r} ended: the server is shutting down; reconnect "
                              "to another server, or to this one once it is back.")
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(slices(), left))

