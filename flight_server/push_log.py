"""The bounded, offset-indexed log behind one push-table partition (no Flight imports).

Batches get sequence numbers 0, 1, 2, ... in append order. Invariant, under `_cond`'s lock:
`_committed <= _next_seq` and `_next_seq - _committed <= capacity`: at most `capacity` batches
are held that no consumer has committed. An append that would break it waits (that wait is the
producer's backpressure: the server stops reading its stream, gRPC flow control blocks it).
Every wait has a timeout and re-checks its condition and the caller's cancellation probe, so a
vanished peer is noticed within `POLL_S`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from flight_server.errors import Cancelled, InvalidRequest, PartitionFailed, WrongState

POLL_S = 0.05

OPEN, EOF, FAILED = "open", "eof", "failed"


def _never() -> bool:
    return False


@dataclass
class PartitionStats:
    state: str
    next_seq: int
    committed: int
    queued_batches: int
    queued_bytes: int
    rows_in: int
    rows_out: int
    writers_done: int
    writers: int
    consumed: bool
    error: str | None


class PartitionLog:
    """One partition: appends from `writers` producer streams, reads by drain or by offset range."""

    def __init__(self, label: str, capacity: int, writers: int = 1):
        self.label = label  # "table NAME partition P", used in every message
        self.capacity = capacity
        self.writers = writers
        self._cond = threading.Condition()
        self._batches: deque[pa.RecordBatch] = deque()  # seqs _committed .. _next_seq-1
        self._committed = 0
        self._next_seq = 0
        self._state = OPEN
        self._error: str | None = None
        self._error_cls: type[Exception] = PartitionFailed
        self._writers_done = 0
        self._consumed = False
        self._queued_bytes = 0
        self._rows_in = 0
        self._rows_out = 0

    # -- producer side -------------------------------------------------------------------

    def check_writable(self) -> None:
        """Raise unless a producer may still append (called when a do_put arrives)."""
        with self._cond:
            self._raise_unless_open()

    def append(self, batch: pa.RecordBatch, cancelled: Callable[[], bool] = _never) -> int:
        """Append `batch`, waiting while the partition is full; return its sequence number.

        Raises the partition's error once it has failed, and `Cancelled` (after failing the
        partition) when `cancelled()` says the producer's own stream went away while waiting.
        """
        with self._cond:
            while True:
                self._raise_unless_open()
                if self._next_seq - self._committed < self.capacity:
                    break
                if cancelled():
                    self._fail_locked(f"the producer's stream to {self.label} broke while blocked")
                    raise Cancelled(f"The producer of {self.label} went away; the partition failed.")
                self._cond.wait(POLL_S)
            seq = self._next_seq
            self._batches.append(batch)
            self._next_seq += 1
            self._queued_bytes += batch.nbytes
            self._rows_in += batch.num_rows
            self._cond.notify_all()
            return seq

    def writer_done(self) -> bool:
        """Record one producer stream's clean end; return True when the partition hit EOF."""
        with self._cond:
            if self._state != OPEN:
                return self._state == EOF
            self._writers_done += 1
            if self._writers_done >= self.writers:
                self._state = EOF
                self._cond.notify_all()
            return self._state == EOF

    def fail(self, message: str, error_cls: type[Exception] = PartitionFailed) -> None:
        """End the partition with an error; returns at once, full or not. Idempotent."""
        with self._cond:
            self._fail_locked(message, error_cls)

    def _fail_locked(self, message: str, error_cls: type[Exception] = PartitionFailed) -> None:
        if self._state == FAILED:
            return
        self._state = FAILED
        self._error = message
        self._error_cls = error_cls
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
            self._consumed = True
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
        with self._cond:
            while True:
                if self._batches:
                    batch = self._batches.popleft()
                    self._committed += 1
                    self._account_out(batch)
                    self._cond.notify_all()
                    return batch
                if self._state == EOF:
                    return None
                if self._state == FAILED:
                    raise self._error_cls(f"{self.label} failed: {self._error}")
                if cancelled():
                    raise Cancelled(f"consumer cancelled the read of {self.label}")
                self._cond.wait(POLL_S)

    def read_range(
        self, start: int, end: int, cancelled: Callable[[], bool] = _never
    ) -> Iterator[pa.RecordBatch]:
        """Replayable read of batches [start, end) without committing; waits for late ones."""
        if start < 0 or end < start:
            raise InvalidRequest(f"Offset range [{start}, {end}) of {self.label} is not a valid range.")
        for seq in range(start, end):
            yield self._get(seq, end, cancelled)

    def _get(self, seq: int, end: int, cancelled: Callable[[], bool]) -> pa.RecordBatch:
        with self._cond:
            while True:
                if seq < self._committed:
                    raise WrongState(
                        f"Batch {seq} of {self.label} was already committed (committed up to "
                        f"{self._committed}); read from offset {self._committed} or later."
                    )
                if seq < self._next_seq:
                    batch = self._batches[seq - self._committed]
                    self._rows_out += batch.num_rows
                    return batch
                if self._state == FAILED:
                    raise self._error_cls(f"{self.label} failed: {self._error}")
                if self._state == EOF:
                    raise InvalidRequest(
                        f"Offset range ends at {end} but {self.label} ended at {self._next_seq}; "
                        "ask for a range within the partition."
                    )
                if cancelled():
                    raise Cancelled(f"consumer cancelled the read of {self.label}")
                self._cond.wait(POLL_S)

    def commit(self, upto: int) -> None:
        """Free every batch with a sequence number below `upto`. Committing backwards is a no-op."""
        with self._cond:
            if upto > self._next_seq:
                raise InvalidRequest(
                    f"Cannot commit {self.label} up to {upto}: only {self._next_seq} batches "
                    "were appended; commit an offset you have read."
                )
            while self._committed < upto:
                self._account_out(self._batches.popleft(), count_rows=False)
                self._committed += 1
            self._cond.notify_all()

    def _account_out(self, batch: pa.RecordBatch, count_rows: bool = True) -> None:
        self._queued_bytes -= batch.nbytes
        if count_rows:
            self._rows_out += batch.num_rows

    def offsets(self) -> tuple[int, int, str]:
        """(committed, next_seq, state): what a replaying consumer may read now."""
        with self._cond:
            return self._committed, self._next_seq, self._state

    def stats(self) -> PartitionStats:
        with self._cond:
            return PartitionStats(
                state=self._state,
                next_seq=self._next_seq,
                committed=self._committed,
                queued_batches=len(self._batches),
                queued_bytes=self._queued_bytes,
                rows_in=self._rows_in,
                rows_out=self._rows_out,
                writers_done=self._writers_done,
                writers=self.writers,
                consumed=self._consumed,
                error=self._error,
            )
