"""How many tables group-commit at once on one server, and in which order they take turns.

Each table's commit thread asks the gate for a slot once its commit is due (its interval passed,
or `commit_bytes` arrived) and holds it through its seal and commit. With more tables due than
slots, they commit in the order they asked (FIFO), and a table waiting for its turn keeps
queueing batches, which its next commit then takes together: under load a table's commit
interval stretches to about (tables due x one commit's time / slots), and its commits get
bigger, instead of every table's commit thread contending for the interpreter at once (at 100
tables that contention, not the commits, was a third of the server's CPU).

Slots beyond one let commits overlap where they wait on storage (an object store's round trips).
"""

from __future__ import annotations

import threading
from collections import deque

COMMIT_SLOTS = 4


class CommitGate:
    """A FIFO semaphore: `with gate:` holds a slot; a released slot goes to the longest waiter."""

    def __init__(self, slots: int = COMMIT_SLOTS):
        if slots < 1:
            raise ValueError(f"a commit gate needs at least one slot, got {slots}")
        self.slots = slots
        self._lock = threading.Lock()
        self._free = slots
        self._waiting: deque[threading.Event] = deque()  # one per waiter, woken alone (no herd)

    def __enter__(self) -> CommitGate:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the slot is handed over by __exit__, never taken back
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)
