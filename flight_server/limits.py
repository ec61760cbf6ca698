"""The server's limits: concurrent streams, and the bytes push tables may hold (no Flight imports).

Over a limit a call gets `LimitExceeded`, a clear error that names the limit and the flag that
sets it, never an out-of-memory kill: push tables reserve their bytes at `register` (partitions x
capacity_bytes) from the --max-memory budget, so what is held can never pass it, and a stream
beyond --max-streams is refused before it takes a thread for long.
"""

from __future__ import annotations

import threading

from flight_server.wire.errors import LimitExceeded

MiB = 1 << 20
DEFAULT_MAX_STREAMS = 1024
DEFAULT_MAX_TABLES = 1000
DEFAULT_MAX_PARTITIONS = 16384
DEFAULT_PARTITION_BYTES = 64 * MiB  # a partition's capacity_bytes under --max-memory when register names none


def mib(n: int) -> str:
    return f"{n / MiB:.4g} MiB"


class StreamSlots:
    """At most `limit` do_get/do_put streams at once (None: no limit)."""

    def __init__(self, limit: int | None = DEFAULT_MAX_STREAMS):
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    def acquire(self, method: str) -> None:
        with self._lock:
            if self.limit is not None and self._open >= self.limit:
                raise LimitExceeded(
                    f"The server has {self._open} streams open, its limit (--max-streams {self.limit}); "
                    f"this {method} was refused. Retry after other streams end, or raise --max-streams."
                )
            self._open += 1

    def release(self) -> None:
        with self._lock:
            self._open -= 1

    @property
    def open(self) -> int:
        with self._lock:
            return self._open


class TableBudget:
    """Push tables, their partitions and their reserved bytes against the server's limits."""

    def __init__(self, max_memory: int | None = None, max_tables: int = DEFAULT_MAX_TABLES,
                 max_partitions: int = DEFAULT_MAX_PARTITIONS):
        self.max_memory = max_memory
        self.max_tables = max_tables
        self.max_partitions = max_partitions
        self.tables = 0
        self.partitions = 0
        self.reserved = 0

    def capacity_bytes(self, requested: int | None) -> int | None:
        """A partition's byte bound: the one asked for, else the default under --max-memory."""
        if requested is None and self.max_memory is not None:
            return min(DEFAULT_PARTITION_BYTES, self.max_memory)
        return requested

    def reserve(self, name: str, partitions: int, capacity_bytes: int | None) -> None:
        """Count a new table in (the caller holds the registry's lock), or refuse it."""
        if self.tables + 1 > self.max_tables:
            raise LimitExceeded(
                f"Cannot register push table {name!r}: the server holds {self.tables} push tables, its limit "
                f"(--max-tables {self.max_tables}); drop tables that are done, or raise --max-tables."
            )
        if self.partitions + partitions > self.max_partitions:
            raise LimitExceeded(
                f"Cannot register push table {name!r} with {partitions} partitions: the server's push tables "
                f"have {self.partitions} of at most {self.max_partitions} (--max-partitions); drop tables "
                "that are done, register fewer partitions, or raise --max-partitions."
            )
        each = capacity_bytes or 0  # None: partitions bounded by batches only, which reserve no bytes
        need = partitions * each
        if self.max_memory is not None and self.reserved + need > self.max_memory:
            raise LimitExceeded(
                f"Cannot register push table {name!r}: it needs {partitions} partition(s) x {mib(each)} "
                f"(capacity_bytes) = {mib(need)}, and --max-memory {mib(self.max_memory)} has "
                f"{mib(self.max_memory - self.reserved)} left that other push tables do not hold; register "
                "with a smaller capacity_bytes or fewer partitions, drop a table, or raise --max-memory."
            )
        self.tables += 1
        self.partitions += partitions
        self.reserved += need

    def release(self, partitions: int, capacity_bytes: int | None) -> None:
        self.tables -= 1
        self.partitions -= partitions
        self.reserved -= partitions * (capacity_bytes or 0)
