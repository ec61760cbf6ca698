"""Durable ingest: producer streams into Paimon tables, through one group committer per table.

A stream's clean end is its end marker `{"end": N}`, as for push tables; then `put` returns
only after every batch of the stream is acked (committed). A half-close without the marker, an
in-band `{"error"}` or a broken stream discard the stream's queued batches (acked ones stay
committed; ones already in a commit in flight are committed whole). A batch refused for its
content (a null in a NOT NULL column, a row kind Paimon has not) never joins a group commit: the
stream's earlier batches are committed and acked, then the stream ends with the refusal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import structlog

from flight_server.ingest.commit_pool import COMMIT_THREADS, CommitPool
from flight_server.ingest.commit_workers import CommitWorkers
from flight_server.ingest.committer import (
    DEFAULT_WRITERS,
    SETTLE_TIMEOUT_S,
    TableCommitter,
)
from flight_server.ingest.conform import Conformer
from flight_server.ingest.staging import Staging
from flight_server.ingest.write_stream import END, WriteStream
from flight_server.ingest.writer_pool import DEFAULT_WRITE_THREADS, WriterPool
from flight_server.paimon import compat
from flight_server.paimon.warehouse import PaimonSource
from flight_server.wire import allocator, messages, producer_stream
from flight_server.wire.actions import PaimonWriteStats, ProducerState
from flight_server.wire.errors import Cancelled, InvalidRequest, Unavailable, WrongState
from flight_server.wire.requests import WriteTarget

log = structlog.get_logger(__name__)

Chunks = Iterator[tuple[pa.RecordBatch | None, pa.Buffer | None]]

DEFAULT_COMMIT_INTERVAL_MS = 100
DEFAULT_COMMIT_BYTES = 64 << 20
DEFAULT_IDLE_S = 60.0  # a table's committer (its writers, its lanes' pins) is closed after this long unused
DEFAULT_MAX_OPEN_TABLES = 256  # past this many open, the least recently used idle committers close early
OPEN_ATTEMPTS = 3  # a stream that met its committer being evicted takes the table's next one
EARLIER_COMMITTED = "the stream's earlier batches are committed and acked before this error"
__all__ = ["COMMIT_THREADS", "DEFAULT_COMMIT_BYTES", "DEFAULT_COMMIT_INTERVAL_MS", "DEFAULT_IDLE_S",
           "DEFAULT_WRITERS", "DEFAULT_WRITE_THREADS", "Ingest"]


class Ingest:
    """The durable writes of one server: a committer per Paimon table written to, all of them
    run by two bounded pools of threads (a server's threads do not grow with its tables)."""

    def __init__(self, paimon: PaimonSource, commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS,
                 commit_bytes: int = DEFAULT_COMMIT_BYTES, on_commit=None, writers: int = DEFAULT_WRITERS,
                 idle_s: float = DEFAULT_IDLE_S, write_pool: int = DEFAULT_WRITE_THREADS,
                 commit_threads: int = COMMIT_THREADS, commit_processes: int = 0,
                 max_open: int = DEFAULT_MAX_OPEN_TABLES):
        """`writers`: the writer lanes of an append table with bucket -1 (others have one);
        `write_pool`: the threads every table's lanes are pinned to (at least `writers`, so one
        table's lanes write in parallel); `commit_threads`: the threads that run the tables' group
        commits (how many commit at once); `commit_processes`: the worker processes their writes
        and Paimon commits run in (0: this process; ingest/commit_workers.py); `idle_s`: a table's committer
        unused this long is closed (its writers close; the table's next stream makes a new one,
        which reads the producer map from the table); `max_open`: past this many tables' committers
        open, the least recently used of those with nothing in flight close without waiting for
        `idle_s` (what a committer held goes back to the allocators, which keep some of it: the
        fewer open at once, the less a burst of tables leaves behind)."""
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, got {max_open}")
        self.paimon, self.idle_s, self.max_open = paimon, idle_s, max_open
        self.interval_s, self.commit_bytes, self.writers = commit_interval_ms / 1000, commit_bytes, writers
        self._on_commit = on_commit
        self._lock = threading.Lock()
        self._committers: dict[str, TableCommitter] = {}
        self.writer_pool = WriterPool(max(write_pool, writers))
        self.commit_pool = CommitPool(commit_threads)  # the tables take turns to commit, FIFO
        self.commit_workers = (CommitWorkers(paimon.warehouse, paimon.options, commit_processes)
                               if commit_processes else None)
        self._retired: list[TableCommitter] = []  # replaced by a table created again: joined at close
        self._closed: str | None = None
        self.staging = Staging(paimon.table, self.committer)
        self._stop = threading.Event()
        self._wake = threading.Event()  # more committers open than max_open: evict now
        self._janitor = threading.Thread(target=self._evict_loop, name="ingest-idle", daemon=True)
        self._janitor.start()

    def _evict_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(min(max(self.idle_s / 4, 0.05), 15.0))
            self._wake.clear()
            if not self._stop.is_set():
                self.evict_idle()

    def evict_idle(self, now: float | None = None) -> int:
        """Close the committers unused for `idle_s` (TableCommitter.retire_if_idle); returns how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [(n, c) for n, c in self._committers.items() if c.retire_if_idle(self.idle_s, now)]
            for name, _ in idle:
                del self._committers[name]
            over = len(self._committers) - self.max_open
            if over > 0:  # the least recently used with nothing in flight go early
                for name, c in sorted(self._committers.items(), key=lambda nc: nc[1].last_active):
                    if over <= 0:
                        break
                    if c.retire_if_idle(0.0, now, f"over {self.max_open} tables' committers were open"):
                        del self._committers[name]
                        idle.append((name, c))
                        over -= 1
        for _, c in idle:
            if not c.join(30.0):
                log.warning("committer_not_stopped", table=c.name, reason="evicted while idle")
        if idle:
            log.info("committers_evicted", tables=len(idle), idle_s=self.idle_s)
        stopped = self.commit_workers.stop_idle(self.idle_s, now) if self.commit_workers is not None else 0
        if idle or stopped:
            allocator.release_free_memory()  # what the closed writers and commit objects held goes back
        return len(idle)

    def drop(self, name: str, reason: str, wait_s: float = 30.0) -> None:
        """Fail the table's streams and let its commit in flight land (the table is being dropped:
        a commit after the delete would leave snapshot files a table created again would adopt)."""
        with self._lock:
            committer = self._committers.pop(name, None)
        if committer is not None:
            committer.close(reason)
            committer.join(wait_s)

    def open_committer(self, name: str) -> TableCommitter | None:
        """The table's committer on this server if it has one that takes commits (none is made)."""
        with self._lock:
            committer = self._committers.get(name)
        return committer if committer is not None and committer.is_open else None

    def committer(self, name: str) -> TableCommitter:
        """The table's committer, writing with the table's newest schema (an ALTER by anyone is
        adopted first); a table dropped and created again gets a new one."""
        table = self.paimon.table(name)
        identity = compat.table_identity(table)
        made = None
        while True:
            with self._lock:
                if self._closed is not None:
                    raise Unavailable(f"Paimon table {name!r} takes no writes: {self._closed}.")
                current = self._committers.get(name)
                if current is not None and current.identity == identity:
                    fresh, stale = current, None
                    break
                if made is not None:
                    self._committers[name] = fresh = made
                    if len(self._committers) > self.max_open:
                        self._wake.set()  # the janitor closes the least recently used idle ones
                    stale, made = current, None
                    break
            # made outside the lock: it reads the table (its producer map)
            made = TableCommitter(name, table, self.interval_s, self.commit_bytes, writer_pool=self.writer_pool,
                                  commit_pool=self.commit_pool, commit_workers=self.commit_workers,
                                  on_commit=self._on_commit, writers=self.writers,
                                  reload=lambda: self.paimon.table(name))
        if made is not None:  # another stream made the table's committer meanwhile
            made.close("not needed: another stream made the table's committer first")
            with self._lock:
                self._retired = [c for c in self._retired if c.is_running] + [made]
        if stale is not None:
            stale.close(f"Paimon table {name!r} was dropped and created again")
            with self._lock:
                self._retired = [c for c in self._retired if c.is_running] + [stale]
        else:
            fresh.adopt(table)  # nothing unless an ALTER made a newer schema
        return fresh

    def merge_schema(self, name: str, stream: pa.Schema) -> None:
        """A stream's `merge_schema`: its columns the table lacks added and types widened, in one
        schema change (once, when several producers race), which the table's committer adopts."""
        if self.paimon.merge_schema(name, stream) is not None:  # columns and types only: options unchanged
            log.info("schema_merged", table=name, columns=stream.names)

    def producer_state(self, name: str, producer: str) -> ProducerState:
        """What the table holds of the producer: read afresh, since another server (or this one
        before a restart) may have committed for it since, once the batches this server has
        written for it have landed."""
        committer = self.committer(name)
        committer.settled(producer, timeout=SETTLE_TIMEOUT_S)
        producers = committer.producers
        producers.refresh()
        return ProducerState(producers.last_seq(producer))

    def stats(self, name: str | None = None) -> dict[str, PaimonWriteStats]:
        """Per Paimon table written through this server (or the one named): its committer's state."""
        with self._lock:
            committers = dict(self._committers)
        return {n: c.stats() for n, c in sorted(committers.items()) if name is None or n == name}

    def close(self, reason: str) -> None:
        self._stop.set()
        self._wake.set()
        with self._lock:
            self._closed = reason
            committers = list(self._committers.values())
        for c in committers:
            c.close(reason)

    def join(self, timeout: float) -> bool:
        """After `close`: wait (at most `timeout` s in all) for every committer to stop, once the
        writes and commits in flight landed, then for the pools' threads; False if one outlived
        the bound."""
        deadline = time.monotonic() + timeout
        self._janitor.join(max(0.0, deadline - time.monotonic()))  # `close` stopped it
        with self._lock:
            committers = [*self._committers.values(), *self._retired]
        stopped = all([c.join(max(0.0, deadline - time.monotonic())) for c in committers])
        self.commit_pool.stop()
        self.writer_pool.stop()
        stopped = self.commit_pool.join(max(0.0, deadline - time.monotonic())) and stopped
        stopped = self.writer_pool.join(max(0.0, deadline - time.monotonic())) and stopped
        if self.commit_workers is not None:  # every commit landed or failed: nothing in them now
            self.commit_workers.close()
        with self._lock:
            current = list(self._committers.values())  # not a retired one: its table was created again
        for c in current:  # the last commits' seqs recorded beside the snapshots (ingest/seqs.py)
            if not c.is_running:
                try:
                    c.producers.checkpoint()
                except Exception:  # noqa: BLE001 - the snapshots hold them; the next start records them
                    log.warning("producer_record_failed", table=c.name, exc_info=True)
        return stopped

    def put(self, target: WriteTarget, schema: pa.Schema, chunks: Chunks,
            send_ack: Callable[[bytes], None], cancelled: Callable[[], bool], fields: dict) -> None:
        """Take one producer stream into a Paimon table; `send_ack(ack)` writes one PutResult."""
        if target.stage is not None:
            self.staging.put(target, schema, chunks, send_ack, fields)
            return
        for attempt in range(OPEN_ATTEMPTS):
            committer = self.committer(target.table)
            columns, table = committer.columns, committer.table
            conform = Conformer(columns.arrow, schema, target.label, row_kind=compat.row_kind_field(table),
                                then=EARLIER_COMMITTED, no_retractions=compat.refuses_retractions(table))
            try:
                stream = committer.open(target.label, target.producer)
                break
            except Unavailable:
                if not committer.evicted or attempt == OPEN_ATTEMPTS - 1:
                    raise  # else evicted between our lookup and the open: the table's next committer takes it
        stream.columns = columns  # an ALTER adopted meanwhile evolves its batches (ingest/evolve.py)
        acker = threading.Thread(target=_send_acks, args=(stream, send_ack), name="acks", daemon=True)
        acker.start()
        try:
            if target.producer is not None:  # what other servers committed for it: a resend is acked, not written
                committer.producers.refresh()
            _pump(committer, stream, conform, chunks, cancelled, fields)
        except BaseException:
            fields["discarded"] = committer.discard(stream)
            raise
        finally:
            acker.join()
            fields["skipped"] = stream.skipped


def _send_acks(stream: WriteStream, send_ack) -> None:
    while (item := stream.acks.get()) is not END:
        try:
            if isinstance(item, BaseException):  # the producer may be waiting for acks, not sending
                send_ack(messages.stream_failed(str(item), getattr(item, "code", "error")))
                return
            seq, snapshot = item
            send_ack(messages.ack(seq, snapshot))
        except Exception as e:  # noqa: BLE001 - the producer went away; the read loop sees it too
            log.info("ack_not_sent", stream=stream.label, error=str(e).splitlines()[0] if str(e) else type(e).__name__)
            return


def _pump(committer: TableCommitter, stream: WriteStream, conform: Conformer, chunks: Chunks,
          cancelled, fields: dict) -> None:
    try:
        for event in producer_stream.read(chunks, named=stream.producer is not None):
            if isinstance(event, producer_stream.Batch):
                seq = event.index if event.seq is None else event.seq
                try:
                    batch = conform(event.data, event.index)
                except InvalidRequest:  # this producer's content: its earlier batches land, no one else's fail
                    committer.finish(stream, cancelled)
                    raise
                committer.submit(stream, batch, seq, cancelled)
            elif isinstance(event, producer_stream.ProducerFailed):
                fields["producer_error"] = event.error
                fields["discarded"] = committer.discard(stream)
            elif isinstance(event, producer_stream.Ended):
                committer.finish(stream, cancelled)
                fields["batches"] = event.batches
            elif isinstance(event, producer_stream.HalfClosed):
                _half_closed(stream, cancelled, event.batches)
    except producer_stream.StreamBroken as e:
        settled = (f"its {e.batches} batch(es) before it are committed" if e.kind == producer_stream.AFTER_END
                   else "its unacked batches were discarded")
        raise InvalidRequest(f"The stream into {stream.label} {e.reason}; {settled}.") from None


def _half_closed(stream: WriteStream, cancelled, received: int) -> None:
    if stream.error is not None:  # fenced by a newer stream, or a failed commit, while it was idle
        raise stream.error
    if cancelled():
        raise Cancelled(f"The producer's stream into {stream.label} broke (killed, timed out or cancelled); "
                        "its unacked batches were discarded.")
    raise WrongState(
        f"The stream into {stream.label} half-closed after {received} batch(es) without its end marker "
        '{"end": N}: the producer may have crashed, so its unacked batches were discarded (acked ones are '
        "committed). Send the marker before closing (Client.paimon_sink does).")
