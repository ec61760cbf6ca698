"""Group commits: the batches of every producer stream of one Paimon table, one snapshot at a time.

Streams `submit` batches into one queue. Writer lanes take them off it a chunk at a time
(64k rows or 8 MiB, coalesced into one Arrow batch: pypaimon's per-call work and a thread's
wake-up are paid per chunk, not per producer batch; a seal takes the rest) and write them with
pypaimon's native (Rust) writer, which encodes Parquet without the GIL. Where Paimon lets
several writers share a bucket (append tables with bucket -1) each lane has its own writer; a table that routes rows to
buckets (primary keys, fixed buckets) has one, as Java Paimon writes a bucket through one writer.

Neither has threads of its own: the server's writer pool (ingest/writer_pool.py) runs the
writer lanes, each pinned to one of its threads, and its commit pool (ingest/commit_pool.py) runs
the committer's `step` when it is due. A step seals what is written at most every `interval_s`
(sooner once `commit_bytes` are received): the writers write what is queued, pause, each prepares
its files, and they go on writing while the step commits the files as one snapshot whose properties
carry the named producers' last seqs (`ProducerSeqs`). Only then does each batch's stream get
its ack `(seq, snapshot)`. Batches are taken from the queue in order and a seal waits for every
write in progress, so a commit holds a prefix of every stream: the seqs it records are exact.
A failed write or commit fails every stream that had a batch in it or written since, with the
cause, and acks none of them.

Memory and latency are bounded the same way: `submit` blocks (gRPC flow control then stops the
producer) while `queue_bytes` wait for a writer, so what a server holds for a table is that
queue, one coalesced batch per writer, and the files being written since the last commit.

This module is the path of a batch from `submit` to its ack, and the commit step that seals
groups, has them published and acks them; the parts it is made of each own one job:
`publisher` (every commit into the table, group or staged, and the producer map, `seqs`, its
snapshots carry), `batch_queue` (the bounded queue, when a commit is due), `fence` (each named
producer's writing stream and batches in flight), `lanes` (the writer lanes, and the `Signal`
they share with it: one lock), `chores` (what runs between group commits), `trim` (when freed
memory goes back), `write_stream` (a stream's acks), `commit_pool` and `writer_pool` (the
server's threads that run them), `commit_workers` (the processes a commit's Paimon work may run in).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pyarrow as pa
import structlog

from flight_server.ingest.batch_queue import (
    BatchQueue,
    CommitPolicy,
    default_queue_bytes,
)
from flight_server.ingest.chores import Chore
from flight_server.ingest.commit_pool import CommitPool
from flight_server.ingest.commit_workers import CommitWorkers, WorkerDied
from flight_server.ingest.evolve import evolve
from flight_server.ingest.fence import ProducerFence
from flight_server.ingest.lanes import Signal, WriterLanes, close_quietly
from flight_server.ingest.publisher import Publisher
from flight_server.ingest.seqs import ProducerSeqs
from flight_server.ingest.trim import TrimPolicy
from flight_server.ingest.write_stream import END, WriteStream
from flight_server.ingest.writer_pool import WriterPool
from flight_server.paimon import compat
from flight_server.wire import allocator
from flight_server.wire.actions import PaimonWriteStats
from flight_server.wire.errors import (
    Cancelled,
    CommitFailed,
    CommitRaced,
    FlightPaimonError,
    InvalidRequest,
    TableReplaced,
    Unavailable,
    WrongState,
)

log = structlog.get_logger(__name__)

__all__ = ["DEFAULT_WRITERS", "SETTLE_TIMEOUT_S", "TableCommitter"]

DEFAULT_WRITERS = max(1, min(8, (os.cpu_count() or 1) // 2))  # lanes of a bucket -1 table: the other half receives, acks and maintains
EXCLUSIVE_ATTEMPTS = 3  # group commits tried before a staged job's commit gives up (they keep failing)
STAGED_ROWS_TIMEOUT_S = 3600.0  # how long a staged job's commit may take to write its rows (commit_rows)
SCHEMA_CHECK_S = 1.0  # how often its commit step looks for a newer schema (an ALTER by anyone)
# How often a stream waiting for room or for its acks looks whether its call was cancelled (gRPC
# says so only when asked); acks, failures, room and a close wake it at once. A waiting stream's
# wake-ups cost the GIL the commits need: at 0.1 s, 1,000 streams waiting for their acks woke
# 10,000 times a second (docs/benchmarks_ingest.md, "Many tables on one server").
CANCEL_CHECK_S = 1.0
SETTLE_TIMEOUT_S = 30.0  # how long a producer's new stream (or producer_state) waits for its batches written before


@dataclass
class _Pending:
    stream: WriteStream
    seq: int  # what the ack says: the producer's seq, or the batch's index on an unnamed stream
    order: int  # when it was queued: acks go out in this order
    batch: pa.RecordBatch | None  # None once handed to the writer
    nbytes: int
    rows: int


class TableCommitter:
    """The one committer of a Paimon table on this server."""

    def __init__(self, name: str, table, interval_s: float, commit_bytes: int, *, writer_pool: WriterPool,
                 commit_pool: CommitPool, commit_workers: CommitWorkers | None = None, on_commit=None,
                 writers: int = DEFAULT_WRITERS, queue_bytes: int | None = None, reload=None):
        """`writer_pool`, `commit_pool`: the server's threads its writes and commits run on;
        `commit_workers`: the processes its commits' Paimon work runs in (None: this one);
        `reload()`: the table afresh (its newest schema), for an ALTER found between commits."""
        self.name = name
        self._pool = commit_pool
        self.publisher = Publisher(name, table, commit_workers)  # every commit into the table
        self._reload = reload
        self._schema_checked = self._last_active = time.monotonic()
        self.evicted = False  # closed by `retire_if_idle`: the table's next stream gets a new committer
        self.interval_s, self.commit_bytes = interval_s, commit_bytes
        self.policy = CommitPolicy(interval_s, commit_bytes)
        self.queue_bytes = queue_bytes or default_queue_bytes(commit_bytes)
        self._on_commit = on_commit  # (table, rows, Arrow bytes, seconds, data file bytes) after each commit
        self.signal = Signal()  # the lock of its writes: the streams, the writer lanes and the commit step
        self._queue = BatchQueue(self.queue_bytes)  # _Pending batches waiting for a writer, in order
        self._order = 0
        self._flush_to: int | None = None  # a seal is coming: writers take what is queued up to this order
        self._written: list[_Pending] = []  # written since the last seal
        self._written_bytes = 0
        self._sealing = False  # a commit step is taking what is written: writers wait
        self._broken: BaseException | None = None  # a write failed: the writers' state is unknown
        self._inflight: list[_Pending] = []  # sealed, being committed
        self._fence: ProducerFence[WriteStream] = ProducerFence()  # each named producer's stream and batches in flight
        self._streams: set[WriteStream] = set()  # open streams
        self._closed: str | None = None
        self._stopped = False  # closed, and its last step ran: it commits nothing more
        self._last_start = 0.0
        self._trim = TrimPolicy()
        self._chores: list[Chore] = []  # run by its step between group commits (compaction and staged commits)
        self._chores_run, self._chore_ms_max = 0, 0.0  # how long a chore held the next group commit back
        self._commit_cpu_s = 0.0  # its steps' CPU time in group commits
        self.writers = min(writers, writer_pool.size) if compat.shares_buckets(table) else 1
        self._lanes = WriterLanes(self, self.writers, writer_pool)

    @property
    def table(self):
        return self.publisher.table

    @property
    def identity(self):
        return self.publisher.identity

    @property
    def columns(self) -> compat.Columns:
        return self.publisher.columns

    @property
    def producers(self) -> ProducerSeqs:
        return self.publisher.producers

    # -- the streams' side ---------------------------------------------------------------

    def open(self, label: str, producer: str | None) -> WriteStream:
        """A new stream. A named producer's older stream is fenced off (its queued batches dropped)
        and its batches already written land before the new stream may write, so the resent
        batches it holds are recognised as committed."""
        stream = WriteStream(label, producer)
        with self.signal:
            self._check_open()
            self._last_active = time.monotonic()
            if producer is not None:
                old = self._fence.current(producer)
                if old is not None:
                    self._fail(old, WrongState(
                        f"A newer stream of producer {producer!r} into Paimon table {self.name!r} took over; "
                        "this one's unacked batches were discarded."))
                    self._release(old)
                if not self.signal.wait_for(lambda: self._fence.settled(producer) or self._closed is not None,
                                           SETTLE_TIMEOUT_S):
                    raise Unavailable(f"Producer {producer!r}'s earlier batches into Paimon table {self.name!r} were "
                                      f"not committed within {SETTLE_TIMEOUT_S:.0f} s; resend later.")
                self._check_open()
                self._fence.take_over(producer, stream)
            self._streams.add(stream)
        return stream

    def submit(self, stream: WriteStream, batch: pa.RecordBatch, seq: int, cancelled) -> None:
        """Queue one batch (waiting while the queue is full); a named producer's batch the table
        already holds is acked at once and not written again."""
        with self.signal:
            self._check(stream)
            if stream.producer is not None:
                if stream.last_seq is not None and seq <= stream.last_seq:
                    raise InvalidRequest(
                        f"Producer {stream.producer!r} sent seq {seq} after {stream.last_seq} into Paimon table "
                        f"{self.name!r}; seqs must increase strictly on a stream.")
                stream.last_seq = seq
                last = self.producers.last_seq(stream.producer)
                if last is not None and seq <= last:
                    stream.skipped += 1
                    stream.acks.put((seq, self.producers.snapshot_of(stream.producer)))
                    return
            if stream.columns is not None and stream.columns.schema_id != self.columns.schema_id:
                batch = evolve(batch, stream.columns, self.columns, stream.label)  # opened before an ALTER
            nbytes = batch.get_total_buffer_size()  # a received batch's size (nbytes walks every buffer)
            while self._queue.full():
                self.signal.wait_room(CANCEL_CHECK_S)
                self._check(stream)
                if cancelled():
                    raise Cancelled(f"The producer's stream into {stream.label} was cancelled.")
            self._order += 1
            self._last_active = time.monotonic()
            before = self._queue.bytes + self._written_bytes
            self._queue.append(_Pending(stream, seq, self._order, batch, nbytes, batch.num_rows))
            stream.outstanding += 1
            if self.takeable():
                self._lanes.kick()  # a chunk is queued
            if self.policy.crossed(before, nbytes):
                self._pool.wake(self)  # a group starts, or is big enough to commit early

    def finish(self, stream: WriteStream, cancelled) -> None:
        """Wait until every batch of the stream is acked; raises the stream's error if it failed."""
        with self.signal:
            while stream.outstanding and stream.error is None:
                self.signal.wait(CANCEL_CHECK_S)
                self._check(stream)  # a closing server's UNAVAILABLE wins over the call's cancellation
                if cancelled():
                    raise Cancelled(f"The producer's stream into {stream.label} was cancelled before its acks.")
            self._check(stream)
            self._release(stream)

    def discard(self, stream: WriteStream) -> int:
        """The stream broke or failed in-band: drop its queued batches; returns how many.
        Its batches already written are committed with the next commit, never acked."""
        with self.signal:
            dropped = self._drop_queued(stream)
            self._release(stream)
            return dropped

    def _drop_queued(self, stream: WriteStream) -> int:
        dropped = self._queue.remove(lambda p: p.stream is stream)
        if dropped:
            stream.outstanding -= len(dropped)
            self._notify_everyone()
        return len(dropped)

    def close(self, reason: str) -> None:
        """Fail every open stream; it stops after the commit in flight (not waited for:
        a server that exits meanwhile is a server killed mid-commit, which loses nothing acked)."""
        with self.signal:
            self._closed = reason
            for stream in list(self._streams):
                self._fail(stream, Unavailable(f"{stream.label}: {reason}; its unacked batches were not committed."))
            self._queue.clear()
            self._notify_everyone()

    def adopt(self, table, timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Write with `table`'s schema when it is newer than the one written with (an ALTER by
        anyone): between two group commits, once what the writers made for the old schema is
        committed (Paimon reads those files with the new schema), batches still queued are
        evolved to it, and new writers are made for it."""
        if compat.columns_of(table).schema_id > self.columns.schema_id:
            self._exclusive_chore(lambda: self._swap(table), timeout)

    def _swap(self, table) -> None:
        """(Its commit step, every writer paused and dropped, nothing uncommitted.)"""
        fresh = compat.columns_of(table)
        with self.signal:
            if fresh.schema_id <= self.columns.schema_id:
                return
            for p in self._queue:
                if p.batch is None or p.stream.error is not None:
                    continue
                try:
                    p.batch = evolve(p.batch, self.columns, fresh, p.stream.label)
                except InvalidRequest as e:
                    self._fail(p.stream, e)  # its queued batches go with it
            log.info("schema_adopted", table=self.name, schema_id=fresh.schema_id, was=self.columns.schema_id)
            self.publisher.adopt(table)

    def _follow_schema(self) -> None:
        """(Its commit step, after a group commit.) At most once a second: an ALTER by anyone
        (another server, a Paimon job, pypaimon) is adopted before the next commit."""
        now = time.monotonic()
        if self._reload is None or now - self._schema_checked < SCHEMA_CHECK_S:
            return
        self._schema_checked = now
        try:
            if not compat.newer_schema(self.table, self.columns.schema_id):
                return
            table = self._reload()
        except Exception:  # noqa: BLE001 - the next check, or the next stream's open, tries again
            log.warning("schema_check_failed", table=self.name, exc_info=True)
            return
        self._exclusive(Chore(lambda: self._swap(table), exclusive=True))

    def retire_if_idle(self, idle_s: float, now: float, why: str | None = None) -> bool:
        """Close the committer when nothing of it is in use and nothing happened for `idle_s`
        seconds: no open stream, nothing queued, written or committing, no chore waiting. Its
        lanes then close their writers; the table's next stream gets a new committer,
        which reads the producer map and the table's identity from the table again."""
        with self.signal:
            busy = self._streams or self._queue or self._written or self._inflight or self._chores
            if busy or self._closed is not None or now - self._last_active < idle_s:
                return False
            why = why or f"its committer was idle over {idle_s:.0f} s"
            self._closed, self.evicted = f"{why} and it was closed", True
            self._notify_everyone()
            return True

    @property
    def last_active(self) -> float:
        """When a stream last opened or queued a batch, or a commit ended (time.monotonic)."""
        with self.signal:
            return self._last_active

    def settled(self, producer: str, timeout: float) -> None:
        """Wait (at most `timeout` s) until no batch of the producer is written but not yet
        committed: a stream that broke leaves those to the next commit, and `producer_state` must
        say what the table holds once they land."""
        with self.signal:
            self.signal.wait_for(lambda: self._fence.settled(producer) or self._closed is not None, timeout)

    def between_commits(self, fn, timeout: float):
        """Run `fn()` in the committer's step between two group commits and return its result (or
        raise its error): a compaction's commit then never races this server's own commits, whose
        optimistic retries back off exponentially (as Java Paimon's writer commits its compactions)."""
        chore = Chore(fn)
        with self.signal:
            self._check_open()
            self._chores.append(chore)
            self._pool.wake(self)
        if not chore.done.wait(timeout):
            raise TimeoutError(f"the committer of Paimon table {self.name!r} did not run a compaction's commit "
                               f"within {timeout} s")
        return chore.outcome()

    def commit_messages(self, messages: list, producer: str | None, seq: int | None,
                        timeout: float = SETTLE_TIMEOUT_S, extra: dict[str, str] | None = None) -> tuple[int | None, bool]:
        """Commit files another writer prepared (a staged job's) as one snapshot of their own (see
        `_exclusive`); with `producer`, its `seq` goes in the same commit, and a seq the table
        already holds commits nothing; `extra`: the snapshot's own properties (the stage's id).
        Returns (the snapshot, whether it was skipped so)."""
        return self._exclusive_chore(lambda: self._commit_prepared(messages, producer, seq, extra), timeout)

    def commit_rows(self, batches, producer: str | None, seq: int | None,
                    timeout: float = STAGED_ROWS_TIMEOUT_S, extra: dict[str, str] | None = None) -> tuple[int | None, bool]:
        """Write `batches()` (pairs of a batch and the schema version it was conformed to: it is
        evolved to the current one) with a writer of their own and commit them as one snapshot of
        their own (a staged job's rows, for a table whose one writer owns its keys' buckets); as
        `commit_messages` otherwise."""

        def write_and_commit() -> tuple[int | None, bool]:
            if self.publisher.holds(producer, seq):
                return self.producers.snapshot_of(producer), True
            writer, messages = self.publisher.new_writer(), []  # made, used and closed on this (commit pool) thread
            try:
                wrote = False
                for batch, columns in batches():
                    self._check_open()
                    if batch.num_rows:
                        writer.write_arrow_batch(evolve(batch, columns, self.columns, f"Paimon table {self.name!r}"))
                        wrote = True
                if wrote:
                    messages = writer.prepare_commit(self.publisher.ident + 1)
            finally:
                close_quietly(writer, self.name)
            return self._commit_prepared(messages, producer, seq, extra)

        return self._exclusive_chore(write_and_commit, timeout)

    def _commit_prepared(self, messages: list, producer: str | None, seq: int | None,
                         extra: dict[str, str] | None = None) -> tuple[int | None, bool]:
        """(Its commit step, writers paused.) `messages` as one snapshot with the producer's seq
        and the `extra` properties."""
        self._check_open()  # a table dropped meanwhile: never commit into its deleted directory
        if self.publisher.holds(producer, seq):
            return self.producers.snapshot_of(producer), True
        if not any(m.new_files for m in messages):
            return None, False
        updates = {} if producer is None else {producer: seq}
        self.publisher.next_identifier()
        start = time.perf_counter()
        snapshot = self.publisher.commit(messages, updates, dict(updates), extra=extra)
        files = [f for m in messages for f in m.new_files]  # a staged job's rows: metrics, ingested bytes, maintenance
        self._report_commit(sum(f.row_count for f in files), 0, time.perf_counter() - start,
                            sum(f.file_size for f in files))
        return snapshot, False

    def _exclusive_chore(self, fn, timeout: float):
        chore = Chore(fn, exclusive=True)
        with self.signal:
            self._check_open()
            self._chores.append(chore)
            self._pool.wake(self)
        if not chore.done.wait(timeout):
            with self.signal:
                withdrawn = chore in self._chores
                if withdrawn:
                    self._chores.remove(chore)
            if withdrawn:  # never started: it never commits, so the caller may say it failed
                raise Unavailable(f"The committer of Paimon table {self.name!r} did not reach a staged job's commit "
                                  f"within {timeout:.0f} s (long group commits ahead of it); nothing was committed, "
                                  "commit it again.")
            chore.done.wait()  # started: its outcome is what the caller must hear, however long it takes
        return chore.outcome()

    @property
    def is_open(self) -> bool:
        with self.signal:
            return self._closed is None

    @property
    def is_running(self) -> bool:
        """Whether its last step or a lane's closing is still to come (a closed committer's commit
        may still be landing)."""
        with self.signal:
            return not (self._stopped and self._lanes.finished())

    def join(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) until, after `close`, the write and the commit in flight
        landed and every lane closed its writer. False if that outlived the bound."""
        with self.signal:
            return self.signal.wait_for(lambda: self._stopped and self._lanes.finished(), timeout)

    def stats(self) -> PaimonWriteStats:
        """What `stats` shows of the table's durable writes on this server."""
        with self.signal:
            return PaimonWriteStats(
                queued_batches=len(self._queue), queued_bytes=self._queue.bytes, written_batches=len(self._written),
                in_commit_batches=len(self._inflight), writers=self.writers, write_cpu_s=self._lanes.cpu_s(),
                commit_cpu_s=round(self._commit_cpu_s, 3), named_producers_writing=self._fence.writing(),
                commits=self.publisher.ident, last_snapshot=self.producers.latest, closed=self._closed,
                maintenance_commits=self._chores_run, maintenance_commit_ms_max=round(self._chore_ms_max, 1))

    def _notify_everyone(self) -> None:
        """(Holding the lock.) Wake every waiter: for what is rare (a failure, a close, a drop)."""
        self.signal.everyone()
        self._lanes.kick()
        self._pool.wake(self)

    def _check_open(self) -> None:
        if self._closed is not None:
            raise Unavailable(f"Paimon table {self.name!r} takes no writes: {self._closed}.")

    def _check(self, stream: WriteStream) -> None:
        if stream.error is not None:
            raise stream.error
        self._check_open()

    def _release(self, stream: WriteStream) -> None:
        if not stream.closed:
            stream.acks.put(END)
        stream.closed = True
        self._streams.discard(stream)
        if stream.producer is not None:
            self._fence.release(stream.producer, stream)

    def _fail(self, stream: WriteStream, error: BaseException) -> None:
        """The stream failed: its queued batches go too (a later batch must never be committed
        without an earlier one)."""
        if stream.error is None:
            stream.error = error
            if not stream.closed:  # a producer waiting for acks (not sending) learns it from its acks
                stream.acks.put(error)
        self._drop_queued(stream)
        self._notify_everyone()

    # -- the writer lanes' side (lanes.Host, holding the lock) ------------------------------

    def closed(self) -> bool:
        return self._closed is not None

    def wrote(self, chunk: list[_Pending], error: BaseException | None) -> None:
        """A writer lane wrote `chunk` (or failed to: `error`). Its step is woken when this is the
        first written since a seal (a step that ran while the chunk was being written, neither
        queued nor written, found nothing to commit) or when it makes the group big enough to commit
        early (a step that ran then waits for the interval)."""
        pending = self._written_bytes + self._queue.bytes
        first = not self._written
        self._written.extend(chunk)
        nbytes = sum(p.nbytes for p in chunk)
        self._written_bytes += nbytes
        if error is not None:
            self.broke(error)
        elif first or self.policy.crossed(pending, nbytes):
            self._pool.wake(self)

    def broke(self, error: BaseException) -> None:
        """A write or prepare failed: the writers' state is unknown until its commit step fails the group."""
        if self._broken is None:
            self._broken = error
            self._pool.wake(self)  # its step fails the group

    def commit_identifier(self) -> int:
        return self.publisher.ident

    def new_writer(self):
        return self.publisher.new_writer()

    def takeable(self) -> bool:
        """(Holding the lock.) Whether a writer should take from the queue now (BatchQueue.takeable),
        unless a seal is taking what is written or a write failed."""
        return not self._sealing and self._broken is None and self._queue.takeable(self._flush_to)

    def take(self) -> list[_Pending]:
        """The next batches off the queue for one write (BatchQueue.take)."""
        chunk = self._queue.take(self._flush_to)
        for p in chunk:
            if p.stream.producer is not None:
                self._fence.taken(p.stream.producer)
        return chunk

    # -- the commit step -----------------------------------------------------------------

    def step(self) -> float | None:
        """(A commit pool thread: commit_pool.Job.) Run the chores asked for, then the group commit
        once it is due; returns seconds until the next one is due, or None when there is nothing
        to do until woken (or the committer closed: then it commits nothing more)."""
        with self.signal:
            chores, self._chores = self._chores, []
            if self._closed is not None:
                for chore in chores:
                    chore.fail(Unavailable(f"Paimon table {self.name!r} takes no commits: {self._closed}."))
                self._stopped = True
                self.signal.changed()
                return None
        for chore in chores:  # between group commits: at most one commit interval late
            start = time.perf_counter()
            if chore.exclusive:
                self._exclusive(chore)
            else:
                chore.run()
            self._chores_run += 1
            self._chore_ms_max = max(self._chore_ms_max, (time.perf_counter() - start) * 1000)
        with self.signal:
            if self._closed is not None:
                return 0  # its next step stops it: no commit after a drop's delete
            if not self._written and not self._queue and self._broken is None:
                return None
            if self._broken is None:
                left = self.policy.wait_s(self._written_bytes + self._queue.bytes, time.monotonic() - self._last_start)
                if left > 0:
                    return left
        self._group_commit()
        self._follow_schema()
        return 0  # the next step looks again: batches queued meanwhile, or nothing

    def _group_commit(self, hold: bool = False) -> None:
        """(Its commit step.) Seal what is queued and written now and commit it; with `hold`, the
        writers stay paused after a commit that landed."""
        with self.signal:
            self._last_start = time.monotonic()  # the interval runs from seal to seal: a seal's wait
            group, messages, broken = self._seal()  # for the writers is part of it, not added to it
        cpu0 = time.thread_time()
        try:
            self._commit_group(group, messages, broken, hold)
        finally:
            self._commit_cpu_s += time.thread_time() - cpu0
            with self.signal:
                self._inflight = []
                self._last_active = time.monotonic()
                self._notify_everyone()
        self._trim_after(sum(p.nbytes for p in group))

    def _exclusive(self, chore: Chore) -> None:
        """Run `chore` (a staged job's commit) with every writer paused and holding nothing
        uncommitted: what they wrote before is group-committed first, and they are made anew after
        it, so their next rows' sequence numbers (and a dynamic-bucket table's key index) follow
        the job's commit. The job's rows are thus one snapshot of their own."""
        for attempt in range(EXCLUSIVE_ATTEMPTS + 1):
            with self.signal:
                if self._closed is not None:
                    chore.fail(Unavailable(f"Paimon table {self.name!r} takes no commits: {self._closed}."))
                    return
                if attempt == EXCLUSIVE_ATTEMPTS:  # the group commits before it keep failing (a full disk)
                    self._sealing = False
                    self._lanes.kick()
                    chore.fail(Unavailable(f"Paimon table {self.name!r}: the group commits before a staged job's "
                                           "commit kept failing; nothing of the job was committed, commit it again."))
                    return
                self._sealing = True
                self.signal.wait_for(lambda: self._lanes.writing == 0 or self._closed is not None)
                if not self._written and self._broken is None and not self._lanes.dirty():
                    if not self._lanes.drop_writers():
                        chore.fail(Unavailable(f"Paimon table {self.name!r} takes no commits: {self._closed}."))
                        return
                    break
                self._sealing = False  # the seal lets the writers finish what is queued first
            self._group_commit(hold=True)
        try:
            chore.run()
        finally:
            self._unseal()

    def _trim_after(self, nbytes: int) -> None:
        """After a commit of `nbytes`: malloc_trim when the TrimPolicy says (ingest/trim.py)."""
        with self.signal:
            idle = not self._queue and not self._written
        if self._trim.committed(nbytes, idle, time.monotonic()):
            allocator.release_free_memory()

    def _seal(self) -> tuple[list[_Pending], list, BaseException | None]:
        """(Holding the lock.) Have the writers write what is queued so far, pause them once those
        writes end; each prepares its files. Returns what they wrote, in queue order, the commit
        messages, and the error of a write or prepare that failed. The writers stay paused until
        `_unseal`."""
        self._flush_to = self._order
        self._lanes.kick(urgent=True)  # the step waits for these writes
        self.signal.wait_for(lambda: self._closed is not None or self._lanes.writing == 0 and (
            self._broken is not None or not self._queue or self._queue.first_order() > self._flush_to))
        self._flush_to, self._sealing = None, True
        group = sorted(self._written, key=lambda p: p.order)
        self._written, self._written_bytes = [], 0
        self._inflight = group
        messages = []
        if self._broken is None and any(p.rows for p in group):
            self.publisher.next_identifier()
            if not self._lanes.prepare():
                return group, [], Unavailable(f"Paimon table {self.name!r} takes no commits: {self._closed}.")
            messages = self._lanes.messages()
        broken, self._broken = self._broken, None
        return group, messages, broken

    def _unseal(self) -> None:
        with self.signal:
            self._sealing = False
            self._lanes.kick()

    def _commit_group(self, group: list[_Pending], messages: list, broken: BaseException | None,
                      hold: bool = False) -> None:
        updates: dict[str, int] = {}
        firsts: dict[str, int] = {}  # each named producer's first seq in the group: the table must not hold it
        for p in group:
            if p.stream.producer is not None:
                updates[p.stream.producer] = max(p.seq, updates.get(p.stream.producer, p.seq))
                firsts[p.stream.producer] = min(p.seq, firsts.get(p.stream.producer, p.seq))
        rows = sum(p.rows for p in group)
        nbytes = sum(p.nbytes for p in group)
        start = time.perf_counter()
        if broken is not None:
            self.publisher.failed(broken)
            self._failed(group, broken)
            return
        if not hold:
            self._unseal()  # the writers go on with the next commit's batches while this one lands
        try:
            # a group that wrote no file (a first-row table's known keys) holds nothing to commit
            written = rows and compat.makes_snapshot(messages)
            if written:
                snapshot = self.publisher.commit(messages, updates, firsts)
            else:
                snapshot = self.producers.latest
                self.producers.committed(updates, snapshot)
        except Exception as e:  # noqa: BLE001 - every stream in the group gets the cause (the publisher recovered)
            self._failed(group, e)
            return
        if rows:
            self._report_commit(rows, nbytes, time.perf_counter() - start,
                                sum(f.file_size for m in messages for f in m.new_files))
        with self.signal:
            for p in group:
                if not p.stream.closed:
                    p.stream.acks.put((p.seq, snapshot))
                self._settle(p)
            self.signal.changed()

    def _report_commit(self, rows: int, nbytes: int, seconds: float, file_bytes: int) -> None:
        """Tell `on_commit` (metrics, the table's maintenance) of a commit that landed."""
        if self._on_commit is None:
            return
        try:
            self._on_commit(self.name, rows, nbytes, seconds, file_bytes)
        except Exception:  # noqa: BLE001 - metrics must never keep committed batches from their acks
            log.error("commit_metrics_failed", table=self.name, exc_info=True)

    def _failed(self, group: list[_Pending], e: BaseException) -> None:
        """A write or commit failed: fail the group's streams and those written since (the writers
        are dropped, and with them what they wrote), read the producer map back, and only then
        let a producer's new stream in (`open` waits for its batches to settle)."""
        if self._closed is not None:  # the server is stopping or the table was dropped: not a failure
            log.info("commit_abandoned", table=self.name, batches=len(group), reason=self._closed)
        elif isinstance(e, FlightPaimonError):  # refused by `_guard`: the table changed, nothing is broken
            log.warning("commit_refused", table=self.name, batches=len(group), reason=str(e))
        else:
            log.error("commit_failed", table=self.name, batches=len(group), exc_info=e)
        error = e if isinstance(e, FlightPaimonError) else (CommitRaced if _raced(e) else CommitFailed)(
            f"The group commit into Paimon table {self.name!r} failed: {_cause(e)}. "
            "None of this stream's unacked batches were acked; a named producer resumes from "
            "producer_state, which says what the table holds.", table=self.name)
        with self.signal:
            self._sealing = True
            self.signal.wait_for(lambda: self._lanes.writing == 0 or self._closed is not None)
            failed = [*group, *self._written]
            self._written, self._written_bytes, self._broken = [], 0, None
            for stream in {p.stream for p in failed}:
                self._fail(stream, error)
            self._lanes.drop_writers()
            self.publisher.drop_builder()
        try:
            if isinstance(e, TableReplaced):  # its streams are failed; a new stream gets a new committer
                self.close(str(e))
        finally:
            with self.signal:
                for p in failed:
                    self._settle(p)
                self._sealing = False
                self._notify_everyone()

    def _settle(self, p: _Pending) -> None:
        """(Holding the lock.) A batch taken by a writer was committed or failed."""
        p.stream.outstanding -= 1
        if p.stream.producer is not None:
            self._fence.settle(p.stream.producer)


def _raced(e: BaseException) -> bool:
    """Whether a commit failed by racing another writer (pypaimon's optimistic commit gave up, or
    another server's expiry removed the snapshots that said whether it landed) or with an outcome
    not known (its worker process died), not by its own cause: a named producer resumes."""
    return isinstance(e, WorkerDied) or compat.classify(e) is compat.Outcome.CONFLICT


def _cause(e: BaseException) -> str:
    """A failed commit's cause in a line, a full disk first (pypaimon-rust buries it at the end)."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if compat.classify(e) is compat.Outcome.DISK_FULL:
        return f"No space left on device in the warehouse; free space, then resend ({text[:300]})"
    return text
