"""Filter guards: whether a Spark read may prune by the filters its planning was given.

PySpark 4.3 keeps a Python source's last planning (its reader, with the filters Spark pushed to
it) on the DataFrame and hands it to every later scan of that DataFrame that plans nothing itself:
a later action without filters, and every other scan of the DataFrame in the same query. Spark
applies each query's own filters above the scan, so a read may return a superset, never less. The
Spark source therefore registers each filtered planning (`filter_guard` "R:P", relation R =
one load()) and its tasks ask with the action's execution id ("R:P:E"); a read prunes only when

- E is the first action to read planning P (a later action may have no filter at all), and
- P is the only planning of R since R's previous action began reading (two filtered scans of one
  DataFrame in one query both read the last planning: neither may prune by it).

Every plan of one (P, E) gets the same answer, so the tasks of one action agree on the endpoints.
Unknown relations (a restarted server) read unpruned. What no request can show is listed in
spark_reader/README.md ("Filters").
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

MAX_ENTRIES = 4096
IDLE_SECONDS = 3600.0
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A bounded map that forgets entries idle for `idle` seconds or beyond `limit` entries."""

    def __init__(self, limit: int, idle: float):
        self.items: OrderedDict[K, tuple[V, float]] = OrderedDict()  # key -> (value, last used)
        self.limit, self.idle = limit, idle

    def get(self, key: K, now: float) -> V | None:
        hit = self.items.pop(key, None)
        if hit is None:
            return None
        self.items[key] = (hit[0], now)
        return hit[0]

    def put(self, key: K, value: V, now: float) -> None:
        self.items.pop(key, None)
        self.items[key] = (value, now)
        while self.items:
            oldest, (_, used) = next(iter(self.items.items()))
            if now - used <= self.idle and len(self.items) <= self.limit:
                break
            del self.items[oldest]


class FilterGuard:
    """Plannings per relation and the answer per (planning, execution); one lock."""

    def __init__(self, max_entries: int = MAX_ENTRIES, idle_seconds: float = IDLE_SECONDS):
        self._lock = threading.Lock()
        # (table, R) -> plannings since R's last new read
        self._pending: _Lru[tuple[str, str], frozenset[str]] = _Lru(max_entries, idle_seconds)
        # (table, P) -> the first execution that read P
        self._first: _Lru[tuple[str, str], str] = _Lru(max_entries, idle_seconds)
        self._answers: _Lru[tuple[str, str, str], bool] = _Lru(max_entries, idle_seconds)  # (table, P, E) -> may prune

    def allows(self, table: str, guard: str) -> bool:
        """Register a planning ("R:P": True, the planner sizes the pruned read) or answer whether
        the read of an action ("R:P:E") may prune by its filter."""
        relation, planning, *execution = guard.split(":")
        now = time.monotonic()
        with self._lock:
            if not execution:
                plannings = self._pending.get((table, relation), now) or frozenset()
                self._pending.put((table, relation), plannings | {planning}, now)
                return True
            key = (table, planning, execution[0])
            answer = self._answers.get(key, now)
            if answer is None:
                first = self._first.get((table, planning), now)
                if first is None:
                    first = execution[0]
                    self._first.put((table, planning), first, now)
                pending = self._pending.get((table, relation), now)
                answer = first == execution[0] and pending == {planning}
                if pending is not None:
                    self._pending.put((table, relation), frozenset(), now)
                self._answers.put(key, answer, now)
            return answer
