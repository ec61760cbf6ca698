"""Viewers of a push partition (`flight_cli tail`): they see what passes and never touch the log.

A viewer holds a bounded copy of what is appended. It never commits, never counts as a reader,
never fails the partition when it goes away, and the producer never waits for it: a viewer that
falls `capacity` batches behind loses the oldest for itself alone, and the sequence numbers it
is sent show the gap. Lock order: the log's lock, then a view's; a view never calls the log.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator

import pyarrow as pa

from flight_server.polling import Slices
from flight_server.wire.errors import Cancelled


class PartitionView:
    """One viewer's window on one partition."""

    def __init__(self, label: str, capacity: int, held: list[tuple[int, pa.RecordBatch]]):
        self.label = label
        self._cond = threading.Condition()
        self._items: deque[tuple[int, pa.RecordBatch]] = deque(held[-capacity:], maxlen=capacity)
        self._ended = False
        self._error: Exception | None = None  # how the partition failed, raised after what came before

    def offer(self, seq: int, batch: pa.RecordBatch) -> None:
        """Called by the log for every appended batch; never waits."""
        with self._cond:
            self._items.append((seq, batch))
            self._cond.notify_all()

    def end(self, error: Exception | None = None) -> None:
        """The partition reached EOF (`error` None) or failed with `error`."""
        with self._cond:
            self._ended, self._error = True, error
            self._cond.notify_all()

    def stream(self, cancelled: Callable[[], bool]) -> Iterator[tuple[int, pa.RecordBatch]]:
        """`(seq, batch)` as they are appended, until the partition ends; a failure comes last."""
        while True:
            slices = Slices()
            with self._cond:
                while not self._items:
                    if self._ended:
                        if self._error is not None:
                            raise self._error
                        return
                    if cancelled():
                        raise Cancelled(f"The viewer of {self.label} went away.")
                    self._cond.wait(slices())
                item = self._items.popleft()
            yield item
