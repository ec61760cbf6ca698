"""The threads that run every table's writes on one server: a bounded pool, not threads per table.

A table's writer lane (ingest/lanes.py) is pinned to one of the pool's threads for the lane's
life: pypaimon-rust's writers are bound to the thread that made them, so the lane's writer is
made, written, prepared and closed there. A lane is `kick`ed when it may have something to do (a
chunk queued, a seal, a close); its thread then serves it one thing at a time (one chunk, one
prepare), taking turns with the other lanes pinned to it, so a busy table does not starve the
others on its thread. A lane its commit step waits for (a seal's last writes, a prepare) is
kicked `urgent`: it goes first, so a commit waits for its own table's work, not for every other
table's writes on the thread (with 250 tables to a thread, a seal had waited behind 250 chunks).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)

DEFAULT_WRITE_THREADS = max(2, min(16, os.cpu_count() or 1))  # Parquet encoding runs mostly without the GIL


class Served(Protocol):
    def serve(self) -> bool:
        """(Its pinned thread.) Do one thing it has to; True when it may have more."""


class _Thread:
    def __init__(self, name: str):
        self.cond = threading.Condition()
        self.queue: deque[Served] = deque()
        self.queued: set[Served] = set()
        self.lanes = 0  # pinned to it now
        self.stopped = False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def kick(self, lane: Served, urgent: bool = False) -> None:
        with self.cond:
            if lane in self.queued:
                if not urgent:
                    return
                self.queue.remove(lane)
            self.queued.add(lane)
            if urgent:
                self.queue.appendleft(lane)
            else:
                self.queue.append(lane)
            self.cond.notify()

    def _loop(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.queue or self.stopped)
                if not self.queue:
                    return
                lane = self.queue.popleft()
                self.queued.discard(lane)
            try:
                more = lane.serve()
            except BaseException:  # noqa: BLE001 - serve hands a write's error to its committer; this is a defect
                log.exception("writer_lane_failed", thread=self.thread.name)
                more = False
            if more:
                self.kick(lane)
            del lane  # not held while the thread waits: an evicted table's lanes (its committer) are garbage


class WriterPool:
    def __init__(self, size: int = DEFAULT_WRITE_THREADS, name: str = "write"):
        if size < 1:
            raise ValueError(f"a writer pool needs at least one thread, got {size}")
        self.size = size
        self._lock = threading.Lock()
        self._threads = [_Thread(f"{name}-{i}") for i in range(size)]
        for t in self._threads:
            t.thread.start()

    def pin(self, count: int) -> list[int]:
        """Threads for `count` lanes of one table: the least loaded, distinct while there are enough."""
        with self._lock:
            order = sorted(range(self.size), key=lambda i: self._threads[i].lanes)
            slots = [order[i % self.size] for i in range(count)]
            for i in slots:
                self._threads[i].lanes += 1
            return slots

    def unpin(self, slots: list[int]) -> None:
        with self._lock:
            for i in slots:
                self._threads[i].lanes -= 1

    def pinned(self) -> int:
        """Lanes pinned to the pool's threads now (those of the open committers)."""
        with self._lock:
            return sum(t.lanes for t in self._threads)

    def kick(self, slot: int, lane: Served, urgent: bool = False) -> None:
        """`lane` may have something to do; `urgent`: a commit step waits for it, it goes first."""
        self._threads[slot].kick(lane, urgent)

    def stop(self) -> None:
        """The threads end once what they were kicked for is served (closed lanes close their writers)."""
        for t in self._threads:
            with t.cond:
                t.stopped = True
                t.cond.notify()

    def join(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.thread.is_alive() for t in self._threads)
