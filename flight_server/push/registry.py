"""The registry of push tables: register, look up, fail, drop, commit, stats (no Flight imports)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass, field

import pyarrow as pa

from flight_server.limits import TableBudget
from flight_server.push.log import PartitionLog
from flight_server.wire import allocator
from flight_server.wire.actions import PushOffsets, PushTableStats
from flight_server.wire.errors import InvalidRequest, NotFound, WrongState
from flight_server.wire.names import is_utf8
from flight_server.wire.schemas import describe, schema_difference
from flight_server.wire.values import is_int

MAX_PARTITIONS = 1024
MAX_CAPACITY = 1 << 20
MAX_CAPACITY_BYTES = 1 << 40
MAX_IDLE_TIMEOUT_S = 86400.0
WATCHDOG_TICK_S = 0.05  # how late past its idle_timeout_s a quiet partition may fail
END_MARKER_MODES = ("required", "optional")


@dataclass
class PushTable:
    """A registered push table: its schema and one `PartitionLog` per partition."""

    name: str
    schema: pa.Schema
    capacity: int
    partitions: list[PartitionLog]
    # "optional": a stream that half-closes without {"end": N} counts as a clean end (unsafe:
    # a crashed producer looks the same); for plain Flight clients that cannot send the marker.
    end_marker: str = "required"
    capacity_bytes: int | None = None  # each partition's byte bound (None: batches only)
    # Tells this table from an earlier one of the same name, so old tickets are refused.
    uid: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def partition(self, p: int) -> PartitionLog:
        if not 0 <= p < len(self.partitions):
            raise NotFound(
                f"Push table {self.name!r} has no partition {p}; it has partitions "
                f"0..{len(self.partitions) - 1}."
            )
        return self.partitions[p]

    def check_schema(self, schema: pa.Schema, partition: int) -> None:
        diff = schema_difference(self.schema, schema)
        if diff:
            raise InvalidRequest(
                f"Schema refused for push table {self.name!r} partition {partition}: {diff}. "
                f"Send batches with the registered schema: {describe(self.schema)}."
            )


def _positive_int(value, what: str, upper: int) -> int:
    if not is_int(value, minimum=1, maximum=upper):
        raise InvalidRequest(f"{what} must be an integer from 1 to {upper}, got {value!r}.")
    return value


def _idle_timeout(value, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_IDLE_TIMEOUT_S:
        raise InvalidRequest(
            f"idle_timeout_s of push table {name!r} must be a number of seconds from 0 (exclusive) "
            f"to {MAX_IDLE_TIMEOUT_S:g}, or null for none; got {value!r}."
        )
    return float(value)


def _end_marker(value, name: str) -> str:
    if value not in END_MARKER_MODES:
        raise InvalidRequest(
            f"end_marker of push table {name!r} must be 'required' (the default) or 'optional', got {value!r}."
        )
    return value


def _check_name(name) -> str:
    if (not isinstance(name, str) or not name or "/" in name or len(name) > 200 or not is_utf8(name)
            or re.search(r"[\x00-\x1f\x7f]", name) or name != name.strip()):
        raise InvalidRequest(
            f"Push table name {name!r} is not valid; use a non-empty UTF-8 string of at most 200 "
            "printable characters (no control characters such as NUL or newline, no surrounding spaces) without '/'."
        )
    return name


class PushRegistry:
    """All push tables of one server. Thread-safe; the tables' logs have their own locks."""

    def __init__(self, budget: TableBudget | None = None):
        self.budget = budget or TableBudget()
        self._lock = threading.Lock()
        self._tables: dict[str, PushTable] = {}
        self._closing: str | None = None
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self.on_drop: list = []  # callables given a dropped table's name (the server's metrics forget it)

    def register(self, name, schema: pa.Schema, capacity=16, partitions=1, writers=1,
                 end_marker="required", idle_timeout_s=None, capacity_bytes=None) -> PushTable:
        _check_name(name)
        capacity = _positive_int(capacity, f"capacity of push table {name!r}", MAX_CAPACITY)
        partitions = _positive_int(partitions, f"partitions of push table {name!r}", MAX_PARTITIONS)
        writers = _positive_int(writers, f"writers of push table {name!r}", 1 << 16)
        end_marker = _end_marker(end_marker, name)
        idle = _idle_timeout(idle_timeout_s, name)
        if capacity_bytes is not None:
            capacity_bytes = _positive_int(capacity_bytes, f"capacity_bytes of push table {name!r}", MAX_CAPACITY_BYTES)
        capacity_bytes = self.budget.capacity_bytes(capacity_bytes)
        if len(schema) == 0:
            raise InvalidRequest(f"Push table {name!r} needs at least one column; the schema has none.")
        table = PushTable(
            name, schema, capacity,
            [PartitionLog(f"push table {name!r} partition {p}", capacity, writers, idle, capacity_bytes)
             for p in range(partitions)],
            end_marker, capacity_bytes,
        )
        with self._lock:
            if self._closing:
                raise WrongState(f"Cannot register push table {name!r}: {self._closing}.")
            if name in self._tables:
                raise InvalidRequest(
                    f"Push table {name!r} is already registered; drop it first or pick another name."
                )
            self.budget.reserve(name, partitions, capacity_bytes)
            self._tables[name] = table
            if idle is not None and self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch_idle, name="push-idle-watchdog", daemon=True)
                self._watchdog.start()
        return table

    def _watch_idle(self) -> None:
        """Fail partitions whose producers went quiet past their table's idle_timeout_s."""
        while not self._stop.wait(WATCHDOG_TICK_S):
            now = time.monotonic()
            for table in self.tables():
                for log in table.partitions:
                    log.check_idle(now)

    @property
    def closing(self) -> str | None:
        """Why the registry takes no more tables (the server is shutting down), else None."""
        return self._closing

    def get(self, name) -> PushTable:
        _check_name(name)
        with self._lock:
            table = self._tables.get(name)
        if table is None:
            hint = (f"; {name!r} looks like a Paimon table: push-table commands (stats, drop, fail) do not "
                    "apply to it, `flight_cli list` shows both kinds") if name.count(".") == 1 else ""
            raise NotFound(f"Push table {name!r} is not registered; register it first (flight_cli register){hint}.")
        return table

    def tables(self) -> list[PushTable]:
        with self._lock:
            return list(self._tables.values())

    def fail(self, name, message: str, partition: int | None = None) -> None:
        table = self.get(name)
        logs = table.partitions if partition is None else [table.partition(partition)]
        for log in logs:
            log.fail(message)

    def drop(self, name) -> None:
        _check_name(name)
        with self._lock:
            table = self._tables.pop(name, None)
            if table is not None:
                self.budget.release(len(table.partitions), table.capacity_bytes)
        if table is None:
            raise NotFound(f"Push table {name!r} is not registered; nothing to drop.")
        for log in table.partitions:
            log.fail(f"push table {name!r} was dropped")
        for forget in self.on_drop:
            forget(name)
        # The batches a table held were freed as they were read, and glibc keeps such freed memory.
        # A drop is rare next to batches, so it pays for a trim (docs/benchmarks_push.md, "Server RSS").
        allocator.release_free_memory()

    def commit(self, name, offsets: dict, discard: bool = False) -> None:
        table = self.get(name)
        if not isinstance(offsets, dict):
            raise InvalidRequest(f"Commit of push table {name!r} needs offsets as {{\"P\": seq}}, got {offsets!r}.")
        parsed = []
        for p, seq in offsets.items():
            try:
                part = int(p)
            except (TypeError, ValueError):
                raise InvalidRequest(f"Commit of push table {name!r}: partition {p!r} is not a number.") from None
            if not is_int(seq, minimum=0):
                raise InvalidRequest(f"Commit of push table {name!r} partition {p}: offset {seq!r} is not an integer >= 0.")
            parsed.append((table.partition(part), seq))
        for log, seq in parsed:
            log.commit(seq, discard)

    def stats(self, name=None) -> dict[str, PushTableStats]:
        tables = [self.get(name)] if name is not None else self.tables()
        return {
            t.name: PushTableStats(describe(t.schema), t.capacity, t.capacity_bytes, t.end_marker,
                                   t.partitions[0].idle_timeout_s,
                                   {str(i): log.stats() for i, log in enumerate(t.partitions)})
            for t in tables
        }

    def offsets(self, name, at_ms: int | None = None) -> PushOffsets:
        """Where each partition of a push table stands (the `offsets` action); with `at_ms`, also
        its first held batch appended at or after then."""
        return PushOffsets({str(i): log.offsets(at_ms) for i, log in enumerate(self.get(name).partitions)})

    def shutdown(self, reason: str = "the server is shutting down") -> None:
        """Fail every open partition so blocked writers and readers end with `reason`."""
        with self._lock:
            self._closing = reason
            tables = list(self._tables.values())
        self._stop.set()
        for t in tables:
            for log in t.partitions:
                log.fail(reason)

    def join(self, timeout: float) -> bool:
        """After `shutdown`: wait (at most `timeout` s) for the idle watchdog; False if it outlived it."""
        with self._lock:
            watchdog = self._watchdog
        if watchdog is not None:
            watchdog.join(timeout)
        return watchdog is None or not watchdog.is_alive()
