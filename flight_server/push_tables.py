"""The registry of push tables: register, look up, fail, drop, commit, stats (no Flight imports)."""

from __future__ import annotations

import threading
import uuid
from dataclasses import asdict, dataclass, field

import pyarrow as pa

from flight_server.errors import InvalidRequest, NotFound, WrongState
from flight_server.push_log import PartitionLog
from flight_server.schemas import describe, schema_difference

MAX_PARTITIONS = 1024
MAX_CAPACITY = 1 << 20


@dataclass
class PushTable:
    """A registered push table: its schema and one `PartitionLog` per partition."""

    name: str
    schema: pa.Schema
    capacity: int
    partitions: list[PartitionLog]
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
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise InvalidRequest(f"{what} must be an integer from 1 to {upper}, got {value!r}.")
    return value


def _check_name(name) -> str:
    if not isinstance(name, str) or not name or "/" in name or len(name) > 200:
        raise InvalidRequest(
            f"Push table name {name!r} is not valid; use a non-empty string of at most 200 characters without '/'."
        )
    return name


class PushRegistry:
    """All push tables of one server. Thread-safe; the tables' logs have their own locks."""

    def __init__(self):
        self._lock = threading.Lock()
        self._tables: dict[str, PushTable] = {}
        self._closing: str | None = None

    def register(self, name, schema: pa.Schema, capacity=16, partitions=1, writers=1) -> PushTable:
        _check_name(name)
        capacity = _positive_int(capacity, f"capacity of push table {name!r}", MAX_CAPACITY)
        partitions = _positive_int(partitions, f"partitions of push table {name!r}", MAX_PARTITIONS)
        writers = _positive_int(writers, f"writers of push table {name!r}", 1 << 16)
        if len(schema) == 0:
            raise InvalidRequest(f"Push table {name!r} needs at least one column; the schema has none.")
        table = PushTable(
            name, schema, capacity,
            [PartitionLog(f"push table {name!r} partition {p}", capacity, writers) for p in range(partitions)],
        )
        with self._lock:
            if self._closing:
                raise WrongState(f"Cannot register push table {name!r}: {self._closing}.")
            if name in self._tables:
                raise InvalidRequest(
                    f"Push table {name!r} is already registered; drop it first or pick another name."
                )
            self._tables[name] = table
        return table

    def get(self, name) -> PushTable:
        _check_name(name)
        with self._lock:
            table = self._tables.get(name)
        if table is None:
            raise NotFound(f"Push table {name!r} is not registered; register it first (flight_cli register).")
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
        if table is None:
            raise NotFound(f"Push table {name!r} is not registered; nothing to drop.")
        for log in table.partitions:
            log.fail(f"push table {name!r} was dropped")

    def commit(self, name, offsets: dict) -> None:
        table = self.get(name)
        if not isinstance(offsets, dict):
            raise InvalidRequest(f"Commit of push table {name!r} needs offsets as {{\"P\": seq}}, got {offsets!r}.")
        parsed = []
        for p, seq in offsets.items():
            try:
                part = int(p)
            except (TypeError, ValueError):
                raise InvalidRequest(f"Commit of push table {name!r}: partition {p!r} is not a number.") from None
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                raise InvalidRequest(f"Commit of push table {name!r} partition {p}: offset {seq!r} is not an integer >= 0.")
            parsed.append((table.partition(part), seq))
        for log, seq in parsed:
            log.commit(seq)

    def stats(self, name=None) -> dict:
        tables = [self.get(name)] if name is not None else self.tables()
        return {
            t.name: {
                "schema": describe(t.schema),
                "capacity": t.capacity,
                "partitions": {str(i): asdict(log.stats()) for i, log in enumerate(t.partitions)},
            }
            for t in tables
        }

    def shutdown(self, reason: str = "the server is shutting down") -> None:
        """Fail every open partition so blocked writers and readers end with `reason`."""
        with self._lock:
            self._closing = reason
            tables = list(self._tables.values())
        for t in tables:
            for log in t.partitions:
                log.fail(reason)
