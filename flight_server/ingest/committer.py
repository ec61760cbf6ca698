"""Group commits: the batches of every producer stream of one Paimon table, one snapshot at a time.

Streams `submit` batches into one queue; a committer thread takes everything queued at most
every `interval_s` (sooner once `commit_bytes` are queued), writes it with pypaimon's native
(Rust) writer, and commits it as one snapshot whose properties carry the named producers' last
seqs (`ProducerSeqs`). Only then does each batch's stream get its ack `(seq, snapshot)`. A
failed commit fails every stream that had a batch in it, with the cause, and acks none of them.

Memory is bounded: `submit` blocks while `commit_bytes` are queued, so the queue and the
commit in flight hold at most about twice that.
"""

from __future__ import annotations

import errno
import queue
import threading
import time
from dataclasses import dataclass

import pyarrow as pa
import structlog

from flight_server.ingest.producers import ProducerSeqs
from flight_server.paimon import compat
from flight_server.wire import allocator
from flight_server.wire.errors import Cancelled, CommitFailed, InvalidRequest, Unavailable, WrongState

log = structlog.get_logger(__name__)

END = object()  # the last item of a stream's ack queue (or the stream's error, once it fails)
TRIM_AFTER_BYTES = 16 << 20  # a commit this large gives its freed memory back (malloc_trim)


class WriteStream:
    """One producer stream as the committer sees it: its acks in order, its error once it has one."""

    def __init__(self, label: str, producer: str | None):
        self.label, self.producer = label, producer
        self.acks: queue.SimpleQueue = queue.SimpleQueue()  # (seq, snapshot) in stream order, then END or an error
        self.error: BaseException | None = None
        self.outstanding = 0  # submitted, neither acked nor failed
        self.last_seq: int | None = None  # the producer's last seq on this stream
        self.closed = False  # acks are no longer wanted (the stream ended or broke)
        self.skipped = 0  # resent batches the table already held


class _Chore:
    """A function the committer thread runs for another thread, and its outcome."""

    def __init__(self, fn):
        self.fn, self.done = fn, threading.Event()
        self.result, self.error = None, None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the thread that asked
            self.error = e
        finally:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


@dataclass
class _Pending:
    stream: WriteStream
    seq: int  # what the ack says: the producer's seq, or the batch's index on an unnamed stream
    batch: pa.RecordBatch | None  # None once handed to the writer
    nbytes: int
    rows: int


class TableCommitter:
    """The one committer of a Paimon table on this server."""

    def __init__(self, name: str, table, interval_s: float, commit_bytes: int, on_commit=None):
        self.name = name
        self.table, self.identity = table, compat.table_identity(table)
        self._table = compat.native_write_table(table)
        self.interval_s, self.commit_bytes = interval_s, commit_bytes
        self.producers = ProducerSeqs(table)
        self._on_commit = on_commit  # (table, rows, bytes, seconds) after each commit, for metrics
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._queued_bytes = 0
        self._inflight: list[_Pending] = []
        self._active: dict[str, WriteStream] = {}  # producer -> its current stream
        self._closed: str | None = None
        self._write = self._commit = None
        self._user = None
        self._ident = 0
        self._last_start = 0.0
        self._chores: list[_Chore] = []  # run on this thread between group commits (compaction commits)
        self._chores_run, self._chore_ms_max = 0, 0.0  # how long a chore held the next group commit back
        self._thread = threading.Thread(target=self._run, name=f"commit-{name}", daemon=True)
        self._thread.start()

    # -- the streams' side ---------------------------------------------------------------

    def open(self, label: str, producer: str | None) -> WriteStream:
        """A new stream. A named producer's older stream is fenced off (its queued batches dropped)
        and any commit in flight with the producer's batches lands before the new stream may write,
        so the resent batches it holds are recognised as committed."""
        stream = WriteStream(label, producer)
        with self._cond:
            self._check_open()
            if producer is not None:
                old = self._active.get(producer)
                if old is not None:
                    self._fail(old, WrongState(
                        f"A newer stream of producer {producer!r} into Paimon table {self.name!r} took over; "
                        "this one's unacked batches were discarded."))
                    self._drop_queued(old)
                    self._release(old)
                self._cond.wait_for(lambda: not any(p.stream.producer == producer for p in self._inflight))
                self._check_open()
                self._active[producer] = stream
        return stream

    def submit(self, stream: WriteStream, batch: pa.RecordBatch, seq: int, cancelled) -> None:
        """Queue one batch (waiting while the queue is full); a named producer's batch the table
        already holds is acked at once and not written again."""
        with self._cond:
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
            while self._queued_bytes >= self.commit_bytes:
                self._cond.wait(0.1)
                self._check(stream)
                if cancelled():
                    raise Cancelled(f"The producer's stream into {stream.label} was cancelled.")
            self._queue.append(_Pending(stream, seq, batch, batch.nbytes, batch.num_rows))
            self._queued_bytes += batch.nbytes
            stream.outstanding += 1
            self._cond.notify_all()

    def finish(self, stream: WriteStream, cancelled) -> None:
        """Wait until every batch of the stream is acked; raises the stream's error if it failed."""
        with self._cond:
            while stream.outstanding and stream.error is None:
                self._cond.wait(0.1)
                self._check(stream)  # a closing server's UNAVAILABLE wins over the call's cancellation
                if cancelled():
                    raise Cancelled(f"The producer's stream into {stream.label} was cancelled before its acks.")
            self._check(stream)
            self._release(stream)

    def discard(self, stream: WriteStream) -> int:
        """The stream broke or failed in-band: drop its queued batches; returns how many.
        Its batches in a commit already in flight are committed (whole), never acked."""
        with self._cond:
            dropped = self._drop_queued(stream)
            self._release(stream)
            return dropped

    def _drop_queued(self, stream: WriteStream) -> int:
        dropped = [p for p in self._queue if p.stream is stream]
        self._queue = [p for p in self._queue if p.stream is not stream]
        self._queued_bytes -= sum(p.nbytes for p in dropped)
        stream.outstanding -= len(dropped)
        self._cond.notify_all()
        return len(dropped)

    def close(self, reason: str) -> None:
        """Fail every open stream; the thread stops after the commit in flight (not waited for:
        a server that exits meanwhile is a server killed mid-commit, which loses nothing acked)."""
        with self._cond:
            self._closed = reason
            for p in self._queue:
                self._fail(p.stream, Unavailable(f"{p.stream.label}: {reason}; its unacked batches were not committed."))
            for stream in self._active.values():
                self._fail(stream, Unavailable(f"{stream.label}: {reason}."))
            self._queue, self._queued_bytes = [], 0
            self._cond.notify_all()

    def between_commits(self, fn, timeout: float):
        """Run `fn()` on the committer thread between two group commits and return its result (or
        raise its error): a compaction's commit then never races this server's own commits, whose
        optimistic retries back off exponentially (as Java Paimon's writer commits its compactions)."""
        chore = _Chore(fn)
        with self._cond:
            self._check_open()
            self._chores.append(chore)
            self._cond.notify_all()
        if not chore.done.wait(timeout):
            raise TimeoutError(f"the committer of Paimon table {self.name!r} did not run a compaction's commit "
                               f"within {timeout} s")
        if chore.error is not None:
            raise chore.error
        return chore.result

    @property
    def is_open(self) -> bool:
        with self._cond:
            return self._closed is None

    def join(self, timeout: float) -> None:
        """Wait (at most `timeout` s) for the thread to stop: after `close`, once the commit in flight landed."""
        self._thread.join(timeout)

    def stats(self) -> dict:
        """What `stats` shows of the table's durable writes on this server."""
        with self._cond:
            return {"queued_batches": len(self._queue), "queued_bytes": self._queued_bytes,
                    "in_commit_batches": len(self._inflight), "named_producers_writing": sorted(self._active),
                    "commits": self._ident, "last_snapshot": self.producers.seen, "closed": self._closed,
                    "maintenance_commits": self._chores_run, "maintenance_commit_ms_max": round(self._chore_ms_max, 1)}

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
        if stream.producer is not None and self._active.get(stream.producer) is stream:
            del self._active[stream.producer]

    def _fail(self, stream: WriteStream, error: BaseException) -> None:
        if stream.error is None:
            stream.error = error
            if not stream.closed:  # a producer waiting for acks (not sending) learns it from its acks
                stream.acks.put(error)
        self._cond.notify_all()

    # -- the committer thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed is not None or self._chores)
                chores, self._chores = self._chores, []
                if self._closed is not None:
                    for chore in chores:
                        chore.fail(Unavailable(f"Paimon table {self.name!r} takes no commits: {self._closed}."))
                    return
            for chore in chores:  # between group commits: at most one commit interval late
                start = time.perf_counter()
                chore.run()
                self._chores_run += 1
                self._chore_ms_max = max(self._chore_ms_max, (time.perf_counter() - start) * 1000)
            with self._cond:
                if not self._queue:
                    continue
                while self._queued_bytes < self.commit_bytes and self._closed is None:
                    left = self._last_start + self.interval_s - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                group, self._queue, self._queued_bytes = self._queue, [], 0
                self._inflight = group
                self._cond.notify_all()  # room for blocked submitters
            self._last_start = time.monotonic()
            try:
                self._commit_group(group)
            finally:
                with self._cond:
                    self._inflight = []
                    self._cond.notify_all()
            if sum(p.nbytes for p in group) >= TRIM_AFTER_BYTES:
                allocator.release_free_memory()

    def _commit_group(self, group: list[_Pending]) -> None:
        updates: dict[str, int] = {}
        for p in group:
            if p.stream.producer is not None:
                updates[p.stream.producer] = max(p.seq, updates.get(p.stream.producer, p.seq))
        rows = sum(p.rows for p in group)
        nbytes = sum(p.nbytes for p in group)
        start = time.perf_counter()
        try:
            snapshot = self._write_and_commit(group, updates) if rows else self.producers.seen
        except Exception as e:  # noqa: BLE001 - every stream in the group gets the cause
            log.error("commit_failed", table=self.name, batches=len(group), exc_info=True)
            self._reset_writer()
            error = CommitFailed(
                f"The group commit into Paimon table {self.name!r} failed: {_cause(e)}. "
                "None of this stream's unacked batches were acked; a named producer resumes from "
                "producer_state, which says what the table holds.", table=self.name)
            with self._cond:
                for p in group:
                    self._fail(p.stream, error)
                    p.stream.outstanding -= 1
            self._reload_producers()
            return
        self.producers.committed(updates, snapshot)
        if self._on_commit is not None and rows:
            try:
                self._on_commit(self.name, rows, nbytes, time.perf_counter() - start)
            except Exception:  # noqa: BLE001 - metrics must never keep committed batches from their acks
                log.error("commit_metrics_failed", table=self.name, exc_info=True)
        with self._cond:
            for p in group:
                if not p.stream.closed:
                    p.stream.acks.put((p.seq, snapshot))
                p.stream.outstanding -= 1
            self._cond.notify_all()

    def _write_and_commit(self, group: list[_Pending], updates: dict[str, int]) -> int:
        if self._write is None:
            builder = self._table.new_stream_write_builder()
            self._write, self._commit, self._user = builder.new_write(), builder.new_commit(), builder.commit_user
            compat.merge_manifests_on_commit(self._commit)  # else every commit costs more than the last
        for p in group:
            batch, p.batch = p.batch, None  # the writer has it now: our reference need not pin it
            if batch.num_rows:
                self._write.write_arrow_batch(batch)
            del batch
        self._ident += 1
        messages = self._write.prepare_commit(self._ident)
        self.producers.refresh()  # other writers' commits since ours: their producer maps count too
        self._commit.commit(messages, self._ident, snapshot_properties=self.producers.properties(updates))
        return compat.find_commit(self._table, self._user, self._ident)

    def _reset_writer(self) -> None:
        """After a failure the writer's state is unknown: start the next commit with a new one."""
        write, commit, self._write, self._commit = self._write, self._commit, None, None
        for closable in (write, commit):
            if closable is None:
                continue
            try:
                closable.close()
            except Exception:  # noqa: BLE001 - the commit's own error is what the producers get
                log.warning("writer_close_failed", table=self.name, exc_info=True)

    def _reload_producers(self) -> None:
        """A failed commit may still have landed: read the producer map back from the table."""
        try:
            fresh = ProducerSeqs(self._table)
        except Exception:  # noqa: BLE001 - keep the old map; the next commit refreshes it
            log.warning("producer_state_reload_failed", table=self.name, exc_info=True)
            return
        self.producers = fresh


def _cause(e: BaseException) -> str:
    """A failed commit's cause in a line, a full disk first (pypaimon-rust buries it at the end)."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    if "No space left on device" in str(e) or getattr(e, "errno", None) == errno.ENOSPC:
        return f"No space left on device in the warehouse; free space, then resend ({text[:300]})"
    return text
