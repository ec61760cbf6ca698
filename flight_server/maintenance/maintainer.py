"""The server's table maintenance: after commits, on one thread, each table at most once a second.

Durable ingest tells it a table committed; the thread then compacts the table's buckets that need
it and expires its snapshots, as Java Paimon's writer and committer do inline (docs/protocol.md,
"Table maintenance"). The thread picks what to compact; the rewrite runs in the rewrite worker
process (workers.py; here with --maintenance-workers 0) and its commit on the table's commit step
between group commits (here for a table this server does not write). The actions run the same
steps by hand, for any table of the warehouse. A table is maintained by one step at a time on this
server (a lock per table); several servers over one warehouse rely on Paimon's commit: a
compaction that conflicts fails and is retried at the next round, and expiry deletes only files
no retained snapshot, tag or consumer needs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import structlog

from flight_server.ingest.seqs import ProducerSeqs, RecordsUnwritable
from flight_server.maintenance import compaction, expiry, kv_files, orphans
from flight_server.maintenance.options import MaintenanceOptions
from flight_server.maintenance.store import TableStore
from flight_server.maintenance.workers import RewriteWorker
from flight_server.paimon.warehouse import PaimonSource
from flight_server.wire.actions import (
    Compacted,
    LastCompaction,
    LastExpiry,
    MaintenanceStats,
    OrphansRemoved,
    SnapshotsExpired,
)
from flight_server.wire.errors import InvalidRequest, Unavailable

log = structlog.get_logger(__name__)

ROUND_S = 1.0  # a table is maintained at most this often after commits
SETTLE_S = 5.0  # a table quiet this long gets one settling round (compaction.settle_pick)
SETTLE_RETRY_S = 60.0  # a settling round that failed is tried again this much later
JOIN_S = 5.0  # close() waits this long for the step in flight (a server killed mid-step loses nothing)
ORPHANS_EVERY_S = 3600.0  # a table's orphan files are looked for this often (and at its first round)
ROUND_BUDGET_S = 5.0  # a round repeats a step that found work for at most this long (then other tables' turn)
COMMIT_WAIT_S = 60.0  # a compaction's commit waits this long for the table's committer
# Rounds hold the serving interpreter (planning, commits, expiry) for at most this share of the
# time: after a round that took C s of CPU the next waits C * (1 / DUTY - 1), so with hundreds of
# tables committing, each table's rounds stretch instead of starving do_put and the group commits.
DUTY = 0.25


@dataclass
class TableState:
    """What maintenance did for one table on this server (the `stats` action and /metrics)."""

    snapshots: int = 0
    data_files: int = 0
    data_bytes: int = 0
    compactions: int = 0
    compacted_bytes: int = 0  # bytes of the files compactions rewrote
    ingested_bytes: int = 0  # bytes of the data files this server's group commits wrote
    unsettled_bytes: int = 0  # of those, written since the last settling merge (its budget)
    last_compaction: LastCompaction | None = None
    expiries: int = 0
    last_expiry: LastExpiry | None = None
    files_deleted: int = 0
    # name -> (path, size) of the files compactions wrote whose commit failed: no snapshot names
    # them; they stay until an orphan pass deletes them (once older than its older_than)
    uncommitted: dict = field(default_factory=dict, repr=False)
    last_error: str | None = None
    cpu_s: float = 0.0  # the maintenance thread's CPU time in this table's rounds
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    consumers: threading.Lock = field(default_factory=threading.Lock, repr=False)  # expiry, a consumer commit or a tag

    @property
    def write_amplification(self) -> float | None:
        """Bytes compactions rewrote per byte this server's commits wrote (None before any)."""
        return round(self.compacted_bytes / self.ingested_bytes, 3) if self.ingested_bytes else None

    def to_wire(self, due: bool) -> MaintenanceStats:
        return MaintenanceStats(
            self.snapshots, self.data_files, self.data_bytes, self.compactions, self.compacted_bytes,
            self.ingested_bytes, self.write_amplification, self.last_compaction, self.expiries, self.last_expiry,
            self.files_deleted, len(self.uncommitted), sum(size for _, size in self.uncommitted.values()),
            self.last_error, round(self.cpu_s, 3), due)


class Maintainer:
    """Compaction and expiry of the Paimon tables one server writes (and, by hand, of any table)."""

    def __init__(self, paimon: PaimonSource, round_s: float = ROUND_S, clock=time.time, committers=None,
                 staged=None, settle_s: float = SETTLE_S, worker: RewriteWorker | None = None):
        """`committers(name)`: this server's committer of a table it writes, or None; a compaction's
        commit then runs on it, between its group commits. `staged(name)`: the names of files its
        staged writes hold for a commit to come (orphan removal keeps them)."""
        self.paimon = paimon
        self._committers = committers or (lambda name: None)
        self._staged = staged or (lambda name: set())
        self.round_s, self.settle_s, self.clock = round_s, settle_s, clock
        self.worker = worker or RewriteWorker(None, None, processes=0)
        self._cond = threading.Condition()
        self._due: dict[str, float] = {}  # table -> when it may run next (committed since its last round)
        self._settle: dict[str, float] = {}  # table -> when it will have been quiet for settle_s
        self._last: dict[str, float] = {}
        self._tables: dict[str, TableState] = {}
        self._closed = False
        self._running: str | None = None
        self._forget_after: str | None = None  # dropped during its round: forgotten once it ends
        self._orphans_at: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name="maintenance", daemon=True)
        self._thread.start()

    def committed(self, table: str, file_bytes: int = 0) -> None:
        """Durable ingest committed `file_bytes` of data files into `table`: a round is due, and
        a settling round once it has been quiet for settle_s."""
        state = self._state(table)
        with self._cond:
            state.ingested_bytes += file_bytes
            state.unsettled_bytes += file_bytes
            self._settle[table] = time.monotonic() + self.settle_s
            self._want_round(table)

    def _want_round(self, table: str) -> None:
        with self._cond:
            if table not in self._due:
                self._due[table] = self._last.get(table, 0.0) + self.round_s
                self._cond.notify_all()

    def forget(self, table: str) -> None:
        """A dropped table: no rounds, no settling, nothing in `stats` (a round in flight is
        forgotten as it ends)."""
        with self._cond:
            self._drop_state(table)
            if self._running == table:
                self._forget_after = table

    def _drop_state(self, table: str) -> None:
        for d in (self._tables, self._due, self._settle, self._last, self._orphans_at):
            d.pop(table, None)

    def stats(self) -> dict[str, MaintenanceStats]:
        """Per table: what maintenance did, and `due` while a round (or the settling round after
        its last commit) is wanted or running."""
        with self._cond:
            busy = set(self._due) | set(self._settle) | {self._running}
            return {name: state.to_wire(name in busy) for name, state in sorted(self._tables.items())}

    def close(self) -> None:
        """Stop after the step in flight (`join` waits for it)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.worker.close()

    def join(self, timeout: float = JOIN_S) -> bool:
        """After `close`: wait (at most `timeout` s) for the step in flight; False if it outlived the bound
        (a server killed mid-step loses nothing)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- by hand (the actions) -------------------------------------------------------------

    def compact(self, name: str, partition: dict | None = None) -> Compacted:
        """Every small file of every bucket (or of `partition`) rewritten, as Paimon's `compact`."""
        return self._step(name, lambda store, opts: self._compact(name, store, opts, partition, full=True))

    def expire_snapshots(self, name: str, retain_max: int | None = None, retain_min: int | None = None,
                         older_than_ms: int | None = None, max_deletes: int | None = None) -> SnapshotsExpired:
        return self._step(name, lambda store, opts: self._expire(name, store, opts, retain_max, retain_min,
                                                                 older_than_ms, max_deletes))

    def remove_orphan_files(self, name: str, older_than_ms: int | None = None, dry_run: bool = False) -> OrphansRemoved:
        return self._step(name, lambda store, opts: self._orphans(name, store, older_than_ms, dry_run))

    def consumer_commit(self, name: str, consumer_id: str, next_snapshot: int) -> None:
        """Record a consumer's progress, never while this server expires the table: an expiry run
        reads the consumers before it deletes, so a commit answered before it ends would otherwise
        not be seen by it. A commit that waited for one finds its snapshot kept, or is refused."""
        with self._state(name).consumers:
            self.paimon.consumer_commit(name, consumer_id, next_snapshot)

    def create_tag(self, name: str, tag: str, snapshot: int | None, time_retained_ms: int | None) -> int:
        """Tag a snapshot, never while this server expires the table (as consumer_commit): the
        snapshot found kept is kept until the tag names it."""
        with self._state(name).consumers:
            return self.paimon.create_tag(name, tag, snapshot, time_retained_ms)

    def maintain(self, name: str, settle: bool = False) -> bool:
        """One round after commits: compact what needs it and expire, in turn, again while either
        finds more to do (commits may outrun one compaction of max-file-num files, or one expiry of
        snapshot.expire.limit snapshots) for up to ROUND_BUDGET_S; True if work was left. A
        `settle` round (the table quiet) then merges what a quiet table's reads want merged."""
        def both(store, opts):
            committer = self._committers(name)
            if committer is not None and committer.is_open:  # the seqs of the commits since the last round
                try:
                    committer.producers.checkpoint()
                except RecordsUnwritable:  # logged; acks rest on snapshots: expiry waits, the round goes on
                    pass
            if not opts.enabled:
                return {"more": False}
            deadline = time.monotonic() + ROUND_BUDGET_S
            # A merge tree this server cannot merge (kv_files.unsupported) is expired only.
            compacts = not store.table.primary_keys or kv_files.unsupported(store.table) is None
            expires = expiry.unsupported(opts) is None  # changelogs kept apart: Paimon's own expiry
            failed = None  # a compaction that fails must not stop expiry: the error is raised after it
            held = None  # nor must expiry held back by unwritable producer records stop compaction: reported last
            more = True  # until a turn finds nothing: out of time with work left, another round follows
            while more and time.monotonic() < deadline and not self._closed:  # in turn: neither starves the other
                compacted = False
                if compacts and failed is None:
                    try:
                        compacted = bool(self._compact(name, store, opts, None, full=False).snapshots)
                    except Unavailable:
                        raise
                    except Exception as e:  # noqa: BLE001 - reported as the round's error below
                        failed = e
                expired = False
                if expires:
                    try:
                        expired = bool(self._expire(name, store, opts).expired)
                    except RecordsUnwritable as e:  # it expired what the records allow
                        held, expires = e, False
                more = compacted or expired
            if failed is not None:
                raise failed
            if more:  # a held expiry is reported by the round that finds no more work
                return {"more": True}
            if settle and compacts:
                state = self._state(name)
                budget = compaction.SETTLE_COST * state.unsettled_bytes
                if self._compact(name, store, opts, None, full=False, settle=budget).snapshots:
                    state.unsettled_bytes = 0
                    return {"more": True}  # expiry of what it replaced, in the next round
            if self._orphans_due(name):
                try:
                    self._orphans(name, store, None)
                except InvalidRequest as e:  # branches, or changelogs kept apart: left to Paimon's procedure
                    log.info("orphan_removal_skipped", table=name, reason=str(e))
            if held is not None:
                raise held
            return {"more": False}

        return self._step(name, both)["more"]

    # -- the steps ---------------------------------------------------------------------------

    def _state(self, name: str) -> TableState:
        with self._cond:
            return self._tables.setdefault(name, TableState())

    def _step(self, name: str, step):
        table = self.paimon.table(name)
        opts = MaintenanceOptions.of(name, dict(table.options.options.to_map()), bool(table.primary_keys))
        state = self._state(name)
        with state.lock:
            store = TableStore(table, name)
            result = step(store, opts)
            self._observe(store, state)
            return result

    def _compact(self, name: str, store: TableStore, opts: MaintenanceOptions, partition, full: bool,
                 settle: int | None = None) -> Compacted:
        committer = self._committers(name)
        commit_with = None if committer is None else (lambda fn: committer.between_commits(fn, COMMIT_WAIT_S))
        state = self._state(name)

        def uncommitted(files: dict) -> None:  # on the table's commit step, or this thread
            with self._cond:
                state.uncommitted.update(files)

        found = compaction.compact(store, opts, partition, full, commit_with, uncommitted, settle, self.worker)
        done = Compacted(list(found.snapshots), found.files_in, found.files_out, found.bytes_in, found.upgraded)
        if done.snapshots:
            state.compactions += len(done.snapshots)
            state.compacted_bytes += done.bytes_in
            state.last_compaction = LastCompaction(int(self.clock() * 1000), done)
        return done

    def _expire(self, name: str, store: TableStore, opts: MaintenanceOptions, retain_max=None, retain_min=None,
                older_than_ms=None, max_deletes=None) -> SnapshotsExpired:
        state = self._state(name)
        unwritable: list[RecordsUnwritable] = []

        def covered_through() -> int:
            """Through which snapshot the producer records give the map; when the warehouse refuses a
            new record, as far as the records on disk go (never a snapshot whose map none covers)."""
            try:
                return self._producers(name, store).checkpoint()
            except RecordsUnwritable as e:
                unwritable.append(e)
                return e.covered

        with state.consumers:  # a consumer commit waits for the run (consumer_commit)
            done = expiry.expire(store, opts, int(self.clock() * 1000), retain_max, retain_min, older_than_ms,
                                 covered_through=covered_through, max_deletes=max_deletes)
        result = SnapshotsExpired(done.expired, done.first_kept, done.files_deleted, list(done.consumers_removed))
        state.files_deleted += done.files_deleted
        if done.expired:
            state.expiries += 1
            state.last_expiry = LastExpiry(int(self.clock() * 1000), result)
        if unwritable and done.held_by_records:  # the step says why it stopped short (what it did, in the log)
            reason = unwritable[0].detail.get("reason")
            log.warning("expiry_held_by_producer_records", table=name, expired=done.expired,
                        first_kept=done.first_kept, reason=reason)
            raise RecordsUnwritable(
                f"Snapshot expiry of Paimon table {name!r} stopped at snapshot {done.first_kept} ({done.expired} "
                f"expired): the server cannot write its producer records ({reason}); fix the warehouse's "
                "permissions or free space (the server log names the directory), then expire again. Writes go on.",
                covered=unwritable[0].covered, table=name, reason=reason, expired=done.expired,
                first_kept=done.first_kept)
        return result

    def _producers(self, name: str, store: TableStore) -> ProducerSeqs:
        """The named producers' seqs of the table: its committer's here, else read from the table."""
        committer = self._committers(name)
        return committer.producers if committer is not None and committer.is_open else ProducerSeqs(store.table)

    def _orphans(self, name: str, store: TableStore, older_than_ms: int | None, dry_run: bool = False) -> OrphansRemoved:
        state = self._state(name)
        with self._cond:
            watched = dict(state.uncommitted)
        done = orphans.remove_orphan_files(store, int(self.clock() * 1000), older_than_ms,
                                           frozenset(self._staged(name)), dry_run)
        state.files_deleted += done.deleted
        # A failed compaction's files are counted until gone: a pass deletes them once older than
        # its older_than (a day by default), or another server's pass did.
        gone = [n for n, (path, _) in watched.items() if not store.exists(path)]
        with self._cond:
            for n in gone:
                state.uncommitted.pop(n, None)
        if done.would_delete is None:
            return OrphansRemoved(done.deleted, done.bytes, done.scanned)
        return OrphansRemoved(done.deleted, done.bytes, done.scanned, [path for path, _ in done.would_delete],
                              sum(size for _, size in done.would_delete))

    def _orphans_due(self, name: str) -> bool:
        """Orphans are looked for once an ORPHANS_EVERY_S per table (it lists every file)."""
        now = time.monotonic()
        with self._cond:
            if now - self._orphans_at.get(name, -ORPHANS_EVERY_S) < ORPHANS_EVERY_S:
                return False
            self._orphans_at[name] = now
            return True

    def _observe(self, store: TableStore, state: TableState) -> None:
        latest, earliest = store.latest(), store.earliest_id()
        state.snapshots = 0 if latest is None or earliest is None else latest.id - earliest + 1
        files = [f for group in store.live_files(latest).values() for f in group]
        state.data_files, state.data_bytes = len(files), sum(f.size for f in files)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._due and not self._settle:
                    self._cond.wait()
                if self._closed:
                    return
                # a table's settling round waits for its rounds after commits
                waiting = [(due, name, False) for name, due in self._due.items()]
                waiting += [(at, name, True) for name, at in self._settle.items() if name not in self._due]
                due, name, settle = min(waiting)
                wait = due - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                del (self._settle if settle else self._due)[name]
                self._last[name] = time.monotonic()
                self._running = name
            cpu0 = time.thread_time()
            try:
                if self.maintain(name, settle):
                    self._want_round(name)
                    if settle:  # settles once the work left is done
                        with self._cond:
                            self._settle.setdefault(name, time.monotonic())
                self._state(name).last_error = None
            except Unavailable as e:  # the table's committer closed (shutdown, drop): its next commit asks again
                log.info("maintenance_stopped", table=name, reason=str(e))
            except Exception as e:  # noqa: BLE001 - maintenance must never stop; the next round retries
                log.warning("maintenance_failed", table=name, error=str(e).splitlines()[0] if str(e) else type(e).__name__,
                            exc_info=True)
                self._state(name).last_error = str(e).splitlines()[0][:500] if str(e) else type(e).__name__
                if settle:  # a quiet table gets no commit to ask again: its settling round is retried
                    with self._cond:
                        self._settle.setdefault(name, time.monotonic() + SETTLE_RETRY_S)
            finally:
                cpu = time.thread_time() - cpu0
                with self._cond:
                    self._running = None
                    if self._forget_after == name:  # dropped during its round: nothing of it stays
                        self._forget_after = None
                        self._drop_state(name)
                    else:
                        self._state(name).cpu_s += cpu
                    rest = time.monotonic() + cpu * (1 / DUTY - 1)
                    while not self._closed and time.monotonic() < rest:
                        self._cond.wait(rest - time.monotonic())
