"""A Paimon read as the client asked for it: the JSON command or path, parsed and checked once."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Protocol

from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.values import is_int

OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "is_null", "is_not_null")
STARTS = ("latest", "latest-full", "earliest")
# Where a stream starts, in Paimon's scan.mode names (plus "earliest"): one vocabulary for
# `flight_cli tail --from` and Spark's `scan.mode`; `scan.snapshot-id` goes with the from-snapshot ones.
SCAN_MODES = ("latest", "latest-full", "from-snapshot", "from-snapshot-full", "earliest")


def follow_start(scan_mode: str, snapshot_id: int | None = None) -> str:
    """A scan mode (and snapshot id) as a follow command's `start`: latest, latest-full, earliest,
    snapshot:N (deltas from N) or snapshot-full:N (N in full, then deltas)."""
    if scan_mode not in SCAN_MODES:
        raise InvalidRequest(f"Scan mode {scan_mode!r} is not one of {', '.join(SCAN_MODES)}.")
    if scan_mode.startswith("from-snapshot"):
        if not is_int(snapshot_id, minimum=1):
            raise InvalidRequest(f"Scan mode {scan_mode!r} needs a snapshot id >= 1, got {snapshot_id!r}.")
        return f"snapshot{'-full' if scan_mode.endswith('-full') else ''}:{snapshot_id}"
    return scan_mode
DEFAULT_POLL_MS = 1000
_KEYS = names.PAIMON_KEYS
_FOLLOW_ONLY = (names.START, names.CONSUMER_ID, names.POLL_INTERVAL_MS, names.ON_SCHEMA_CHANGE)
_CONSUMER_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_JOB_STAGE = re.compile(r"^t([0-9]{10,16})-")  # names.job_stage
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")
MAX_NAME_BYTES = 200  # a database's directory is NAME.db, a table's NAME: under a file system's 255 bytes
_PIN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_GUARD = re.compile(r"^[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_.-]{1,64}(:[A-Za-z0-9_.-]{1,64})?$")


class PushSubject:
    """A request, target or ticket of a push table (its `name`): what the server logs, counts and
    checks grants on, said by the value itself."""

    kind = names.PUSH
    name: str  # each subclass's dataclass fields (a plain class's annotations make no field)
    partition: int | None

    @property
    def table(self) -> str:
        return self.name

    @property
    def subject(self) -> str:
        return f"push table {self.name!r}"

    def log_fields(self) -> dict:
        return {"table": self.name, "partition": self.partition}


class PaimonSubject:
    """A request, target or ticket of a Paimon table (its `table`)."""

    kind = names.PAIMON

    @property
    def subject(self: _Table) -> str:
        return f"Paimon table {self.table!r}"

    def log_fields(self: _Read) -> dict:
        return {"table": self.table, "mode": self.mode}


class _Table(Protocol):
    """What PaimonSubject's subclasses have: a field or a property `table`."""

    @property
    def table(self) -> str: ...


class _Read(_Table, Protocol):
    """A read's subject (a write target says its own log fields)."""

    @property
    def mode(self) -> str: ...


@dataclass(frozen=True)
class PaimonRequest(PaimonSubject):
    """What to read from one Paimon table; `to_json` and `from_json` round-trip it through tickets."""

    table: str
    snapshot: int | None = None
    from_snapshot: int | None = None
    to_snapshot: int | None = None
    follow: bool = False
    start: str = "latest-full"
    consumer_id: str | None = None
    poll_interval_ms: int = DEFAULT_POLL_MS
    columns: tuple[str, ...] | None = None
    filter: tuple[tuple, ...] = ()
    buckets: tuple[int, ...] | None = None
    changelog: bool = False
    pin: str | None = None
    filter_guard: str | None = None
    on_schema_change: str = names.SCHEMA_CHANGE_CONTINUE  # a follow: go on with its columns, or end
    system: str | None = None  # a system table of `table` ("audit_log"): named "DB.TABLE$audit_log" on the wire

    @property
    def row_kind(self) -> str | None:
        """The name of the leading row-kind column (+I, -U, +U, -D), or None without one."""
        if self.system == names.AUDIT_LOG:
            return names.AUDIT_ROW_KIND
        return names.ROW_KIND if self.changelog else None

    @property
    def mode(self) -> str:
        if self.follow:
            return names.FOLLOW_READ
        return names.DELTA_READ if self.from_snapshot is not None else names.SNAPSHOT_READ

    @property
    def start_snapshot(self) -> int | None:
        """N for `start: "snapshot:N"` or `"snapshot-full:N"`, else None."""
        return int(self.start.split(":", 1)[1]) if self.start.startswith("snapshot") else None

    def to_json(self) -> dict:
        """The command that asks for this read (defaults left out)."""
        defaults = PaimonRequest(self.table)
        out = {k: v for k, v in asdict(self).items() if v != getattr(defaults, k) or k == names.TABLE}
        if out.pop("system", None) is not None:
            out[names.TABLE] = f"{self.table}${self.system}"
        for key in (names.COLUMNS, names.BUCKETS):
            if key in out:
                out[key] = list(out[key])
        if names.FILTER in out:
            out[names.FILTER] = [list(c) for c in out[names.FILTER]]
        return out

    @staticmethod
    def from_json(cmd: object) -> PaimonRequest:
        """The request a command asks for, every key checked (the inverse of `to_json`)."""
        if not isinstance(cmd, dict):
            raise InvalidRequest(f"A Paimon read command must be a JSON object, got {type(cmd).__name__}.")
        return parse_command(cmd)


@dataclass(frozen=True)
class ReplayRange(PushSubject):
    """Batches [start, end) of one push partition, readable again until a commit passes `end`;
    without `end`, from `start` to the partition's EOF (a retry-safe batch read)."""

    name: str
    partition: int
    start: int
    end: int | None

    def to_json(self) -> dict:
        return names.replay_command(self.name, self.partition, self.start, self.end)

    @staticmethod
    def from_json(cmd: dict) -> ReplayRange:
        name = cmd.get(names.PUSH)
        p, start, end = (cmd.get(k) for k in (names.PARTITION, names.RANGE_START, names.RANGE_END))
        if not (isinstance(name, str) and is_int(p, minimum=0) and is_int(start, minimum=0)
                and (end is None or is_int(end, minimum=0))):
            raise InvalidRequest(
                f"A replay of push table {name!r} needs integer 'partition', 'start' and optional 'end' "
                f"(>= 0), got partition={p!r} start={start!r} end={end!r}."
            )
        if end is not None and end < start:
            raise InvalidRequest(
                f"Replay range [{start}, {end}) of push table {name!r} partition {p} is reversed; need start <= end.")
        unknown = sorted(set(cmd) - {names.PUSH, names.PARTITION, names.RANGE_START, names.RANGE_END})
        if unknown:
            raise InvalidRequest(f"A replay of push table {name!r} takes no key {unknown[0]!r}.")
        return ReplayRange(name, p, start, end)


@dataclass(frozen=True)
class PushView(PushSubject):
    """A viewer of a push table or one partition: what is appended from `start` ("earliest": the
    batches still held, "latest": only new ones), never consumed, committed or failed."""

    name: str
    partition: int | None
    start: str = "latest"

    def to_json(self) -> dict:
        return names.view_command(self.name, self.start, self.partition)

    @staticmethod
    def from_json(cmd: dict) -> PushView:
        name, start, p = cmd.get(names.PUSH), cmd.get(names.VIEW), cmd.get(names.PARTITION)
        if not isinstance(name, str):
            raise InvalidRequest(f"A view of a push table needs its name in 'push', got {name!r}.")
        if start not in names.VIEW_STARTS:
            raise InvalidRequest(f"A view of push table {name!r}: 'view' must be 'earliest' or 'latest', got {start!r}.")
        if p is not None and not is_int(p, minimum=0):
            raise InvalidRequest(f"A view of push table {name!r}: 'partition' must be an integer >= 0, got {p!r}.")
        unknown = sorted(set(cmd) - {names.PUSH, names.VIEW, names.PARTITION})
        if unknown:
            raise InvalidRequest(f"A view of push table {name!r} takes no key {unknown[0]!r}.")
        return PushView(name, p, start)


def _int(cmd: dict, key: str, table: str, minimum: int) -> int | None:
    value = cmd.get(key)
    if value is None:
        return None
    if not is_int(value, minimum=minimum):
        raise InvalidRequest(
            f"Paimon read of {table!r}: {key!r} must be an integer >= {minimum}, got {value!r}."
        )
    return value


def table_name(value: object, what: str = "'table'") -> str:
    if (not isinstance(value, str) or value.count(".") != 1 or "" in value.split(".") or len(value) > 400
            or "/" in value or not names.is_utf8(value)):
        raise InvalidRequest(f"Paimon table name {value!r} in {what} is not 'DB.TABLE'; name it e.g. 'db.orders'.")
    if "$" in value:  # Paimon's system tables and branches: a view of a table, not a table
        raise InvalidRequest(
            f"Paimon table name {value!r} in {what}: '$' names one of Paimon's system tables or branches "
            f"(t$audit_log, t$snapshots, t$branch_b); this server serves only {_served_systems()}, and only to "
            f"read (get_flight_info, get_schema, do_get; flight_cli tail); name the table itself "
            f"({value.split('$', 1)[0]!r}).")
    if _UNPRINTABLE.search(value) or value != value.strip():
        raise InvalidRequest(f"Paimon table name {value!r} in {what} has a control character or surrounding "
                             "spaces; use printable characters, e.g. 'db.orders'.")
    if any(len(part.encode()) > MAX_NAME_BYTES for part in value.split(".")):
        raise InvalidRequest(f"Paimon table name {value[:40]!r}... in {what} is too long: the database and the "
                             f"table are directory names, at most {MAX_NAME_BYTES} bytes each in UTF-8.")
    return value


def _served_systems() -> str:
    return " and ".join(f"t${s}" for s in names.SYSTEM_TABLES)


def split_system(value: str) -> tuple[str, str | None]:
    """"DB.TABLE$SYSTEM" as ("DB.TABLE", "system"); a name without '$' as (name, None)."""
    table, dollar, system = value.partition("$")
    return (table, system.lower()) if dollar else (value, None)


def read_table_name(value: object, what: str = "'table'") -> tuple[str, str | None]:
    """The table a read names and the system table of it, if any: "DB.TABLE" or "DB.TABLE$audit_log"
    (as Paimon, the system table's name in any case)."""
    if not isinstance(value, str) or "$" not in value:
        return table_name(value, what), None
    table, system = split_system(value)
    if system not in names.SYSTEM_TABLES:
        raise InvalidRequest(
            f"Paimon table name {value!r} in {what}: '$' names one of Paimon's system tables or branches; this "
            f"server serves only {_served_systems()} (every row of the table with a leading "
            f"{names.AUDIT_ROW_KIND!r} column: +I, -U, +U, -D), not {system!r}; read {table}$audit_log, or name the "
            f"table itself ({table!r}).")
    return table_name(table, what), system


def check_consumer_id(value: object, what: str, key: str = names.CONSUMER_ID) -> str:
    """A consumer id is a file name in the table's consumer directory: keep it to a safe alphabet
    (producer names share it: they are keys of snapshot properties and appear in logs)."""
    if not isinstance(value, str) or not _CONSUMER_ID.match(value) or not value.strip("."):
        raise InvalidRequest(
            f"{what}: {key!r} {value!r} must be 1-128 characters of letters, digits, '_', '.', '-' (not only dots).")
    return value


def stage_started_ms(stage: str) -> int | None:
    """When the job of stage id `stage` began (epoch ms), if the id says so (`names.job_stage`)."""
    match = _JOB_STAGE.match(stage)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class PushTarget(PushSubject):
    """A push table, or one partition of it (`partition` None means all partitions)."""

    name: str
    partition: int | None = None
    producer: str | None = None  # a named producer: idempotent by its per-batch seq (docs/protocol.md)


@dataclass(frozen=True)
class WriteTarget(PaimonSubject):
    """A durable write into a Paimon table: `["paimon", "DB.TABLE"]` (unnamed producer), the
    command `{"write": "DB.TABLE", "producer": "ID"}` (a named, exactly-once producer), or
    `{"write": "DB.TABLE", "stage": "JOB", "attempt": "A"}` (staged: committed by `commit_staged`)."""

    table: str
    producer: str | None = None
    stage: str | None = None
    attempt: str | None = None
    merge_schema: bool = False  # add the stream's new columns (and widen types) first: the admin grant

    def log_fields(self) -> dict:
        return {"table": self.table, "producer": self.producer, "stage": self.stage, "attempt": self.attempt,
                "merge_schema": self.merge_schema or None}

    @property
    def label(self) -> str:
        if self.stage is not None:
            return f"Paimon table {self.table!r} (stage {self.stage!r}, attempt {self.attempt!r})"
        return f"Paimon table {self.table!r}" + (f" (producer {self.producer!r})" if self.producer else "")

    @staticmethod
    def from_json(cmd: dict) -> WriteTarget:
        table = table_name(cmd.get(names.WRITE), "'write' of the descriptor command")
        unknown = sorted(set(cmd) - {names.WRITE, names.PRODUCER, names.STAGE, names.ATTEMPT, names.MERGE_SCHEMA})
        if unknown:
            raise InvalidRequest(f"A write into Paimon table {table!r} takes no key {unknown[0]!r}; "
                                 "send {\"write\": \"db.t\", \"producer\": \"ID\"} or "
                                 "{\"write\": \"db.t\", \"stage\": \"JOB\", \"attempt\": \"A\"}.")
        what = f"A write into Paimon table {table!r}"
        producer = cmd.get(names.PRODUCER)
        if producer is not None:
            check_consumer_id(producer, what, names.PRODUCER)
        stage, attempt = cmd.get(names.STAGE), cmd.get(names.ATTEMPT)
        if (stage is None) != (attempt is None) or (stage is not None and producer is not None):
            raise InvalidRequest(f"{what}: a staged write names both 'stage' and 'attempt', and no 'producer' "
                                 "(its commit_staged names the producer).")
        if stage is not None:
            check_consumer_id(stage, what, names.STAGE)
            check_consumer_id(attempt, what, names.ATTEMPT)
        merge_schema = cmd.get(names.MERGE_SCHEMA, False)
        if not isinstance(merge_schema, bool):
            raise InvalidRequest(f"{what}: 'merge_schema' must be true or false, got {merge_schema!r}.")
        return WriteTarget(table, producer, stage, attempt, merge_schema)


def parse_path(parts: list[str]) -> PaimonRequest:
    """`["paimon", "DB.TABLE"]` (or `"DB.TABLE$audit_log"`): a full scan of the latest snapshot."""
    if len(parts) != 2 or parts[0] != names.PAIMON:
        raise InvalidRequest(f"Descriptor path {parts!r} is not understood; use ['paimon', 'DB.TABLE'].")
    table, system = read_table_name(parts[1], "the descriptor path")
    return PaimonRequest(table=table, system=system)


def _filter(value: object, table: str) -> tuple[tuple, ...]:
    if not isinstance(value, list):
        raise InvalidRequest(
            f"Paimon read of {table!r}: 'filter' must be a list of [column, op, value], got {value!r}."
        )
    out: list[tuple] = []
    for cond in value:
        if not isinstance(cond, list) or len(cond) not in (2, 3) or not isinstance(cond[0], str):
            raise InvalidRequest(
                f"Paimon read of {table!r}: filter condition {cond!r} is not [column, op, value]."
            )
        column, op = cond[0], cond[1]
        if op not in OPS:
            raise InvalidRequest(
                f"Paimon read of {table!r}: filter op {op!r} on column {column!r} is unknown; use one of {', '.join(OPS)}."
            )
        if op in ("is_null", "is_not_null"):
            out.append((column, op))
            continue
        if len(cond) != 3:
            raise InvalidRequest(f"Paimon read of {table!r}: filter [{column!r}, {op!r}] needs a value.")
        if op == "in" and not isinstance(cond[2], list):
            raise InvalidRequest(f"Paimon read of {table!r}: filter 'in' on column {column!r} needs a list value.")
        out.append((column, op, cond[2]))
    return tuple(out)


def _str_list(cmd: dict, key: str, table: str) -> tuple[str, ...] | None:
    value = cmd.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
        raise InvalidRequest(f"Paimon read of {table!r}: {key!r} must be a non-empty list of column names, got {value!r}.")
    return tuple(value)


def parse_command(cmd: dict) -> PaimonRequest:
    """A JSON command with "table" (docs/protocol.md, "Paimon read commands")."""
    table, system = read_table_name(cmd.get("table"))
    unknown = [k for k in cmd if k not in _KEYS]
    if unknown:
        raise InvalidRequest(
            f"Paimon read of {table!r}: unknown command key {unknown[0]!r}; known keys: {', '.join(_KEYS)}."
        )
    for key in ("follow", "changelog"):
        if not isinstance(cmd.get(key, False), bool):
            raise InvalidRequest(f"Paimon read of {table!r}: {key!r} must be true or false, got {cmd[key]!r}.")
    snapshot = _int(cmd, "snapshot", table, 1)
    from_s, to_s = _int(cmd, "from_snapshot", table, 0), _int(cmd, "to_snapshot", table, 0)
    follow = cmd.get("follow", False)
    if to_s is not None and from_s is None:
        raise InvalidRequest(f"Paimon read of {table!r}: 'to_snapshot' needs 'from_snapshot' (the delta is (A, B]).")
    if from_s is not None and to_s is not None and to_s < from_s:
        raise InvalidRequest(f"Paimon read of {table!r}: delta ({from_s}, {to_s}] is reversed; need from_snapshot <= to_snapshot.")
    chosen = [k for k, v in (("snapshot", snapshot), ("from_snapshot", from_s), ("follow", follow or None)) if v is not None]
    if len(chosen) > 1:
        raise InvalidRequest(f"Paimon read of {table!r}: {' and '.join(repr(k) for k in chosen)} exclude each other; choose one.")
    if not follow:
        given = [k for k in _FOLLOW_ONLY if k in cmd]
        if given:
            raise InvalidRequest(f"Paimon read of {table!r}: {given[0]!r} applies only with \"follow\": true.")
    start = cmd.get("start", "latest-full")
    if not isinstance(start, str) or not (start in STARTS or re.fullmatch(r"snapshot(-full)?:[1-9]\d{0,18}", start)):
        raise InvalidRequest(
            f"Paimon read of {table!r}: 'start' {start!r} is not one of latest, latest-full, earliest, "
            "snapshot:N, snapshot-full:N."
        )
    consumer_id = cmd.get("consumer_id")
    if consumer_id is not None:
        check_consumer_id(consumer_id, f"Paimon read of {table!r}")
    poll = _int(cmd, "poll_interval_ms", table, 1)
    on_change = cmd.get(names.ON_SCHEMA_CHANGE, names.SCHEMA_CHANGE_CONTINUE)
    if on_change not in names.ON_SCHEMA_CHANGES:
        raise InvalidRequest(f"Paimon read of {table!r}: {names.ON_SCHEMA_CHANGE!r} must be one of "
                             f"{', '.join(names.ON_SCHEMA_CHANGES)}, got {on_change!r}.")
    pin = cmd.get(names.PIN)
    if pin is not None and (not isinstance(pin, str) or not _PIN.match(pin)):
        raise InvalidRequest(
            f"Paimon read of {table!r}: 'pin' {pin!r} must be 1-128 characters of letters, digits, '_', '.', ':', '-'.")
    if pin is not None and (follow or snapshot is not None or from_s is not None):
        raise InvalidRequest(f"Paimon read of {table!r}: 'pin' applies only to a read of the latest snapshot "
                             "(no 'snapshot', 'from_snapshot' or 'follow').")
    guard = cmd.get(names.FILTER_GUARD)
    if guard is not None and (not isinstance(guard, str) or not _GUARD.match(guard)):
        raise InvalidRequest(
            f"Paimon read of {table!r}: 'filter_guard' {guard!r} must be RELATION:PLANNING or "
            "RELATION:PLANNING:EXECUTION, each 1-64 characters of letters, digits, '_', '.', '-'.")
    if guard is not None and follow:
        raise InvalidRequest(f"Paimon read of {table!r}: 'filter_guard' applies to snapshot and delta reads, not to a follow.")
    buckets = cmd.get("buckets")
    if buckets is not None and (not isinstance(buckets, list) or not buckets or not all(
            is_int(b, minimum=0) for b in buckets)):
        raise InvalidRequest(f"Paimon read of {table!r}: 'buckets' must be a non-empty list of integers >= 0, got {buckets!r}.")
    columns = _str_list(cmd, "columns", table)
    if system == names.AUDIT_LOG:  # its rowkind column always leads; the table's columns are projected
        columns = _audit_columns(columns, table)
    return PaimonRequest(
        table=table, snapshot=snapshot, from_snapshot=from_s, to_snapshot=to_s, follow=follow,
        start=start, consumer_id=consumer_id, poll_interval_ms=poll or DEFAULT_POLL_MS,
        columns=columns, filter=_filter(cmd.get("filter", []), table),
        buckets=None if buckets is None else tuple(sorted(set(buckets))), changelog=cmd.get("changelog", False),
        pin=pin, filter_guard=guard, on_schema_change=on_change, system=system,
    )


def _audit_columns(columns: tuple[str, ...] | None, table: str) -> tuple[str, ...] | None:
    """An audit_log read's projection of the table's columns: its leading rowkind column is always
    there, so naming it changes nothing."""
    if columns is None or names.AUDIT_ROW_KIND not in columns:
        return columns
    rest = tuple(c for c in columns if c != names.AUDIT_ROW_KIND)
    if not rest:
        raise InvalidRequest(f"Paimon read of {table}$audit_log: 'columns' names only {names.AUDIT_ROW_KIND!r}; "
                             "name at least one of the table's columns too.")
    return rest
