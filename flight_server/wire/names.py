"""Names on the wire: descriptor paths, action names, command keys (docs/protocol.md)."""

from __future__ import annotations

PUSH, PAIMON = "push", "paimon"  # first element of a descriptor path

# Actions (do_action); list_actions describes each.
REGISTER, FAIL, DROP, COMMIT, STATS = "register", "fail", "drop", "commit", "stats"
LATEST_SNAPSHOT, CONSUMER_PROGRESS, CONSUMER_COMMIT = "latest_snapshot", "consumer_progress", "consumer_commit"
HEALTH, OFFSETS = "health", "offsets"
CREATE_TABLE, PRODUCER_STATE, FIND_SNAPSHOT = "create_table", "producer_state", "find_snapshot"
COMPACT, EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES = "compact", "expire_snapshots", "remove_orphan_files"
COMMIT_STAGED, ABORT_STAGED = "commit_staged", "abort_staged"
CREATE_TAG, DELETE_TAG = "create_tag", "delete_tag"  # Paimon's procedures of those names
ALTER_TABLE = "alter_table"
ACTIONS = (REGISTER, FAIL, DROP, COMMIT, STATS, OFFSETS, LATEST_SNAPSHOT, CONSUMER_PROGRESS, CONSUMER_COMMIT, HEALTH,
           CREATE_TABLE, PRODUCER_STATE, FIND_SNAPSHOT, COMPACT, EXPIRE_SNAPSHOTS, REMOVE_ORPHAN_FILES,
           COMMIT_STAGED, ABORT_STAGED, CREATE_TAG, DELETE_TAG, ALTER_TABLE)

# The schema changes of alter_table ("change" of each), Paimon's SchemaChange names.
ADD_COLUMN, RENAME_COLUMN, DROP_COLUMN = "add_column", "rename_column", "drop_column"
UPDATE_COLUMN_TYPE, UPDATE_COLUMN_NULLABILITY = "update_column_type", "update_column_nullability"
UPDATE_COLUMN_COMMENT, SET_OPTION, REMOVE_OPTION = "update_column_comment", "set_option", "remove_option"

# Keys of a Paimon read command; "table" names the table.
TABLE, SNAPSHOT, FROM_SNAPSHOT, TO_SNAPSHOT = "table", "snapshot", "from_snapshot", "to_snapshot"
FOLLOW, START, CONSUMER_ID, POLL_INTERVAL_MS = "follow", "start", "consumer_id", "poll_interval_ms"
COLUMNS, FILTER, BUCKETS, CHANGELOG = "columns", "filter", "buckets", "changelog"
PIN = "pin"  # plans with the same pin read the snapshot the first one read (a Spark action's tasks)
FILTER_GUARD = "filter_guard"  # "R:P" registers planning P of Spark relation R; "R:P:E" a read of it by action E
ROW_KIND = "_row_kind"  # the leading column of a changelog read (+I, -U, +U, -D)
# Paimon's system tables a read may name as "DB.TABLE$NAME": audit_log, the table's rows with a
# leading AUDIT_ROW_KIND column, as Paimon's AuditLogTable (Java, Spark: "rowkind").
AUDIT_LOG = "audit_log"
SYSTEM_TABLES = (AUDIT_LOG,)
AUDIT_ROW_KIND = "rowkind"
# A follow that meets a snapshot of a newer schema: goes on with the columns it opened with
# ("continue", the default), or ends with the error schema_changed naming the snapshot to resume at ("end").
ON_SCHEMA_CHANGE, SCHEMA_CHANGE_CONTINUE, SCHEMA_CHANGE_END = "on_schema_change", "continue", "end"
ON_SCHEMA_CHANGES = (SCHEMA_CHANGE_CONTINUE, SCHEMA_CHANGE_END)
PAIMON_KEYS = (TABLE, SNAPSHOT, FROM_SNAPSHOT, TO_SNAPSHOT, FOLLOW, START, CONSUMER_ID, POLL_INTERVAL_MS,
               COLUMNS, FILTER, BUCKETS, CHANGELOG, PIN, FILTER_GUARD, ON_SCHEMA_CHANGE)

# A Paimon read's mode (PaimonRequest.mode): a snapshot, the deltas between two, or a follow.
SNAPSHOT_READ, DELTA_READ, FOLLOW_READ = "snapshot", "delta", "follow"

# Keys of a durable write's descriptor command: the Paimon table and the producer's name; or, for
# a staged write (one attempt of a job's task, committed later with the job's other tasks), the
# job's stage and the attempt.
WRITE, PRODUCER = "write", "producer"
STAGE, ATTEMPT = "stage", "attempt"
MERGE_SCHEMA = "merge_schema"  # a write that adds its new columns to the table (admin grant)

# Keys of a replay-range command of a push partition, and of a viewer's command.
PARTITION, RANGE_START, RANGE_END = "partition", "start", "end"
VIEW, VIEW_STARTS = "view", ("earliest", "latest")


def named_push_command(name: str, partition: int, producer: str) -> dict:
    """The do_put command of a named (idempotent) producer's stream into a push partition."""
    return {PUSH: name, PARTITION: partition, PRODUCER: producer}


def is_utf8(text: str) -> bool:
    """Whether `text` can travel as UTF-8 (JSON's "\\ud800" escapes give strings that cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def push_path(name: str, partition: int | None = None) -> list[str]:
    """`["push", NAME]` or `["push", NAME, "P"]`."""
    return [PUSH, name] + ([] if partition is None else [str(partition)])


def paimon_path(table: str) -> list[str]:
    """`["paimon", "DB.TABLE"]`."""
    return [PAIMON, table]


def write_command(table: str, producer: str | None = None, merge_schema: bool = False) -> dict:
    """A durable write into Paimon table `table`, as the named producer (exactly-once) or unnamed;
    with `merge_schema`, the stream's columns the table lacks are added to it first."""
    command = {WRITE: table} if producer is None else {WRITE: table, PRODUCER: producer}
    return {**command, MERGE_SCHEMA: True} if merge_schema else command


def stage_command(table: str, stage: str, attempt: str, merge_schema: bool = False) -> dict:
    """One attempt's staged write into Paimon table `table`: written to files, committed only by
    `commit_staged` of its stage (with the job's other attempts, in one snapshot)."""
    command = {WRITE: table, STAGE: stage, ATTEMPT: attempt}
    return {**command, MERGE_SCHEMA: True} if merge_schema else command


def job_stage(started_ms: int, nonce: str) -> str:
    """A batch job's stage id that says when the job began: `t<epoch ms>-<nonce>`. A server that no
    longer holds the stage (it restarted) looks for it in the table's snapshots since then, and
    when all of them are kept, its absence proves the job committed nothing (docs/protocol.md)."""
    return f"t{started_ms}-{nonce}"


def view_command(name: str, start: str = "latest", partition: int | None = None) -> dict:
    """A viewer of a push table (or one partition): what passes from `start`, never consuming it."""
    cmd: dict[str, str | int] = {PUSH: name, VIEW: start}
    if partition is not None:
        cmd[PARTITION] = partition
    return cmd


def replay_command(name: str, partition: int, start: int, end: int | None) -> dict:
    """The command of a replayable range [start, end) of one push partition (end None: to its EOF)."""
    cmd = {PUSH: name, PARTITION: partition, RANGE_START: start}
    return cmd if end is None else {**cmd, RANGE_END: end}
