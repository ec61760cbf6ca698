"""The bounded, offset-indexed log behind one push-table partition (no Flight imports).

Batches get sequence numbers 0, 1, 2, ... in append order. Invariants, under `_cond`'s lock:
- `_committed <= _sent <= _next_seq` and `_next_seq - _committed <= capacity`: at most
  `capacity` batches are held that no consumer has committed, and nothing is committed that no
  reader has been sent. With `capacity_bytes`, they also hold at most that many bytes; a batch
  larger than that alone is refused (it fails the partition) instead of waiting forever. An
  append that would break a bound waits (that wait is the producer's backpressure: the server
  stops reading its stream, gRPC flow control blocks it).
- At most `writers` producer streams ever attach; the partition reaches EOF after `writers`
  clean ends, and any broken stream fails it.
- One reader mode: a single-scan drain (which commits as it sends) or replay ranges with
  explicit commits, never both.
Each held batch keeps when it was appended, so `offsets(at_ms)` finds batches by time.
Every wait has a timeout and re-checks its condition and the caller's cancellation probe, so a
vanished peer is noticed within half a second (flight_server/polling.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

import pyarrow as pa

from flight_server.limits import mib
from flight_server.polling import Slices
from flight_server.push.view import PartitionView
from flight_server.wire.actions import PartitionOffsets, PartitionStats
from flight_server.wire.errors import (
    Cancelled,
    InvalidRequest,
    LimitExceeded,
    PartitionFailed,
    WrongState,
)

MAX_NAMED_PRODUCERS = 4096  # per partition: the dedupe state a named producer leaves behind

OPEN, EOF, FAILED = "open", "eof", "failed"
DRAIN, REPLAY = "drain", "replay"  # reader modes


def _never() -> bool:
    return False


class PartitionLog:
    """One partition: appends from `writers` producer streams, reads by drain or by offset range."""

    def __init__(self, label: str, capacity: int, writers: int = 1, idle_timeout_s: float | None = None,
                 capacity_bytes: int | None = None):
        self.label = label  # "table NAME partition P", used in every message
        self.capacity = capacity
        self.capacity_bytes = capacity_bytes
        self.writers = writers
        self.idle_timeout_s = idle_timeout_s
        self._cond = threading.Condition()
        self._batches: deque[pa.RecordBatch] = deque()  # seqs _committed .. _next_seq-1
        self._appended_ms: deque[int] = deque()  # when each held batch was appended (epoch ms, never decreasing)
        self._committed = 0
        self._sent = 0  # replay reads have been sent every batch below this
        self._next_seq = 0
        self._state = OPEN
        self._error: str | None = None
        self._error_cls: type[Exception] = PartitionFailed
        self._writers_attached = 0
        self._writers_done = 0
        self._reader: str | None = None
        self._consumed = False
        self._last_activity = time.monotonic()
        self._views: list[PartitionView] = []  # viewers (flight_cli tail): offered each append
        self._queued_bytes = 0
        self._waiting = 0  # producers waiting in append for room
        self._blocked = 0  # of those, the ones that found none and wait
        self._rows_in = 0
        self._rows_out = 0
        self._freed_for_room = False  # a read to EOF freed batches it was sent (see read_to_end)
        self._producers: dict[str, int] = {}  # named producer -> the last seq of its that was appended

    # -- producer side -------------------------------------------------------------------

    def attach_writer(self) -> None:
        """Give a new producer stream one of the `writers` slots, or refuse it before it appends."""
        with self._cond:
            self._raise_unless_open()
            if self._writers_attached >= self.writers:
                raise WrongState(
                    f"{self.label} takes {self.writers} writer stream(s) and all have attached "
                    f"({self._writers_done} ended); register the table with more writers, or a new table."
                )
            self._writers_attached += 1
            self._last_activity = time.monotonic()

    def touch(self) -> None:
        """A producer stream said something (a message without a batch): it is alive."""
        with self._cond:
            self._last_activity = time.monotonic()

    def check_idle(self, now: float) -> None:
        """Fail the partition if its producers sent nothing for `idle_timeout_s` while it had room.

        A full partition is waiting for its reader, not its producers: the clock restarts then.
        """
        with self._cond:
            if self.idle_timeout_s is None or self._state != OPEN:
                return
            if self._full_locked():
                self._last_activity = now
            elif now - self._last_activity > self.idle_timeout_s:
                self._fail_locked(
                    f"no producer stream sent anything for {self.idle_timeout_s:g} s (idle_timeout_s): "
                    "the producer may be frozen or cut off"
                )

    def append(self, batch: pa.RecordBatch, cancelled: Callable[[], bool] = _never,
               producer: tuple[str, int] | None = None) -> int | None:
        """Append `batch`, waiting while the partition is full; return its sequence number.

        Raises the partition's error once it has failed, and `Cancelled` (after failing the
        partition) when `cancelled()` says the producer's own stream went away while waiting.
        A named producer's `(name, seq)` appends only a seq above the last one it appended, and
        returns None for the others (checked after the wait, so racing attempts append once); its
        stream going away while waiting leaves the partition open (its retry is idempotent).
        """
        size = batch.nbytes
        with self._cond:
            self._raise_unless_open()
            if self.capacity_bytes is not None and size > self.capacity_bytes:
                message = (f"a batch of {mib(size)} is larger than {self.label}'s capacity_bytes "
                           f"({mib(self.capacity_bytes)}); send smaller batches, or register the table with a "
                           "larger capacity_bytes")
                self._fail_locked(message)
                raise LimitExceeded(f"Refused: {message}. The partition failed.")
            self._waiting += 1
            slices = Slices()
            blocked = False
            try:
                while not self._has_room_locked(size):
                    if cancelled():
                        if producer is not None:
                            raise Cancelled(f"Producer {producer[0]!r} of {self.label} went away while blocked.")
                        self._fail_locked(f"the producer's stream to {self.label} broke while blocked")
                        raise Cancelled(f"The producer of {self.label} went away; the partition failed.")
                    if not blocked:
                        blocked, self._blocked = True, self._blocked + 1
                    self._cond.wait(slices())
                    self._raise_unless_open()
            finally:
                self._waiting -= 1
                self._blocked -= blocked
            if producer is not None:
                name, producer_seq = producer
                if producer_seq <= self._producers.get(name, -1):
                    return None
                if name not in self._producers and len(self._producers) >= MAX_NAMED_PRODUCERS:
                    raise LimitExceeded(f"{self.label} already took batches from {MAX_NAMED_PRODUCERS} named "
                                        "producers; write into a new table.")
                self._producers[name] = producer_seq
            seq = self._next_seq
            self._batches.append(batch)
            now_ms = int(time.time() * 1000)
            self._appended_ms.append(max(now_ms, self._appended_ms[-1]) if self._appended_ms else now_ms)
            self._next_seq += 1
            self._queued_bytes += size
            self._rows_in += batch.num_rows
            self._last_activity = time.monotonic()
            for view in self._views:
                view.offer(seq, batch)
            self._cond.notify_all()
            return seq

    def _has_room_locked(self, size: int) -> bool:
        if self._next_seq - self._committed >= self.capacity:
            return False
        return self.capacity_bytes is None or self._queued_bytes + size <= self.capacity_bytes

    def _full_locked(self) -> bool:
        """Waiting for its reader, not its producers: full in batches, or a producer waits for room."""
        return self._waiting > 0 or self._next_seq - self._committed >= self.capacity

    def writer_done(self) -> bool:
        """Record one producer stream's clean end; return True when the partition hit EOF."""
        with self._cond:
            if self._state != OPEN:
                return self._state == EOF
            self._writers_done += 1
            if self._writers_done >= self.writers:
                self._state = EOF
                for view in self._views:
                    view.end()
                self._cond.notify_all()
            return self._state == EOF

    def fail(self, message: str, error_cls: type[Exception] = PartitionFailed) -> None:
        """End the partition with an error; returns at once, full or not. Idempotent."""
        with self._cond:
            self._fail_locked(message, error_cls)

    def producer_failed(self, message: str) -> None:
        """A named producer says it failed: fail the partition if it has not ended. One at EOF ended
        cleanly before this producer spoke and keeps its end; the producer is refused as a batch
        would be (a late task of a job into a partition the job before it ended)."""
        with self._cond:
            if self._state == EOF:
                self._raise_unless_open()
            self._fail_locked(message)

    def check_open(self) -> None:
        """Refuse a stream into a partition that has ended, before it reads a message."""
        with self._cond:
            self._raise_unless_open()

    def _fail_locked(self, message: str, error_cls: type[Exception] = PartitionFailed) -> None:
        if self._state == FAILED:
            return
        self._state = FAILED
        self._error = message
        self._error_cls = error_cls
        for view in self._views:
            view.end(error_cls(f"{self.label} failed: {message}"))
        self._cond.notify_all()

    def _raise_unless_open(self) -> None:
        if self._state == FAILED:
            raise self._error_cls(f"{self.label} has failed and takes no more batches: {self._error}")
        if self._state == EOF:
            raise WrongState(
                f"{self.label} is closed: all {self.writers} writer stream(s) ended; "
                "register a new table to push more."
            )

    # -- consumer side -------------------------------------------------------------------

    def drain(self, cancelled: Callable[[], bool] = _never) -> Iterator[pa.RecordBatch]:
        """Single scan: yield every batch from the first uncommitted one to EOF, committing each.

        A consumer that goes away (the generator is closed early, or `cancelled()` turns true)
        fails the partition so that blocked and later writes stop promptly.
        """
        with self._cond:
            if self._consumed:
                raise WrongState(
                    f"{self.label} was already consumed by an earlier scan; a push partition "
                    "is read once (use offset-range tickets to replay)."
                )
            if self._reader == REPLAY:
                raise WrongState(
                    f"{self.label} is read by replay tickets and commits; a single-scan drain would "
                    "take batches from under that reader. Read it with offset-range tickets."
                )
            self._consumed = True
            self._reader = DRAIN
        return self._drain_iter(cancelled)

    def _drain_iter(self, cancelled: Callable[[], bool]) -> Iterator[pa.RecordBatch]:
        finished = False
        try:
            while True:
                batch = self._next_for_drain(cancelled)
                if batch is None:
                    finished = True
                    return
                yield batch
        finally:
            if not finished:
                self.fail(f"consumer cancelled the read of {self.label}", Cancelled)

    def _next_for_drain(self, cancelled: Callable[[], bool]) -> pa.RecordBatch | None:
        slices = Slices()
        with self._cond:
            while True:
                if self._batches:
                    if self._full_locked():
                        self._last_activity = time.monotonic()  # room again: the idle clock restarts
                    batch = self._pop_locked()
                    self._committed += 1
                    self._sent = self._committed
                    self._account_out(batch)
                    self._cond.notify_all()
                    return batch
                if self._state == EOF:
                    return None
                if self._state == FAILED:
                    raise self._error_cls(f"{self.label} failed: {self._error}")
                if cancelled():
                    raise Cancelled(f"consumer cancelled the read of {self.label}")
                self._cond.wait(slices())

    def read_range(
        self, start: int, end: int, cancelled: Callable[[], bool] = _never
    ) -> Iterator[pa.RecordBatch]:
        """Replayable read of batches [start, end) without committing; waits for late ones."""
        if start < 0 or end < start:
            raise InvalidRequest(f"Offset range [{start}, {end}) of {self.label} is not a valid range.")
        with self._cond:
            if self._reader == DRAIN:
                raise WrongState(
                    f"{self.label} is being drained by a single-scan reader, which commits as it "
                    "reads; replay tickets cannot read it too."
                )
            self._reader = REPLAY
        return (self._get(seq, end, cancelled) for seq in range(start, end))

    def read_to_end(self, start: int, cancelled: Callable[[], bool] = _never) -> Iterator[pa.RecordBatch]:
        """Batches from `start` to EOF without committing, so a retried reader (a Spark task) reads
        them again. Only when this reader has caught up and a producer waits for room are the
        batches it was sent freed: then a retry from `start` gets a clear error instead of the
        partition blocking both ends."""
        self.read_range(start, start)  # the same checks and reader mode as a replay range
        seq = start
        while (batch := self._get(seq, None, cancelled)) is not None:
            yield batch
            seq += 1

    def _get(self, seq: int, end: int | None, cancelled: Callable[[], bool]) -> pa.RecordBatch | None:
        slices = Slices()
        with self._cond:
            while True:
                if seq < self._committed:
                    freed = ("; an earlier read to EOF freed it to make room for a waiting producer (raise the "
                             "table's capacity to keep more of a retried batch read)" if self._freed_for_room else "")
                    raise WrongState(
                        f"Batch {seq} of {self.label} was already committed (committed up to "
                        f"{self._committed}){freed}; read from offset {self._committed} or later."
                    )
                if seq < self._next_seq:
                    batch = self._batches[seq - self._committed]
                    self._rows_out += batch.num_rows
                    self._sent = max(self._sent, seq + 1)
                    return batch
                if self._state == FAILED:
                    raise self._error_cls(f"{self.label} failed: {self._error}")
                if self._state == EOF:
                    if end is None:
                        return None
                    raise InvalidRequest(
                        f"Offset range ends at {end} but {self.label} ended at {self._next_seq}; "
                        "ask for a range within the partition."
                    )
                if cancelled():
                    raise Cancelled(f"consumer cancelled the read of {self.label}")
                if end is None and self._waiting and self._sent > self._committed:
                    self._freed_for_room = True  # this reader has caught up: free what it was sent
                    self._free_locked(self._sent)
                    continue
                self._cond.wait(slices())

    def view(self, from_earliest: bool) -> PartitionView:
        """A viewer's window: from the oldest batch still held (`from_earliest`) or from the next
        one appended. Close it with `unview`. Changes nothing a producer or reader sees."""
        with self._cond:
            held = list(zip(range(self._committed, self._next_seq), self._batches)) if from_earliest else []
            view = PartitionView(self.label, max(self.capacity, 16), held)
            if self._state == EOF:
                view.end()
            elif self._state == FAILED:
                view.end(self._error_cls(f"{self.label} failed: {self._error}"))
            self._views.append(view)
            return view

    def unview(self, view: PartitionView) -> None:
        with self._cond:
            if view in self._views:
                self._views.remove(view)

    def commit(self, upto: int, discard: bool = False) -> None:
        """Free every batch below `upto` that a replay reader was sent (with `discard`, also those
        no reader was sent: a consumer that starts at the latest batches). Committing backwards is a no-op."""
        with self._cond:
            if upto <= self._committed:
                return
            if self._reader == DRAIN:
                raise WrongState(
                    f"Cannot commit {self.label}: a single-scan reader is draining it and commits "
                    "as it reads; commit is for readers of replay tickets."
                )
            if discard and upto <= self._next_seq:
                self._sent = max(self._sent, upto)
            if upto > self._sent:
                raise InvalidRequest(
                    f"Cannot commit {self.label} up to {upto}: readers were sent batches up to "
                    f"{self._sent} ({self._next_seq} appended); commit only offsets you have read."
                )
            self._free_locked(upto)

    def _free_locked(self, upto: int) -> None:
        was_full = self._full_locked()
        while self._committed < upto:
            self._account_out(self._pop_locked(), count_rows=False)
            self._committed += 1
        if was_full:
            self._last_activity = time.monotonic()  # room again: the idle clock restarts
        self._cond.notify_all()

    def _pop_locked(self) -> pa.RecordBatch:
        self._appended_ms.popleft()
        return self._batches.popleft()

    def _account_out(self, batch: pa.RecordBatch, count_rows: bool = True) -> None:
        self._queued_bytes -= batch.nbytes
        if count_rows:
            self._rows_out += batch.num_rows

    def offsets(self, at_ms: int | None = None) -> PartitionOffsets:
        """What a replaying consumer may read now: [committed, next_seq), and the state; with
        `at_ms`, also the first held batch appended at or after that time (epoch ms; next_seq
        when none was), as Kafka's offsetsForTimes answers from the records it retains."""
        with self._cond:
            at = None
            if at_ms is not None:
                at = next((self._committed + i for i, ms in enumerate(self._appended_ms) if ms >= at_ms),
                          self._next_seq)
            return PartitionOffsets(self._committed, self._next_seq, self._state, at)

    def queued(self) -> tuple[int, int]:
        """(batches, bytes) the partition holds now: what /metrics reads of every partition at each
        scrape (with stats() instead, a scrape of 10,000 partitions took 2.5 times as long)."""
        with self._cond:
            return len(self._batches), self._queued_bytes

    def stats(self) -> PartitionStats:
        with self._cond:
            return PartitionStats(
                state=self._state,
                next_seq=self._next_seq,
                committed=self._committed,
                queued_batches=len(self._batches),
                queued_bytes=self._queued_bytes,
                capacity_bytes=self.capacity_bytes,
                rows_in=self._rows_in,
                rows_out=self._rows_out,
                writers_attached=self._writers_attached,
                writers_done=self._writers_done,
                writers=self.writers,
                blocked_writers=self._blocked,
                reader=self._reader,
                viewers=len(self._views),
                named_producers=len(self._producers),
                consumed=self._consumed,
                error=self._error,
            )
