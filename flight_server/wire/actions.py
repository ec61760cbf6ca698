"""The actions (`do_action`), said once: each one's name, body, result, grant and description.

`ACTIONS` is the one table the server dispatches and checks grants from, `list_actions` answers
from, and docs/protocol.md's action table is generated from (`doc_table`; a test keeps the doc
equal to it). Bodies and results are frozen dataclasses with `to_json` / `from_json`: `Client`
builds each body as a value (`ProducerStateBody("db.t", "p")`), never as a dict literal, and reads
each result as one (`ProducerState.from_json(...).last_seq`); the server's handlers return them.
Every action's result is typed, `stats` too (its push partitions, durable writes, maintenance,
staged writes and Paimon tables), so a key lives here and nowhere else. Each class becomes its
dataclass at its first use (`@message`): a client command builds the few it uses, not all fifty.

`from_json` checks the keys (required ones present; unknown ones refused where the action says
so; a result's unknown keys are left out, for a newer server); the values' meaning (a table name,
an integer >= 1, a timestamp) is checked where the action runs, which names the table and what
to send.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform

from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest

READ, WRITE, ADMIN = "read", "write", "admin"  # the grants (flight_server.auth decides who holds them)


_DECLARED: set[type] = set()  # the @message classes
_MADE: set[type] = set()  # those made dataclasses
_MAKING = threading.Lock()
M = TypeVar("M", bound=type)


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))  # to a type checker: a dataclass
def message(cls: M) -> M:
    """`@dataclass(frozen=True)`, applied at the class's first use (its first instance, unpickled
    ones too, or `from_json`): Python 3.11 compiles six functions for each dataclass, and making
    all fifty at import cost a client command 0.05-0.1 s of CPU at start-up."""
    _DECLARED.add(cls)
    return cls


def made(cls: M) -> M:
    """`cls`, a @message class, as its dataclass (made now if this is its first use)."""
    if cls not in _MADE:
        with _MAKING:
            if cls not in _MADE:
                if cls not in _DECLARED:
                    raise TypeError(f"{cls.__name__} is not a message: declare it with @message")
                dataclass(frozen=True)(cls)
                _MADE.add(cls)
    return cls


class Message:
    """A body or result: its JSON keys are the field names, in their order."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # set when the class is `made`

    STRICT: ClassVar[bool] = False  # refuse keys the action does not take
    # Fields holding other messages: field name -> the function that reads its JSON value.
    NESTED: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Every instance is made here, unpickled ones too; the dataclass's __init__ then runs on it.
        return object.__new__(made(cls))

    def to_json(self) -> dict:
        return {f.name: _json(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, value: dict, action: str = "") -> Self:
        if not isinstance(value, dict):
            raise InvalidRequest(f"Action {action!r}: expected a JSON object, got {type(value).__name__}.")
        fields = dataclasses.fields(made(cls))
        known = {f.name for f in fields}
        if cls.STRICT:
            unknown = sorted(set(value) - known)
            if unknown:
                raise InvalidRequest(f"Action {action!r} takes no key {unknown[0]!r}; it takes "
                                     f"{', '.join(sorted(known))}.")
        for f in fields:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in value:
                raise InvalidRequest(f"Action {action!r} needs {f.name!r} in its JSON body.")
        kept = {k: v for k, v in value.items() if k in known}
        for key, read in cls.NESTED.items():
            if kept.get(key) is not None:
                kept[key] = read(kept[key])
        return cls(**kept)


def _json(value: object) -> Any:
    """A field's value as JSON: messages by their own `to_json`, inside dicts and lists too."""
    if isinstance(value, Message):
        return value.to_json()
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return value


def _each(kind: type[Message]) -> Callable[[dict], dict]:
    """Reads a JSON map of names to `kind` messages."""
    return lambda value: {k: kind.from_json(v) for k, v in value.items()}


# -- bodies ---------------------------------------------------------------------------------

class Body(Message):
    """An action's body: what its caller set (None and default fields are left out)."""

    def to_json(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            # a default is left out only as itself: True is not 1, 16.0 is not 16 (the server refuses those)
            if value is not None and not (type(value) is type(f.default) and value == f.default):
                out[f.name] = value
        return out

@message
class RegisterBody(Body):
    name: str
    schema: str  # base64 of the Arrow IPC schema
    capacity: object = 16
    capacity_bytes: object = None
    partitions: object = 1
    writers: object = 1
    end_marker: object = "required"
    idle_timeout_s: object = None


@message
class FailBody(Body):
    name: str
    message: object = None
    partition: object = None


@message
class DropBody(Body):
    """Exactly one of `name` (a push table) or `table` (a Paimon table)."""

    name: object = None
    table: object = None


@message
class CommitBody(Body):
    name: str
    offsets: dict  # {"P": seq}
    discard: object = False


@message
class StatsBody(Body):
    name: object = None  # a push table
    table: object = None  # or a Paimon table DB.TABLE: what it holds, read from the table


@message
class OffsetsBody(Body):
    name: str  # a push table
    timestamp_ms: object = None  # epoch ms: each partition's first held batch appended at or after it


@message
class TableBody(Body):
    """A body naming one Paimon table: latest_snapshot."""

    table: str


@message
class ConsumerBody(Body):
    table: str
    consumer_id: str


@message
class ConsumerCommitBody(Body):
    table: str
    consumer_id: str
    next_snapshot: int


@message
class HealthBody(Body):
    pass


@message
class CreateTableBody(Body):
    STRICT: ClassVar[bool] = True
    table: str
    schema: str  # base64 of the Arrow IPC schema
    primary_keys: object = None
    partition_keys: object = None
    options: object = None


@message
class ProducerStateBody(Body):
    table: str
    producer: str


@message
class FindSnapshotBody(Body):
    """Exactly one of `timestamp_millis` or `tag`."""

    STRICT: ClassVar[bool] = True
    table: str
    timestamp_millis: object = None
    tag: object = None


@message
class CompactBody(Body):
    STRICT: ClassVar[bool] = True
    table: str
    partition: object = None  # {"col": "value"}
    partitions: object = None  # [{"col": "value"}, ...]: Paimon's 'partitions' ('col=v1;col=v2')


@message
class ExpireSnapshotsBody(Body):
    STRICT: ClassVar[bool] = True
    table: str
    retain_max: object = None
    retain_min: object = None
    older_than: object = None  # epoch ms, or a timestamp as Paimon's procedures take it
    max_deletes: object = None  # expire at most this many snapshots (Paimon's max_deletes)


@message
class RemoveOrphanFilesBody(Body):
    STRICT: ClassVar[bool] = True
    table: str
    older_than: object = None
    dry_run: object = None  # true: list what would be deleted, delete nothing (Paimon's dry_run)


@message
class CommitStagedBody(Body):
    STRICT: ClassVar[bool] = True
    table: str
    stage: str
    attempts: object  # the attempts whose staged files are committed; the stage's others are discarded
    producer: object = None  # with seq: the commit is exactly-once (a seq at or below the last is skipped)
    seq: object = None


@message
class AbortStagedBody(Body):
    STRICT: ClassVar[bool] = True
    table: str
    stage: str


@message
class CreateTagBody(Body):
    """Paimon's create_tag procedure: (table, tag, snapshot?, time_retained?)."""

    STRICT: ClassVar[bool] = True
    table: str
    tag: str
    snapshot: object = None  # the snapshot id to tag; the latest when unset
    time_retained: object = None  # a duration as Paimon's ('1 d', '12 h'), written into the tag


@message
class DeleteTagBody(Body):
    """Paimon's delete_tag procedure: (table, tag), `tag` one name or several comma-separated."""

    STRICT: ClassVar[bool] = True
    table: str
    tag: str


@message
class SchemaChange(Body):
    """One of Paimon's schema changes: `change` is its name (`CHANGE_KEYS`), the other keys what it
    takes. Build them with the constructors below (`SchemaChange.add_column("email", "string")`)."""

    STRICT: ClassVar[bool] = True
    change: str
    column: object = None  # the column it changes (a top-level column's name)
    type: object = None  # add_column, update_column_type: a type as `--schema` takes it (`int64`, `decimal(10,2)`, `!` = NOT NULL)
    comment: object = None  # add_column, update_column_comment
    after: object = None  # add_column: the column it goes after
    first: object = None  # add_column: true puts it first
    new_name: object = None  # rename_column
    nullable: object = None  # update_column_nullability: true or false
    key: object = None  # set_option, remove_option: a Paimon table option
    value: object = None  # set_option

    @staticmethod
    def add_column(column: str, type_spec: str, comment: str | None = None, after: str | None = None,
                   first: bool = False) -> SchemaChange:
        return SchemaChange(names.ADD_COLUMN, column, type=type_spec, comment=comment, after=after,
                            first=first or None)

    @staticmethod
    def rename_column(column: str, new_name: str) -> SchemaChange:
        return SchemaChange(names.RENAME_COLUMN, column, new_name=new_name)

    @staticmethod
    def drop_column(column: str) -> SchemaChange:
        return SchemaChange(names.DROP_COLUMN, column)

    @staticmethod
    def update_column_type(column: str, type_spec: str) -> SchemaChange:
        return SchemaChange(names.UPDATE_COLUMN_TYPE, column, type=type_spec)

    @staticmethod
    def update_column_nullability(column: str, nullable: bool) -> SchemaChange:
        return SchemaChange(names.UPDATE_COLUMN_NULLABILITY, column, nullable=nullable)

    @staticmethod
    def update_column_comment(column: str, comment: str) -> SchemaChange:
        return SchemaChange(names.UPDATE_COLUMN_COMMENT, column, comment=comment)

    @staticmethod
    def set_option(key: str, value: str) -> SchemaChange:
        return SchemaChange(names.SET_OPTION, key=key, value=value)

    @staticmethod
    def remove_option(key: str) -> SchemaChange:
        return SchemaChange(names.REMOVE_OPTION, key=key)


# Each schema change: the keys it needs, and the ones it may take besides "change".
CHANGE_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    names.ADD_COLUMN: (("column", "type"), ("comment", "after", "first")),
    names.RENAME_COLUMN: (("column", "new_name"), ()),
    names.DROP_COLUMN: (("column",), ()),
    names.UPDATE_COLUMN_TYPE: (("column", "type"), ()),
    names.UPDATE_COLUMN_NULLABILITY: (("column", "nullable"), ()),
    names.UPDATE_COLUMN_COMMENT: (("column", "comment"), ()),
    names.SET_OPTION: (("key", "value"), ()),
    names.REMOVE_OPTION: (("key",), ()),
}


@message
class AlterTableBody(Body):
    """Paimon's ALTER TABLE: `changes` (SchemaChange JSON objects) applied in order, as one schema change."""

    STRICT: ClassVar[bool] = True
    table: str
    changes: object


# -- results --------------------------------------------------------------------------------

@message
class Empty(Message):
    pass


@message
class Registered(Message):
    name: str
    partitions: int
    capacity: int
    capacity_bytes: int | None = None
    writers: int | None = None  # producer streams each partition takes (None from a server older than the field)



@message
class Snapshots(Message):
    snapshot_id: int | None = None
    earliest_snapshot_id: int | None = None



@message
class ConsumerProgress(Message):
    next_snapshot: int | None = None



@message
class Health(Message):
    status: str  # "serving" | "stopping"
    push_tables: int
    paimon_open_follows: int
    uptime_s: float
    version: str = ""  # the server's flight-paimon version ("" from a server older than the field)



@message
class ProducerState(Message):
    last_seq: int | None = None



@message
class FoundSnapshot(Message):
    """By time: `at_or_before` / `at_or_after`; by tag: `snapshot_id`."""

    at_or_before: int | None = None
    at_or_after: int | None = None
    snapshot_id: int | None = None

    def to_json(self) -> dict:
        if self.snapshot_id is not None:
            return {"snapshot_id": self.snapshot_id}
        return {"at_or_before": self.at_or_before, "at_or_after": self.at_or_after}


@message
class StagedCommit(Message):
    """The snapshot holding the stage's rows (null when there were none); `skipped` when the
    producer's seq was committed before (a replay): nothing was added."""

    snapshot: int | None = None
    rows: int = 0
    skipped: bool = False


@message
class StagedAbort(Message):
    attempts: int = 0
    files_deleted: int = 0


@message
class TagCreated(Message):
    tag: str
    snapshot: int


@message
class TagsDeleted(Message):
    deleted: list  # the tags deleted, in the order named


@message
class TableCreated(Message):
    """The Paimon table as created: its schema as `list` prints it, its keys, and every option."""

    table: str
    schema: str
    primary_keys: list
    partition_keys: list
    options: dict


@message
class TableAltered(Message):
    """A Paimon table after alter_table: its new schema id, its columns as `list` prints them, the
    comments of those that have one, and its options."""

    table: str
    schema_id: int
    schema: str
    comments: dict
    options: dict


@message
class Compacted(Message):
    """What a compaction did: its COMPACT snapshots, the files it rewrote into fewer (and their
    bytes), and the primary-key files it moved to another level without a rewrite."""

    snapshots: list = dataclasses.field(default_factory=list)
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    upgraded: int = 0

    def plus(self, other: Compacted) -> Compacted:
        """Two compactions as one result (the partitions of one `compact`)."""
        return Compacted(self.snapshots + other.snapshots, self.files_in + other.files_in,
                         self.files_out + other.files_out, self.bytes_in + other.bytes_in,
                         self.upgraded + other.upgraded)


@message
class SnapshotsExpired(Message):
    expired: int = 0
    first_kept: int | None = None
    files_deleted: int = 0
    consumers_removed: list = dataclasses.field(default_factory=list)


@message
class OrphansRemoved(Message):
    """A dry run also lists what it would delete (`would_delete`, `would_delete_bytes`), and deletes nothing."""

    deleted: int = 0
    bytes: int = 0
    scanned: int = 0
    would_delete: list | None = None  # a dry run's paths
    would_delete_bytes: int | None = None

    def to_json(self) -> dict:
        out: dict[str, object] = {"deleted": self.deleted, "bytes": self.bytes, "scanned": self.scanned}
        if self.would_delete is not None:
            out.update(would_delete=list(self.would_delete), would_delete_bytes=self.would_delete_bytes)
        return out


@message
class PartitionOffsets(Message):
    """Where a push partition's log stands: batches [committed, next_seq) are held (readable by
    replay ranges); `state` open, eof or failed."""

    committed: int
    next_seq: int
    state: str
    at_timestamp: int | None = None  # with the body's timestamp_ms: the first held batch appended then or later


@message
class PushOffsets(Message):
    """The `offsets` of a push table, per partition ("P": its number as a string)."""

    NESTED = {"partitions": _each(PartitionOffsets)}
    partitions: dict[str, PartitionOffsets]


# -- the result of stats --------------------------------------------------------------------

@message
class PartitionStats(Message):
    """One push partition, as its log counts it."""

    state: str  # open, eof, failed
    next_seq: int
    committed: int
    queued_batches: int
    queued_bytes: int
    capacity_bytes: int | None
    rows_in: int
    rows_out: int
    writers_attached: int
    writers_done: int
    writers: int
    blocked_writers: int  # appends waiting for room now (the partition pushes back on its producers)
    reader: str | None  # None, "drain" or "replay"
    viewers: int
    named_producers: int
    consumed: bool
    error: str | None


@message
class PushTableStats(Message):
    NESTED = {"partitions": _each(PartitionStats)}
    schema: str  # as `list` prints it
    capacity: int
    capacity_bytes: int | None
    end_marker: str
    idle_timeout_s: float | None
    partitions: dict[str, PartitionStats]


@message
class PaimonWriteStats(Message):
    """A Paimon table's durable writes through this server."""

    queued_batches: int
    queued_bytes: int
    written_batches: int
    in_commit_batches: int
    writers: int
    write_cpu_s: list  # per writer thread
    commit_cpu_s: float
    named_producers_writing: list
    commits: int  # this server's group commits
    last_snapshot: int | None
    closed: str | None  # why the table takes no more writes
    maintenance_commits: int  # compaction commits run between its group commits
    maintenance_commit_ms_max: float  # the longest: how far one held a group commit back


@message
class LastCompaction(Message):
    """A table's last compaction that committed, and when (JSON: `at_ms` beside the result's keys)."""

    at_ms: int
    done: Compacted

    def to_json(self) -> dict:
        return {"at_ms": self.at_ms, **self.done.to_json()}

    @classmethod
    def from_json(cls, value: dict, action: str = "") -> LastCompaction:
        return cls(value["at_ms"], Compacted.from_json({k: v for k, v in value.items() if k != "at_ms"}, action))


@message
class LastExpiry(Message):
    """A table's last expiry that expired snapshots, and when (as `LastCompaction`)."""

    at_ms: int
    done: SnapshotsExpired

    def to_json(self) -> dict:
        return {"at_ms": self.at_ms, **self.done.to_json()}

    @classmethod
    def from_json(cls, value: dict, action: str = "") -> LastExpiry:
        return cls(value["at_ms"], SnapshotsExpired.from_json({k: v for k, v in value.items() if k != "at_ms"}, action))


@message
class MaintenanceStats(Message):
    """What this server's maintenance did to a table since it started; `due` while a round (or the
    settling round after its last commit) is wanted or running."""

    NESTED = {"last_compaction": LastCompaction.from_json, "last_expiry": LastExpiry.from_json}
    snapshots: int
    data_files: int
    data_bytes: int
    compactions: int
    compacted_bytes: int
    ingested_bytes: int
    write_amplification: float | None
    last_compaction: LastCompaction | None
    expiries: int
    last_expiry: LastExpiry | None
    files_deleted: int
    uncommitted_files: int
    uncommitted_bytes: int
    last_error: str | None
    cpu_s: float
    due: bool


@message
class StagedStats(Message):
    """One stage's attempts staged on this server and not yet committed or discarded; `committing`
    while its commit_staged runs."""

    attempts: int
    rows: int
    committing: bool = False


@message
class PaimonTableStats(Message):
    """A Paimon table as read from the table: the same on any server, and after a restart."""

    table: str
    primary_keys: list
    partition_keys: list
    snapshots: int  # kept
    earliest_snapshot: int | None
    latest_snapshot: int | None
    latest_commit_ms: int | None
    latest_commit_kind: str | None
    records: int | None  # in the latest snapshot's files: before a merge of keys
    data_files: int
    data_bytes: int
    partitions: int
    buckets: int
    tags: dict  # tag -> snapshot id
    consumers: dict  # consumer id -> the next snapshot it reads


@message
class Stats(Message):
    """The `stats` result: push tables (`push`, absent when a Paimon `table` was asked for, which
    is in `paimon`), and this server's durable writes, maintenance and staged writes."""

    NESTED = {"paimon": _each(PaimonTableStats), "push": _each(PushTableStats),
              "paimon_writes": _each(PaimonWriteStats), "maintenance": _each(MaintenanceStats),
              "staged": lambda value: {t: _each(StagedStats)(stages) for t, stages in value.items()}}
    paimon: dict[str, PaimonTableStats] | None = None
    push: dict[str, PushTableStats] | None = None
    paimon_writes: dict[str, PaimonWriteStats] = dataclasses.field(default_factory=dict)
    maintenance: dict[str, MaintenanceStats] = dataclasses.field(default_factory=dict)
    staged: dict[str, dict[str, StagedStats]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        return {k: v for k, v in super().to_json().items() if v is not None}

    def visible(self, allows: Callable[[str], bool]) -> Stats:
        """Only the tables `allows` (a principal's read grant) lets through."""
        def only(part: dict) -> dict:
            return {k: v for k, v in part.items() if allows(k)}
        return Stats(None if self.paimon is None else only(self.paimon), None if self.push is None else only(self.push),
                     only(self.paimon_writes), only(self.maintenance), only(self.staged))


# -- the table ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    name: str
    body: type[Message]
    result: type[Message]
    grant: str | None  # None: any principal
    table_keys: tuple[str, ...]  # the body keys naming the table the grant is checked on
    description: str  # what list_actions says
    body_doc: str  # docs/protocol.md's action table: the body ...
    result_doc: str  # ... and the result


ACTIONS: dict[str, Action] = {a.name: a for a in (
    Action(names.REGISTER, RegisterBody, Registered, ADMIN, ("name",),
           "Register a push table.",
           '`{"name", "schema", "capacity"?: 16, "capacity_bytes"?: null, "partitions"?: 1, "writers"?: 1, '
           '"end_marker"?: "required", "idle_timeout_s"?: null}`',
           '`{"name", "partitions", "capacity", "capacity_bytes", "writers"}`'),
    Action(names.FAIL, FailBody, Empty, ADMIN, ("name",),
           "End a push table (or one partition) with an error its readers receive.",
           '`{"name", "partition"?: P, "message"}`', "`{}`"),
    Action(names.COMMIT, CommitBody, Empty, WRITE, ("name",),
           "Free batches a replaying consumer has processed; with \"discard\": true the offsets may pass what "
           "was read (a consumer that starts at the latest batches frees the older ones unread).",
           '`{"name", "offsets": {"P": seq}, "discard"?: false}`', "`{}`"),
    Action(names.DROP, DropBody, Empty, ADMIN, ("name", names.TABLE),
           "Remove a push table (blocked writers and readers get an error), or a Paimon table with its data "
           "and snapshots (its durable writes on this server fail, its reads end NOT_FOUND).",
           '`{"name"}` (a push table) or `{"table"}` (a Paimon table: its data and snapshots are deleted; this '
           "server's durable writes into it fail, reads of it end NOT_FOUND)", "`{}`"),
    Action(names.STATS, StatsBody, Stats, READ, ("name", names.TABLE),
           "Per push table and partition: state, reader mode (drain or replay), writer streams, queued batches "
           "and bytes, rows in and out; per Paimon table written through this server (\"paimon_writes\"): "
           "queued and in-commit batches, named producers writing, commits; its maintenance. With \"table\": "
           "that Paimon table as read from the table (any table of the warehouse; the same after a restart).",
           '`{"name"?}` (a push table; unset: all) or `{"table"}` (a Paimon table)',
           '`{"push": {NAME: {"schema", "capacity", "capacity_bytes", "end_marker", "idle_timeout_s", '
           '"partitions": {"P": {...}}}}, "paimon_writes": {"DB.TABLE": {...}}, "maintenance": {"DB.TABLE": {...}}, '
           '"staged": {"DB.TABLE": {"STAGE": {"attempts", "rows", "committing"}}}}` (stages only of tables the '
           'caller may write); with "table", `"paimon": {"DB.TABLE": '
           '{"table", "primary_keys", "partition_keys", "snapshots", "earliest_snapshot", "latest_snapshot", '
           '"latest_commit_ms", "latest_commit_kind", "records", "data_files", "data_bytes", "partitions", '
           '"buckets", "tags": {TAG: N}, "consumers": {ID: NEXT}}}` in place of "push"'),
    Action(names.OFFSETS, OffsetsBody, PushOffsets, READ, ("name",),
           "Where each partition of a push table stands: batches [committed, next_seq) are held, readable by "
           "replay ranges (what a replaying consumer, Spark's push source, starts from and checks its offsets "
           "against). With timestamp_ms (epoch ms), at_timestamp is the first held batch the server appended at "
           "or after then (next_seq if none), as Kafka's offsetsForTimes (Spark's startingTimestamp).",
           '`{"name", "timestamp_ms"?}`',
           '`{"partitions": {"P": {"committed", "next_seq", "state", "at_timestamp"}}}` (at_timestamp null '
           'without timestamp_ms)'),
    Action(names.LATEST_SNAPSHOT, TableBody, Snapshots, READ, (names.TABLE,),
           "The latest and earliest snapshot ids of a Paimon table, null when it has none.",
           '`{"table"}`', '`{"snapshot_id": N or null, "earliest_snapshot_id": E or null}`'),
    Action(names.CONSUMER_PROGRESS, ConsumerBody, ConsumerProgress, READ, (names.TABLE,),
           "A Paimon consumer's recorded progress: the next snapshot it will read, null when it has none.",
           '`{"table", "consumer_id"}`', '`{"next_snapshot": N or null}`'),
    Action(names.CONSUMER_COMMIT, ConsumerCommitBody, Empty, WRITE, (names.TABLE,),
           "Record that a Paimon consumer has read every snapshot before next_snapshot (Paimon keeps them "
           "from expiring).",
           '`{"table", "consumer_id", "next_snapshot"}`', "`{}`"),
    Action(names.HEALTH, HealthBody, Health, None, (),
           "Whether the server serves (\"stopping\" from a shutdown's start), and its flight-paimon version.",
           "`{}`", '`{"status": "serving" or "stopping", "push_tables", "paimon_open_follows", "uptime_s", '
           '"version"}`'),
    Action(names.CREATE_TABLE, CreateTableBody, TableCreated, ADMIN, (names.TABLE,),
           "Create a Paimon table for durable writes.",
           '`{"table", "schema", "primary_keys"?: [...], "partition_keys"?: [...], "options"?: {"bucket": "4", ...}}`',
           '`{"table", "schema", "primary_keys", "partition_keys", "options"}`'),
    Action(names.PRODUCER_STATE, ProducerStateBody, ProducerState, WRITE, (names.TABLE,),
           "A named producer's last committed seq in a Paimon table (resume from last_seq + 1).",
           '`{"table", "producer"}`', '`{"last_seq": N or null}`'),
    Action(names.FIND_SNAPSHOT, FindSnapshotBody, FoundSnapshot, READ, (names.TABLE,),
           "A Paimon snapshot by commit time or by tag (the start positions scan.timestamp-millis and "
           "scan.tag-name).",
           '`{"table", "timestamp_millis"}` or `{"table", "tag"}`',
           '`{"at_or_before": N or null, "at_or_after": M or null}` (the last snapshot committed at or before '
           'the time, the first at or after it), or `{"snapshot_id": N}` of the tag'),
    Action(names.COMPACT, CompactBody, Compacted, ADMIN, (names.TABLE,),
           "Compact a Paimon table now, as COMPACT snapshots that add no rows (Paimon's compact procedure): an "
           "append table's small files, a primary-key table's sorted runs merged.",
           '`{"table", "partitions"?: [{"col": "value"}, ...], "partition"?: {"col": "value"}}` (admin; an '
           "unknown partition column is refused)",
           '`{"snapshots": [N, ...], "files_in", "files_out", "bytes_in" (rewritten), "upgraded" (files only moved to '
           'another level)}`: every small file of each '
           "bucket rewritten into one (append tables) or its runs merged (primary keys), one COMPACT snapshot per "
           "bucket"),
    Action(names.EXPIRE_SNAPSHOTS, ExpireSnapshotsBody, SnapshotsExpired, ADMIN, (names.TABLE,),
           "Expire a Paimon table's old snapshots now and delete the files no kept snapshot, tag or consumer "
           "needs (Paimon's expire_snapshots procedure); the table's snapshot.* options by default.",
           '`{"table", "retain_max"?, "retain_min"?, "older_than"?, "max_deletes"?}` (admin; the table\'s '
           "`snapshot.*` options by default, `max_deletes` its snapshot.expire.limit; `older_than`: epoch ms, or a "
           "timestamp as Paimon's procedures take it, "
           '`"2026-11-24 12:00:00"` in the server\'s local time or ISO 8601 with an offset)',
           '`{"expired", "first_kept", "files_deleted", "consumers_removed"}`'),
    Action(names.REMOVE_ORPHAN_FILES, RemoveOrphanFilesBody, OrphansRemoved, ADMIN, (names.TABLE,),
           "Delete a Paimon table's files that no kept snapshot, tag or changelog names and that were last "
           "written before older_than (default a day ago; at least 10 minutes ago), as Paimon's "
           "remove_orphan_files.",
           '`{"table", "older_than"?, "dry_run"?}` (admin; as for `expire_snapshots`; default a day ago, at '
           "least 10 minutes ago; `dry_run`: delete nothing)",
           '`{"deleted", "bytes", "scanned"}`: files no kept snapshot, tag or changelog names, last written '
           'before then; with dry_run also `"would_delete": [PATH, ...], "would_delete_bytes"` (deleted 0)'),
    Action(names.COMMIT_STAGED, CommitStagedBody, StagedCommit, WRITE, (names.TABLE,),
           "Commit the files a job's attempts staged (do_put with {\"write\", \"stage\", \"attempt\"}) as one "
           "snapshot; the stage's other attempts are discarded. With producer and seq it is exactly-once. Its "
           "snapshot carries the property flight-paimon.stage, so a retry (the same attempts in any order, after "
           "a restart too) answers that snapshot; only the principal that staged the stage may commit it.",
           '`{"table", "stage", "attempts": ["A", ...], "producer"?, "seq"?}`',
           '`{"snapshot": N or null, "rows", "skipped"}` (`skipped`: the producer\'s seq was committed before, '
           "nothing was added); a retry of a commit that landed answers the same, also after a restart"),
    Action(names.ABORT_STAGED, AbortStagedBody, StagedAbort, WRITE, (names.TABLE,),
           "Discard everything a job's attempts staged (their files are deleted; nothing was committed). During "
           "the stage's commit it waits for it; a stage committed is refused, naming its snapshot. Only the "
           "principal that staged the stage may abort it.",
           '`{"table", "stage"}`', '`{"attempts", "files_deleted"}` (a stage committed is refused, naming its '
           "snapshot)"),
    Action(names.CREATE_TAG, CreateTagBody, TagCreated, ADMIN, (names.TABLE,),
           "Tag a Paimon snapshot (the latest unless snapshot is given), as Paimon's create_tag procedure: the "
           "tag keeps the snapshot's files from expiry and is read with scan.tag-name.",
           '`{"table", "tag", "snapshot"?: N, "time_retained"?: "1 d"}` (admin; Paimon\'s create_tag; the latest '
           "snapshot by default; `time_retained` is written into the tag as Paimon writes it)",
           '`{"tag", "snapshot"}`'),
    Action(names.DELETE_TAG, DeleteTagBody, TagsDeleted, ADMIN, (names.TABLE,),
           "Delete Paimon tags (several comma-separated), as Paimon's delete_tag procedure. Only the tag files go: "
           "what only a tag kept is left to expiry (and orphan removal) to delete later.",
           '`{"table", "tag": "T" or "T1,T2"}` (admin; Paimon\'s delete_tag; only the tag files go: what only a '
           "tag kept is left to expiry, see \"Tags\")",
           '`{"deleted": ["T", ...]}`'),
    Action(names.ALTER_TABLE, AlterTableBody, TableAltered, ADMIN, (names.TABLE,),
           "Change a Paimon table's schema, as Paimon's ALTER TABLE: add, rename or drop columns, change a column's "
           "type (widening only), nullability or comment, set or remove options; the changes apply in order as one "
           "new schema, or not at all (a refusal gives Paimon's reason).",
           '`{"table", "changes": [{"change": "add_column", "column", "type", "comment"?, "after"?: COL, "first"?: '
           'true}, {"change": "rename_column", "column", "new_name"}, {"change": "drop_column", "column"}, '
           '{"change": "update_column_type", "column", "type"}, {"change": "update_column_nullability", "column", '
           '"nullable"}, {"change": "update_column_comment", "column", "comment"}, {"change": "set_option", "key", '
           '"value"}, {"change": "remove_option", "key"}]}` (admin; types as `--schema` takes them; see "Schema '
           'evolution")',
           '`{"table", "schema_id", "schema", "comments": {COL: TEXT}, "options"}` (`schema` as `list` prints it)'),
)}
assert set(ACTIONS) == set(names.ACTIONS)


def description(action: Action) -> str:
    """What list_actions says of an action: its purpose, body and result."""
    return f"{action.description} Body: {action.body_doc}. Result: {action.result_doc}.".replace("`", "")


def doc_table() -> str:
    """docs/protocol.md's action table, made from ACTIONS."""
    rows = ["| action | body | result |", "|---|---|---|"]
    rows += [f"| `{a.name}` | {a.body_doc} | {a.result_doc} |" for a in ACTIONS.values()]
    return "\n".join(rows)
