"""A table's writer lanes: each owns one pypaimon writer, which only its thread may touch
(pypaimon-rust's writers are bound to the thread that made them): a lane is pinned to one thread
of the server's writer pool (ingest/writer_pool.py) for its life. A writer is made on first use,
prepared at each seal and closed after a failure.

The lanes serve their committer (ingest/committer.py), under its lock (`Signal`): they take chunks off its
queue (`host.take`), write them without the lock (Parquet encoding in Rust, mostly without the
GIL), and hand back what they wrote (`host.wrote`). The committer `kick`s its lanes when they may
have work; its commit asks every lane at once to prepare its files or to drop its writer (`ask`),
and waits until each has.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import pyarrow as pa
import structlog

from flight_server.ingest.writer_pool import WriterPool

log = structlog.get_logger(__name__)


class Lane:
    """One writer thread's pypaimon writer and what it did since the last seal."""

    def __init__(self, index: int):
        self.index = index
        self.writer = None
        self.slot = 0  # its thread in the writer pool
        self.finished = False  # its committer closed and its writer is closed
        self.dirty = False  # written to since the last seal
        self.messages: list = []  # its commit messages of the last seal
        self.answered = 0  # the last request (seal or reset) this thread did
        self.cpu_s = 0.0  # this thread's CPU time in writes (Parquet encoding, mostly without the GIL)


class Signal:
    """The one lock of a table's writes, and what is waited for under it: that something changed
    (`wait_for`, `changed`) or that the queue has room for a submitter (`wait_room`, `room`). The
    committer makes it; its writer lanes hold it while they take work and hand back what they
    did, and wake the waiters through it."""

    def __init__(self):
        lock = threading.Lock()
        self._changed = threading.Condition(lock)
        self._room = threading.Condition(lock)

    def __enter__(self) -> Signal:
        self._changed.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._changed.__exit__(*exc)

    def wait_for(self, predicate, timeout: float | None = None) -> bool:
        """(Holding it.) Wait until `predicate()` is true (or `timeout` s passed): its result."""
        return self._changed.wait_for(predicate, timeout)

    def wait(self, timeout: float) -> None:
        """(Holding it.) Wait for a change, at most `timeout` s."""
        self._changed.wait(timeout)

    def wait_room(self, timeout: float) -> None:
        """(Holding it.) A submitter waits for room in the queue, at most `timeout` s."""
        self._room.wait(timeout)

    def changed(self) -> None:
        """(Holding it.) Wake everyone waiting for a change."""
        self._changed.notify_all()

    def room(self, n: int) -> None:
        """(Holding it.) `n` batches left the queue: wake as many submitters."""
        self._room.notify(n)

    def everyone(self) -> None:
        """(Holding it.) Wake every waiter, submitters too: for what is rare (a failure, a close)."""
        self._changed.notify_all()
        self._room.notify_all()


class Host(Protocol):
    """What the writer threads need of their committer (its methods run holding `signal`)."""

    name: str
    signal: Signal

    def closed(self) -> bool: ...
    def takeable(self) -> bool: ...
    def take(self) -> list: ...
    def wrote(self, chunk: list, error: BaseException | None) -> None: ...
    def broke(self, error: BaseException) -> None: ...
    def new_writer(self): ...
    def commit_identifier(self) -> int: ...


class _Served:
    """What the writer pool runs for one lane (ingest/writer_pool.py's `Served`)."""

    def __init__(self, lanes: WriterLanes, lane: Lane):
        self.lanes, self.lane = lanes, lane

    def serve(self) -> bool:
        return self.lanes.serve(self.lane)


class WriterLanes:
    """`count` writer lanes of one table, pinned to threads of `pool`."""

    def __init__(self, host: Host, count: int, pool: WriterPool):
        self.host, self.pool = host, pool
        self.lanes = [Lane(i) for i in range(count)]
        self._served = [_Served(self, lane) for lane in self.lanes]
        for lane, slot in zip(self.lanes, pool.pin(count), strict=True):
            lane.slot = slot
        self.writing = 0  # lanes in the middle of a write
        self._asked, self._asked_job = 0, None  # the request to every lane: _prepare or _drop_writer

    def kick(self, urgent: bool = False) -> None:
        """Every lane may have something to do (a chunk queued, a request, a close): its thread
        looks; `urgent`: the commit step waits for it (writer_pool.py)."""
        for lane, served in zip(self.lanes, self._served, strict=True):
            self.pool.kick(lane.slot, served, urgent)

    def finished(self) -> bool:
        """(Holding the lock.) Every lane closed its writer after its committer closed."""
        return all(lane.finished for lane in self.lanes)

    # -- the commit step's side (holding the lock) ---------------------------------------

    def dirty(self) -> bool:
        return any(lane.dirty for lane in self.lanes)

    def messages(self) -> list:
        """The commit messages every thread prepared at the last `prepare`."""
        return [m for lane in self.lanes for m in lane.messages]

    def cpu_s(self) -> list[float]:
        return [round(lane.cpu_s, 3) for lane in self.lanes]

    def prepare(self) -> bool:
        """Every thread prepares its files since the last seal as commit messages (`messages`)."""
        return self._ask(self._prepare)

    def drop_writers(self) -> bool:
        """Every thread closes its writer (after a failure its state is unknown; the next write
        makes a new one)."""
        return self._ask(self._drop_writer)

    def _ask(self, job) -> bool:
        """(One request at a time.) Have every thread run `job` on its own writer and wait until
        each has; False when the committer closed meanwhile (its threads are gone)."""
        host = self.host
        self._asked += 1
        number, self._asked_job = self._asked, job
        self.kick(urgent=True)
        host.signal.wait_for(lambda: host.closed() or all(lane.answered == number for lane in self.lanes))
        return not host.closed()

    # -- a lane's pinned thread ------------------------------------------------------

    def serve(self, lane: Lane) -> bool:
        """(The lane's thread.) One thing the lane has to do: a request, a chunk to write, or, once
        its committer closed, closing its writer. True when it may have more."""
        host = self.host
        job = None
        with host.signal:
            if lane.finished:
                return False
            closed = host.closed()
            if not closed and lane.answered != self._asked:
                job, number = self._asked_job, self._asked
            elif not closed and host.takeable():
                chunk = host.take()
                self.writing += 1
                host.signal.room(len(chunk))  # room for blocked submitters
            elif not closed:
                return False
        if closed:
            # Its writer is closed here, on the thread that made it (pypaimon-rust's writers must
            # not be dropped on another): files it prepared stay for a commit in flight; files it
            # had not prepared are removed (never to be committed).
            writer, lane.writer = lane.writer, None
            close_quietly(writer, host.name)
            with host.signal:
                lane.finished = True
                if self.finished():
                    self.pool.unpin([lane.slot for lane in self.lanes])
                host.signal.changed()
            return False
        if job is None:
            self._write(lane, chunk)
        else:
            job(lane, number)
        return True

    def _write(self, lane: Lane, chunk: list) -> None:
        batches = [p.batch for p in chunk if p.rows]
        for p in chunk:
            p.batch = None  # the writer has it now: our reference need not pin it
        error, elsewhere = None, None
        cpu0 = time.thread_time()
        try:
            if batches:
                if lane.writer is None:
                    lane.writer = self.host.new_writer()
                # pypaimon's writer returns None; a RemoteWriter the CPU seconds its worker spent
                elsewhere = lane.writer.write_arrow_batch(batches[0] if len(batches) == 1 else pa.concat_batches(batches))
        except BaseException as e:  # noqa: BLE001 - pyo3's PanicException too; the commit step fails the streams
            error = e
        with self.host.signal:
            lane.cpu_s += time.thread_time() - cpu0 + (elsewhere or 0.0)
            lane.dirty = lane.dirty or bool(batches)
            self.writing -= 1
            self.host.wrote(chunk, error)
            self.host.signal.changed()

    def _prepare(self, lane: Lane, number: int) -> None:
        """A seal: this thread's files since the last one, as commit messages."""
        messages, error = [], None
        if lane.dirty and lane.writer is not None:
            try:
                messages = lane.writer.prepare_commit(self.host.commit_identifier())
            except BaseException as e:  # noqa: BLE001 - as in _write
                error = e
        with self.host.signal:
            lane.messages, lane.dirty, lane.answered = messages, False, number
            if error is not None:
                self.host.broke(error)
            self.host.signal.changed()

    def _drop_writer(self, lane: Lane, number: int) -> None:
        writer, lane.writer = lane.writer, None
        close_quietly(writer, self.host.name)
        with self.host.signal:
            lane.messages, lane.dirty, lane.answered = [], False, number
            self.host.signal.changed()


def close_quietly(closable, table: str) -> None:
    """After a failure a writer's state is unknown: close it (its own errors are not the cause)."""
    if closable is None:
        return
    try:
        closable.close()
    except BaseException:  # noqa: BLE001 - pyo3's PanicException too; the commit's own error is what producers get
        log.warning("writer_close_failed", table=table, exc_info=True)
