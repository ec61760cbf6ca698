"""The threads that run every table's commit step on one server (its group commits and, between
them, its chores: compactions' and staged jobs' commits): a bounded pool, not a thread per table,
so that a server's threads follow what it commits at once, not the tables it ever wrote.

A job (a table's committer) is woken when it has something to do (`wake`: a group started, a
commit's bytes arrived, a chore or a close came), and a worker runs its `step()`, which does what
is due and says when it wants to run again: in `delay` seconds (its commit interval has not passed
yet), at once, or not until it is woken. Jobs run in the order they became due (FIFO): with more
tables due than workers, a table waits for its turn and keeps queueing batches, which its next
commit takes together; under load a table's commit interval stretches to about (tables due x
one commit's time / workers), and its commits grow. A job never runs on two workers at once; a
wake while it runs runs it again after.

More than one worker lets commits overlap where they wait (storage round trips, a seal's writes).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)

COMMIT_THREADS = 4


class Job(Protocol):
    name: str

    def step(self) -> float | None:
        """Do what is due; seconds until the next step is due (<= 0: at once), or None: when woken."""


_READY, _RUNNING, _TIMED = "ready", "running", "timed"


class CommitPool:
    def __init__(self, size: int = COMMIT_THREADS, name: str = "commit"):
        if size < 1:
            raise ValueError(f"a commit pool needs at least one thread, got {size}")
        self.size = size
        self._cond = threading.Condition()
        self._ready: deque[Job] = deque()
        self._timed: list[tuple[float, int, int, Job]] = []  # (due, tie-break, generation, job)
        self._state: dict[Job, tuple[str, int]] = {}  # a job woken or waiting: its state and generation
        self._again: set[Job] = set()  # woken while it ran: it runs again
        self._ties = itertools.count()
        self._stopped = False
        self.steps = 0
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(size)]
        for t in self._threads:
            t.start()

    def wake(self, job: Job) -> None:
        """`job` has something to do: it runs soon (at once if a worker is free), in FIFO order."""
        with self._cond:
            state, generation = self._state.get(job, (None, 0))
            if state == _RUNNING:
                self._again.add(job)
            elif state != _READY:  # idle, or waiting for its time: due now
                self._state[job] = (_READY, generation + 1)
                self._ready.append(job)
                self._cond.notify()

    def waiting(self) -> int:
        """Jobs due and waiting for a worker."""
        with self._cond:
            return len(self._ready)

    def stop(self) -> None:
        """The workers end once no job is ready (the committers were closed first, and each one's
        last step has run)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def join(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def _next(self) -> Job | None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._timed and self._timed[0][0] <= now:
                    _, _, generation, job = heapq.heappop(self._timed)
                    if self._state.get(job) == (_TIMED, generation):  # else woken since: a stale entry
                        self._state[job] = (_READY, generation + 1)
                        self._ready.append(job)
                if self._ready:
                    job = self._ready.popleft()
                    self._state[job] = (_RUNNING, self._state[job][1])
                    return job
                if self._stopped:
                    return None
                self._cond.wait(self._timed[0][0] - now if self._timed else None)

    def _work(self) -> None:
        while (job := self._next()) is not None:
            try:
                delay = job.step()
            except BaseException:  # noqa: BLE001 - a step fails its own streams; this is a defect: log, go on
                log.exception("commit_step_failed", table=job.name)
                delay = None
            with self._cond:
                self.steps += 1
                generation = self._state[job][1] + 1
                if job in self._again or (delay is not None and delay <= 0):
                    self._again.discard(job)
                    self._state[job] = (_READY, generation)
                    self._ready.append(job)
                    self._cond.notify()
                elif delay is None:
                    del self._state[job]
                else:
                    self._state[job] = (_TIMED, generation)
                    heapq.heappush(self._timed, (time.monotonic() + delay, next(self._ties), generation, job))
                    self._cond.notify()  # a waiting worker's timeout may now be too long
            del job  # not held while the thread waits: an evicted table's committer is garbage
