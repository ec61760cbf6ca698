"""When a table's committer gives freed memory back to the OS (malloc_trim, wire/allocator.py).

A trim takes milliseconds on the commit step and holds the heap's lock meanwhile (what it cost
after every commit: docs/benchmarks_ingest.md, section 3). So: once `after_bytes` were committed
since the last trim, trim as soon as the table is idle (the end of a burst), and under load at
most once every `every_s`. Pure (the caller passes the clock), tested in tests/test_ingest_parts.py.
"""

from __future__ import annotations

TRIM_AFTER_BYTES = 16 << 20
TRIM_EVERY_S = 2.0


class TrimPolicy:
    def __init__(self, after_bytes: int = TRIM_AFTER_BYTES, every_s: float = TRIM_EVERY_S):
        self.after_bytes, self.every_s = after_bytes, every_s
        self._untrimmed = 0  # bytes committed since the last trim
        self._trimmed_at = float("-inf")

    def committed(self, nbytes: int, idle: bool, now: float) -> bool:
        """A commit of `nbytes` landed at `now` (`idle`: nothing queued or written after it):
        whether to trim now. A True answer counts as the trim done."""
        self._untrimmed += nbytes
        if self._untrimmed < self.after_bytes or not (idle or now - self._trimmed_at >= self.every_s):
            return False
        self._untrimmed, self._trimmed_at = 0, now
        return True
