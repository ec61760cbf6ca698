"""Snapshot pins: plans that carry the same pin read the snapshot the first of them read.

The tasks of one Spark action each plan their own read (spark_reader/batch.py) and must agree on
the snapshot: the first plan of a pin takes the table's latest snapshot, later ones reuse it. Pins
are kept in this server's memory, bounded in number and forgotten an hour after their last use.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

MAX_PINS = 4096
IDLE_SECONDS = 3600.0


class SnapshotPins:
    """(table, pin) -> snapshot id, least recently used first; one lock."""

    def __init__(self, max_pins: int = MAX_PINS, idle_seconds: float = IDLE_SECONDS):
        self._pins: OrderedDict[tuple[str, str], tuple[int | None, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_pins, self.idle_seconds = max_pins, idle_seconds

    def resolve(self, table: str, pin: str, latest: int | None) -> int | None:
        """The snapshot of `pin` on `table`: `latest` the first time, the same one after."""
        now = time.monotonic()
        key = (table, pin)
        with self._lock:
            while self._pins:
                oldest, (_, used) = next(iter(self._pins.items()))
                if now - used <= self.idle_seconds and len(self._pins) < self.max_pins:
                    break
                del self._pins[oldest]
            snapshot = self._pins.pop(key, (latest, now))[0]
            self._pins[key] = (snapshot, now)
            return snapshot
