"""The `do_action` verbs as plain functions over an `ActionContext` (no Flight imports)."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flight_server.auth import READ, WRITE, Access
from flight_server.ingest.ingest import Ingest
from flight_server.maintenance.maintainer import Maintainer
from flight_server.maintenance.options import MaintenanceOptions
from flight_server.maintenance.table_stats import table_stats
from flight_server.paimon import compat
from flight_server.paimon.warehouse import PaimonSource
from flight_server.push.registry import PushRegistry
from flight_server.wire import actions as wa
from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest, NotFound, WrongState
from flight_server.wire.requests import check_consumer_id, table_name
from flight_server.wire.schemas import decode_schema
from flight_server.wire.units import parse_duration_ms, parse_timestamp_ms
from flight_server.wire.values import is_int
from flight_server.wire.version import VERSION


@dataclass(frozen=True)
class ActionContext:
    """What the actions act on: the server's push tables, its Paimon warehouse, its durable writes
    and its maintenance."""

    push: PushRegistry
    paimon: PaimonSource
    ingest: Ingest
    maintainer: Maintainer
    started: float  # time.time() when the server started
    on_drop: list = field(default_factory=list)  # callables given a dropped Paimon table's name (metrics forget it)


def register(ctx: ActionContext, body: wa.RegisterBody) -> wa.Registered:
    schema = decode_schema(body.schema, f"push table {body.name!r}")
    table = ctx.push.register(body.name, schema, capacity=body.capacity, partitions=body.partitions,
                              writers=body.writers, end_marker=body.end_marker, idle_timeout_s=body.idle_timeout_s,
                              capacity_bytes=body.capacity_bytes)
    return wa.Registered(table.name, len(table.partitions), table.capacity, table.capacity_bytes,
                         table.partitions[0].writers)


def fail(ctx: ActionContext, body: wa.FailBody) -> wa.Empty:
    if body.partition is not None and not is_int(body.partition):
        raise InvalidRequest(f"Action 'fail' on push table {body.name!r}: partition {body.partition!r} is not an integer.")
    ctx.push.fail(body.name, str(body.message or "failed by the fail action"), body.partition)
    return wa.Empty()


def drop(ctx: ActionContext, body: wa.DropBody) -> wa.Empty:
    if (body.name is None) == (body.table is None):
        raise InvalidRequest("Action 'drop' takes exactly one of 'name' (a push table) or 'table' (a Paimon "
                             "table DB.TABLE).")
    if body.name is not None:
        ctx.push.drop(body.name)
        return wa.Empty()
    name = table_name(body.table, "the body of action 'drop'")
    ctx.paimon.table(name)  # NOT_FOUND, naming the table, when there is none
    ctx.ingest.drop(name, f"Paimon table {name!r} was dropped")
    try:
        dropped = compat.drop_table(ctx.paimon.catalog(), name)
    except compat.NOT_FOUND_ERRORS:
        raise NotFound(f"Paimon table {name!r} does not exist; `flight_cli list` names the tables.", table=name) from None
    if not dropped:
        raise WrongState(f"Paimon table {name!r} was not wholly dropped: another server or job kept writing files into "
                         "it while its files were deleted. Stop its writers, then drop it again.", table=name)
    for forget in ctx.on_drop:
        forget(name)
    return wa.Empty()


def commit(ctx: ActionContext, body: wa.CommitBody) -> wa.Empty:
    if not isinstance(body.discard, bool):
        raise InvalidRequest(f"Action 'commit': 'discard' must be true or false, got {body.discard!r}.")
    ctx.push.commit(body.name, body.offsets, body.discard)
    return wa.Empty()


def stats(ctx: ActionContext, body: wa.StatsBody) -> wa.Stats:
    """Push tables (all, or the one named) and the durable writes into Paimon tables: with a
    name, only what has that name (a push table name, or a DB.TABLE written through this server).
    With `table`: that Paimon table as read from the table, and what this server did to it."""
    if body.table is not None:
        if body.name is not None:
            raise InvalidRequest("Action 'stats' takes 'name' (a push table) or 'table' (a Paimon table), not both.")
        name = table_name(body.table, "the body of action 'stats'")
        held = table_stats(ctx.paimon.table(name), name)
        return wa.Stats(paimon={name: held}, **_server_side(ctx, name, only=True))
    name = body.name
    mine = _server_side(ctx, name, only=name is not None)
    if name is not None and any(mine.values()) and name not in {t.name for t in ctx.push.tables()}:
        return wa.Stats(push={}, **mine)
    return wa.Stats(push=ctx.push.stats(name), **mine)


def _server_side(ctx: ActionContext, name: str | None, only: bool) -> dict:
    """What this server did to Paimon tables (all, or only `name`): durable writes, maintenance,
    staged writes, each as its wire type (wa.Stats' keywords)."""
    parts: dict[str, dict] = {"paimon_writes": ctx.ingest.stats(name), "maintenance": ctx.maintainer.stats(),
                              "staged": ctx.ingest.staging.stats()}
    return {key: {k: v for k, v in part.items() if not only or k == name} for key, part in parts.items()}


def offsets(ctx: ActionContext, body: wa.OffsetsBody) -> wa.PushOffsets:
    if body.timestamp_ms is not None and not is_int(body.timestamp_ms, minimum=0):
        raise InvalidRequest(f"Action 'offsets' of push table {body.name!r}: 'timestamp_ms' must be epoch "
                             f"milliseconds (an integer >= 0), got {str(body.timestamp_ms)[:40]!r}.")
    return ctx.push.offsets(body.name, body.timestamp_ms)


def latest_snapshot(ctx: ActionContext, body: wa.TableBody) -> wa.Snapshots:
    name = table_name(body.table, "the body of action 'latest_snapshot'")
    return wa.Snapshots(ctx.paimon.latest_snapshot(name), ctx.paimon.earliest_snapshot(name))


def _consumer(body: wa.ConsumerBody | wa.ConsumerCommitBody, action: str) -> tuple[str, str]:
    what = f"the body of action {action!r}"
    return table_name(body.table, what), check_consumer_id(body.consumer_id, what)


def consumer_progress(ctx: ActionContext, body: wa.ConsumerBody) -> wa.ConsumerProgress:
    name, cid = _consumer(body, "consumer_progress")
    return wa.ConsumerProgress(ctx.paimon.consumer_progress(name, cid))


def consumer_commit(ctx: ActionContext, body: wa.ConsumerCommitBody) -> wa.Empty:
    name, cid = _consumer(body, "consumer_commit")
    if not is_int(body.next_snapshot, minimum=1):
        raise InvalidRequest(f"Action 'consumer_commit': 'next_snapshot' must be an integer >= 1, "
                             f"got {body.next_snapshot!r}.")
    ctx.maintainer.consumer_commit(name, cid, body.next_snapshot)
    return wa.Empty()


def health(ctx: ActionContext, body: wa.HealthBody) -> wa.Health:
    """Answers while the server serves (a shutting-down server says so), with its version."""
    return wa.Health("serving" if ctx.push.closing is None else "stopping", len(ctx.push.tables()),
                     ctx.paimon.open_follows, round(time.time() - ctx.started, 3), VERSION)


def create_table(ctx: ActionContext, body: wa.CreateTableBody) -> wa.TableCreated:
    name = table_name(body.table, "the body of action 'create_table'")
    schema = decode_schema(body.schema, f"Paimon table {name!r}")
    return ctx.paimon.create_table(name, schema, body.primary_keys or [], body.partition_keys or [], body.options or {})


def alter_table(ctx: ActionContext, body: wa.AlterTableBody) -> wa.TableAltered:
    """Paimon's ALTER TABLE; the options it leaves must also read as the maintenance they ask for."""
    name = table_name(body.table, "the body of action 'alter_table'")
    return ctx.paimon.alter_table(name, body.changes,
                                  lambda options, primary_key: MaintenanceOptions.of(name, options, primary_key))


def producer_state(ctx: ActionContext, body: wa.ProducerStateBody) -> wa.ProducerState:
    what = "the body of action 'producer_state'"
    name = table_name(body.table, what)
    producer = check_consumer_id(body.producer, what, names.PRODUCER)
    return ctx.ingest.producer_state(name, producer)


def commit_staged(ctx: ActionContext, body: wa.CommitStagedBody, access: Access) -> wa.StagedCommit:
    what = "the body of action 'commit_staged'"
    name = table_name(body.table, what)
    stage = check_consumer_id(body.stage, what, names.STAGE)
    if not isinstance(body.attempts, list) or not body.attempts:
        raise InvalidRequest(f"Action 'commit_staged': 'attempts' must be a non-empty list of the attempts to commit, "
                             f"got {body.attempts!r}.")
    attempts = [check_consumer_id(a, what, names.ATTEMPT) for a in body.attempts]
    if len(set(attempts)) != len(attempts):
        raise InvalidRequest("Action 'commit_staged': 'attempts' names an attempt twice.")
    producer = None if body.producer is None else check_consumer_id(body.producer, what, names.PRODUCER)
    if (producer is None) != (body.seq is None) or (body.seq is not None and not is_int(body.seq, minimum=0)):
        raise InvalidRequest("Action 'commit_staged': 'producer' and 'seq' (an integer >= 0) go together.")
    done = ctx.ingest.staging.commit(name, stage, attempts, producer, body.seq, access.name)
    return wa.StagedCommit(done.snapshot, done.rows, done.skipped)


def abort_staged(ctx: ActionContext, body: wa.AbortStagedBody, access: Access) -> wa.StagedAbort:
    what = "the body of action 'abort_staged'"
    name = table_name(body.table, what)
    attempts, deleted = ctx.ingest.staging.abort(name, check_consumer_id(body.stage, what, names.STAGE), access.name)
    return wa.StagedAbort(attempts, deleted)


def find_snapshot(ctx: ActionContext, body: wa.FindSnapshotBody) -> wa.FoundSnapshot:
    name = table_name(body.table, "the body of action 'find_snapshot'")
    if (body.timestamp_millis is None) == (body.tag is None):
        raise InvalidRequest(f"Action 'find_snapshot' takes 'table' and exactly one of 'timestamp_millis' or 'tag', "
                             f"got keys {sorted(body.to_json())}.")
    if body.tag is not None:
        return wa.FoundSnapshot(snapshot_id=ctx.paimon.tag_snapshot(name, tag_name(body.tag, "find_snapshot")))
    if not is_int(body.timestamp_millis, minimum=0):
        raise InvalidRequest(f"Action 'find_snapshot': 'timestamp_millis' must be an integer >= 0, "
                             f"got {body.timestamp_millis!r}.")
    before, after = ctx.paimon.snapshots_around(name, body.timestamp_millis)
    return wa.FoundSnapshot(before, after)


MAX_TAG_RETAINED_MS = 999_999_999 * 86_400_000  # what a tag's retention can hold in pypaimon (a timedelta)


def tag_name(value, action: str) -> str:
    """A tag name: 1-200 letters, digits, `_ . -` (not starting with . or -)."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}", value):
        raise InvalidRequest(f"Action {action!r}: 'tag' must be a tag name (letters, digits, _ . -), got {value!r}.")
    return value


def create_tag(ctx: ActionContext, body: wa.CreateTagBody) -> wa.TagCreated:
    name = table_name(body.table, "the body of action 'create_tag'")
    tag = tag_name(body.tag, "create_tag")
    if tag.isdigit():  # Paimon's rule: a number names a snapshot (incremental-between '3,7')
        raise InvalidRequest(f"Action 'create_tag': tag {tag!r} is all digits, which Paimon refuses (a number names "
                             "a snapshot); choose a name with a letter in it.")
    if body.snapshot is not None and not is_int(body.snapshot, minimum=1):
        raise InvalidRequest(f"Action 'create_tag': 'snapshot' must be a snapshot id (an integer >= 1), "
                             f"got {body.snapshot!r}.")
    retained = None
    if body.time_retained is not None:
        try:
            retained = parse_duration_ms(body.time_retained) if isinstance(body.time_retained, str) else None
        except ValueError as e:
            raise InvalidRequest(f"Action 'create_tag': 'time_retained' {e}.") from None
        if retained is None or retained >= MAX_TAG_RETAINED_MS:
            raise InvalidRequest(f"Action 'create_tag': 'time_retained' must be a duration such as '1 d' or '12 h' "
                                 f"(below 999999999 d), got {body.time_retained!r}.")
    return wa.TagCreated(tag, ctx.maintainer.create_tag(name, tag, body.snapshot, retained))


def delete_tag(ctx: ActionContext, body: wa.DeleteTagBody) -> wa.TagsDeleted:
    name = table_name(body.table, "the body of action 'delete_tag'")
    if not isinstance(body.tag, str):
        raise InvalidRequest(f"Action 'delete_tag': 'tag' must be a tag name, or several comma-separated, "
                             f"got {body.tag!r}.")
    tags = list(dict.fromkeys(tag_name(t.strip(), "delete_tag") for t in body.tag.split(",")))
    return wa.TagsDeleted(ctx.paimon.delete_tags(name, tags))


def compact(ctx: ActionContext, body: wa.CompactBody) -> wa.Compacted:
    """Paimon's compact procedure: the whole table, or only `partitions` (and `partition`), each a
    map of every partition column to a value; an unknown column is refused (it would match nothing)."""
    name = table_name(body.table, "the body of action 'compact'")
    if body.partitions is not None and not isinstance(body.partitions, list):
        raise InvalidRequest(f"Action 'compact': 'partitions' must be a list of maps of partition columns to "
                             f"values, got {body.partitions!r}.")
    wanted = list(body.partitions or []) + ([] if body.partition is None else [body.partition])
    if body.partitions is None and body.partition is None:
        return ctx.maintainer.compact(name, None)
    keys = list(ctx.paimon.table(name).partition_keys or [])
    parts = [_partition(p, keys, name) for p in wanted]
    done = wa.Compacted()
    for part in dict.fromkeys(tuple(sorted(p.items())) for p in parts):  # each once, in the order given
        done = done.plus(ctx.maintainer.compact(name, dict(part)))
    return done


def _partition(value, keys: list[str], table: str) -> dict:
    if not isinstance(value, dict) or not value or not all(
            isinstance(k, str) and (isinstance(v, str) or is_int(v)) for k, v in value.items()):
        raise InvalidRequest(f"Action 'compact': a partition must map partition columns to values, got {value!r}.")
    if not keys:
        raise InvalidRequest(f"Action 'compact': Paimon table {table!r} is not partitioned; compact it without "
                             "partitions.")
    unknown = [k for k in value if k not in keys]
    if unknown or set(value) != set(keys):
        what = f"has no partition column {unknown[0]!r}" if unknown else f"is partitioned by {', '.join(keys)}"
        raise InvalidRequest(f"Action 'compact': Paimon table {table!r} {what}; name every partition column once, "
                             f"e.g. {', '.join(f'{k}=VALUE' for k in keys)}.")
    return {k: str(v) for k, v in value.items()}


def expire_snapshots(ctx: ActionContext, body: wa.ExpireSnapshotsBody) -> wa.SnapshotsExpired:
    name = table_name(body.table, "the body of action 'expire_snapshots'")
    for key, value in (("retain_max", body.retain_max), ("retain_min", body.retain_min)):
        if value is not None and not is_int(value, minimum=1):
            raise InvalidRequest(f"Action 'expire_snapshots': {key!r} must be an integer >= 1, got {value!r}.")
    if body.retain_max is not None and body.retain_min is not None and body.retain_max < body.retain_min:
        raise InvalidRequest("Action 'expire_snapshots': 'retain_max' is below 'retain_min'.")
    if body.max_deletes is not None and not is_int(body.max_deletes, minimum=1):
        raise InvalidRequest(f"Action 'expire_snapshots': 'max_deletes' must be an integer >= 1 (the most snapshots "
                             f"to expire), got {body.max_deletes!r}.")
    return ctx.maintainer.expire_snapshots(name, body.retain_max, body.retain_min,
                                           older_than_ms(body.older_than, "expire_snapshots"), body.max_deletes)


def remove_orphan_files(ctx: ActionContext, body: wa.RemoveOrphanFilesBody) -> wa.OrphansRemoved:
    name = table_name(body.table, "the body of action 'remove_orphan_files'")
    if body.dry_run is not None and not isinstance(body.dry_run, bool):
        raise InvalidRequest(f"Action 'remove_orphan_files': 'dry_run' must be true or false, got {body.dry_run!r}.")
    return ctx.maintainer.remove_orphan_files(name, older_than_ms(body.older_than, "remove_orphan_files"),
                                              bool(body.dry_run))


def older_than_ms(value, action: str) -> int | None:
    """`older_than` as epoch milliseconds: given so, or as a timestamp the way Paimon's procedures
    take it ('2026-11-24 12:00:00', the server's local time; or ISO 8601 with an offset)."""
    if value is None:
        return None
    try:
        return parse_timestamp_ms(value)
    except ValueError as e:
        raise InvalidRequest(f"Action {action!r}: 'older_than' must be epoch milliseconds or a timestamp: {e}.") from None


HANDLERS: dict[str, Callable] = {
    names.REGISTER: register,
    names.FAIL: fail,
    names.DROP: drop,
    names.COMMIT: commit,
    names.STATS: stats,
    names.OFFSETS: offsets,
    names.LATEST_SNAPSHOT: latest_snapshot,
    names.CONSUMER_PROGRESS: consumer_progress,
    names.CONSUMER_COMMIT: consumer_commit,
    names.HEALTH: health,
    names.CREATE_TABLE: create_table,
    names.PRODUCER_STATE: producer_state,
    names.FIND_SNAPSHOT: find_snapshot,
    names.COMPACT: compact,
    names.EXPIRE_SNAPSHOTS: expire_snapshots,
    names.REMOVE_ORPHAN_FILES: remove_orphan_files,
    names.COMMIT_STAGED: commit_staged,
    names.ABORT_STAGED: abort_staged,
    names.CREATE_TAG: create_tag,
    names.DELETE_TAG: delete_tag,
    names.ALTER_TABLE: alter_table,
}
assert set(HANDLERS) == set(wa.ACTIONS)
BY_PRINCIPAL = {names.COMMIT_STAGED, names.ABORT_STAGED}  # handlers that act for the caller's principal (its stages)


def log_fields(action: str, body: dict) -> dict:
    """What an action's log line names: the table its body names (`table` for a Paimon table, a
    push table's `name`), as sent; nothing for an unknown action or a body without one."""
    spec = wa.ACTIONS.get(action)
    for key in spec.table_keys if spec is not None else ():
        if body.get(key) is not None:
            return {"table": body[key] if isinstance(body[key], str) else repr(body[key])[:200]}
    return {}


def run(ctx: ActionContext, action: str, body: dict, access: Access) -> dict:
    """Run one action for a principal: its grant on the table the body names is checked first;
    `stats` without a name shows only the tables the principal may read."""
    spec = wa.ACTIONS.get(action)
    if spec is None:
        raise InvalidRequest(f"Unknown action {action!r}; list_actions names them: {', '.join(wa.ACTIONS)}.")
    if spec.grant is not None:
        for key in spec.table_keys:
            if key not in body:
                continue
            table = body[key]
            if not isinstance(table, str):
                raise InvalidRequest(f"Action {action!r}: {key!r} must be a table name (a string), got {table!r}.")
            access.require(spec.grant, table, f"table {table!r} (action {action!r})")
    body_of = spec.body.from_json(body, action)
    result = HANDLERS[action](ctx, body_of, access) if action in BY_PRINCIPAL else HANDLERS[action](ctx, body_of)
    if action == names.STATS:
        if "name" not in body:
            result = result.visible(lambda table: access.allows(READ, table))
        # stage ids are what commit_staged and abort_staged take: only for who may write the table
        result = dataclasses.replace(result, staged={t: stages for t, stages in result.staged.items()
                                                     if access.allows(WRITE, t)})
    return result.to_json()
