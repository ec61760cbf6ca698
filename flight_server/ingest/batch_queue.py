"""What a table's committer holds between do_put and its writer lanes: the bounded batch queue,
and the policy that says when a group commit is due. Pure parts, without threads or locks (the
committer's lock guards them), so each rule is tested on its own (tests/test_batch_queue.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

COALESCE_ROWS = 65536  # a writer takes queued batches up to this many rows into one write ...
COALESCE_BYTES = 8 << 20  # ... or this many bytes (one batch at least)


def default_queue_bytes(commit_bytes: int) -> int:
    """What may wait for a writer: a quarter of a commit, at least 4 MiB and at most 16."""
    return max(4 << 20, min(16 << 20, commit_bytes // 4))


class Queued(Protocol):
    order: int  # when it was queued
    nbytes: int
    rows: int


class BatchQueue:
    """Batches waiting for a writer, in order, bounded in bytes: a submitter waits while it is
    `full()` (backpressure: the bound is what a table holds unwritten). A writer takes a chunk of
    up to COALESCE_ROWS rows / COALESCE_BYTES at a time (one write of many small batches), never
    past a coming seal (`flush_to`: the last order the seal covers)."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self.chunk_bytes = min(COALESCE_BYTES, limit_bytes // 2)  # a full queue is always a chunk
        self._items: deque = deque()
        self.bytes = self.rows = 0

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[Queued]:
        """The items waiting, in order (a copy: the caller may remove some meanwhile)."""
        return iter(list(self._items))

    def full(self) -> bool:
        return self.bytes >= self.limit_bytes

    def first_order(self) -> int | None:
        return self._items[0].order if self._items else None

    def append(self, item: Queued) -> None:
        self._items.append(item)
        self.bytes += item.nbytes
        self.rows += item.rows

    def takeable(self, flush_to: int | None) -> bool:
        """Whether a writer should take now: a chunk's worth is queued, or a seal is coming and
        batches before it are queued."""
        if not self._items:
            return False
        if flush_to is not None:
            return self._items[0].order <= flush_to
        return self.rows >= COALESCE_ROWS or self.bytes >= self.chunk_bytes

    def take(self, flush_to: int | None) -> list:
        """The next items for one write: at least one, then while they fit a chunk (and not past
        `flush_to`)."""
        chunk: list = []
        rows = nbytes = 0
        while self._items:
            item = self._items[0]
            if chunk and (rows + item.rows > COALESCE_ROWS or nbytes + item.nbytes > COALESCE_BYTES
                          or (flush_to is not None and item.order > flush_to)):
                break
            chunk.append(self._items.popleft())
            rows, nbytes = rows + item.rows, nbytes + item.nbytes
        self.bytes -= nbytes
        self.rows -= rows
        return chunk

    def remove(self, matches: Callable[[Queued], bool]) -> list:
        """Take out the items `matches` accepts (a fenced or cancelled stream's), keeping the order."""
        removed = [item for item in self._items if matches(item)]
        if removed:
            self._items = deque(item for item in self._items if not matches(item))
            self.bytes -= sum(item.nbytes for item in removed)
            self.rows -= sum(item.rows for item in removed)
        return removed

    def clear(self) -> list:
        items, self._items = list(self._items), deque()
        self.bytes = self.rows = 0
        return items


@dataclass(frozen=True)
class CommitPolicy:
    """When a group commit is due: `interval_s` after the last one started (its seal: a seal's wait
    for the writers is part of the interval, not added to it), or at once when `commit_bytes` are
    waiting."""

    interval_s: float
    commit_bytes: int

    def wait_s(self, pending_bytes: int, since_last_start_s: float) -> float:
        """Seconds until the next group commit is due (<= 0: now)."""
        if pending_bytes >= self.commit_bytes:
            return 0.0
        return self.interval_s - since_last_start_s

    def crossed(self, before: int, added: int) -> bool:
        """Whether a batch of `added` bytes, with `before` pending, starts a group or makes it big
        enough to commit early (its commit step is woken then)."""
        return not before or before < self.commit_bytes <= before + added
