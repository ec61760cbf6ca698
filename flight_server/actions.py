"""The `do_action` verbs as plain functions over the registries (no Flight imports)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from flight_server.auth import ADMIN, READ, WRITE, Access
from flight_server.ingest.streams import Ingest
from flight_server.maintenance.maintainer import Maintainer
from flight_server.paimon import compat
from flight_server.wire.errors import InvalidRequest, NotFound
from flight_server.wire.requests import check_consumer_id, table_name
from flight_server.paimon.source import PaimonSource
from flight_server.push.registry import PushRegistry
from flight_server.wire import names
from flight_server.wire.schemas import decode_schema
from flight_server.wire.values import is_int

DESCRIPTIONS = {
    names.REGISTER: 'Register a push table. Body: {"name", "schema": base64 Arrow IPC schema, '
    '"capacity": 16, "capacity_bytes": null, "partitions": 1, "writers": 1, "end_marker": "required" | '
    '"optional", "idle_timeout_s": null}. Result: {"name", "partitions", "capacity", "capacity_bytes"}.',
    names.FAIL: 'End a push table (or one partition) with an error its readers receive. '
    'Body: {"name", "partition"?: P, "message"}.',
    names.DROP: 'Remove a push table; blocked writers and readers get an error. Body: {"name"}; or remove a '
    'Paimon table with its data and snapshots (its durable writes on this server fail, its reads end NOT_FOUND). '
    'Body: {"table": "db.t"}.',
    names.COMMIT: 'Free batches a replaying consumer has processed. Body: {"name", "offsets": {"P": seq}, '
    '"discard": false}; with "discard": true the offsets may pass what was read (a consumer that starts at '
    'the latest batches frees the older ones unread).',
    names.STATS: 'Per push table and partition: state, reader mode (drain or replay), writer streams, '
    'queued batches and bytes, rows in and out; per Paimon table written through this server '
    '("paimon_writes"): queued and in-commit batches, named producers writing, commits. Body: {"name"?}.',
    names.LATEST_SNAPSHOT: 'The latest snapshot id of a Paimon table, null when it has none. '
    'Body: {"table": "db.t"}. Result: {"snapshot_id": N or null, "earliest_snapshot_id": E or null}.',
    names.CONSUMER_PROGRESS: "A Paimon consumer's recorded progress: the next snapshot it will read, null when "
    'it has none. Body: {"table": "db.t", "consumer_id"}. Result: {"next_snapshot": N or null}.',
    names.CONSUMER_COMMIT: "Record that a Paimon consumer has read every snapshot before next_snapshot (Paimon "
    'keeps them from expiring). Body: {"table": "db.t", "consumer_id", "next_snapshot": N}. Result: {}.',
    names.HEALTH: 'Whether the server serves: {"status": "serving" | "stopping", "push_tables", '
    '"paimon_open_follows", "uptime_s"}. Body: {}.',
    names.CREATE_TABLE: 'Create a Paimon table for durable writes. Body: {"table": "db.t", "schema": base64 '
    'Arrow IPC schema, "primary_keys"?: [...], "partition_keys"?: [...], "options"?: {"bucket": "4", ...}}. '
    'Result: {"table", "schema", "primary_keys", "partition_keys", "options"}.',
    names.PRODUCER_STATE: "A named producer's last committed seq in a Paimon table (resume from last_seq + 1). "
    'Body: {"table": "db.t", "producer": "ID"}. Result: {"last_seq": N or null}.',
    names.FIND_SNAPSHOT: 'A Paimon snapshot by commit time or by tag (the start positions scan.timestamp-millis '
    'and scan.tag-name). Body: {"table": "db.t", "timestamp_millis": T} -> {"at_or_before": N or null, '
    '"at_or_after": M or null}; or {"table": "db.t", "tag": "NAME"} -> {"snapshot_id": N}.',
    names.COMPACT: "Rewrite a Paimon append table's small files into one per bucket now, as COMPACT snapshots that "
    'add no rows (Paimon\'s compact procedure). Body: {"table": "db.t", "partition"?: {"col": "value"}}. '
    'Result: {"snapshots": [N...], "files_in", "files_out", "bytes_in"}.',
    names.EXPIRE_SNAPSHOTS: "Expire a Paimon table's old snapshots now and delete the files no kept snapshot, tag "
    'or consumer needs (Paimon\'s expire_snapshots procedure). Body: {"table": "db.t", "retain_max"?: N, '
    '"retain_min"?: N, "older_than"?: epoch ms or timestamp}; the table\'s snapshot.* options by default. '
    'Result: {"expired", "first_kept", "files_deleted", "consumers_removed"}.',
    names.REMOVE_ORPHAN_FILES: "Delete a Paimon table's files that no kept snapshot, tag or changelog names and that "
    'were last written before older_than (default a day ago; at least 10 minutes ago), as Paimon\'s '
    'remove_orphan_files. Body: {"table": "db.t", "older_than"?: epoch ms or timestamp}. Result: {"deleted", "bytes", "scanned"}.',
}


@dataclass(frozen=True)
class Registries:
    """What the actions act on: the server's push tables and its Paimon warehouse."""

    push: PushRegistry
    paimon: PaimonSource
    ingest: Ingest
    maintainer: Maintainer
    started: float  # time.time() when the server started


def _require(body: dict, key: str, action: str):
    if key not in body:
        raise InvalidRequest(f"Action {action!r} needs {key!r} in its JSON body.")
    return body[key]


def register(reg: Registries, body: dict) -> dict:
    name = _require(body, "name", "register")
    schema = decode_schema(_require(body, "schema", "register"), f"push table {name!r}")
    table = reg.push.register(
        name, schema,
        capacity=body.get("capacity", 16),
        partitions=body.get("partitions", 1),
        writers=body.get("writers", 1),
        end_marker=body.get("end_marker", "required"),
        idle_timeout_s=body.get("idle_timeout_s"),
        capacity_bytes=body.get("capacity_bytes"),
    )
    return {"name": table.name, "partitions": len(table.partitions), "capacity": table.capacity,
            "capacity_bytes": table.capacity_bytes}


def fail(reg: Registries, body: dict) -> dict:
    name = _require(body, "name", "fail")
    message = body.get("message") or "failed by the fail action"
    partition = body.get("partition")
    if partition is not None and not is_int(partition):
        raise InvalidRequest(f"Action 'fail' on push table {name!r}: partition {partition!r} is not an integer.")
    reg.push.fail(name, str(message), partition)
    return {}


def drop(reg: Registries, body: dict) -> dict:
    if ("name" in body) == (names.TABLE in body):
        raise InvalidRequest("Action 'drop' takes exactly one of 'name' (a push table) or 'table' (a Paimon "
                             "table DB.TABLE).")
    if "name" in body:
        reg.push.drop(body["name"])
        return {}
    name = table_name(body[names.TABLE], "the body of action 'drop'")
    reg.paimon.table(name)  # NOT_FOUND, naming the table, when there is none
    reg.ingest.drop(name, f"Paimon table {name!r} was dropped")
    try:
        reg.paimon.catalog().drop_table(name)
    except compat.NOT_FOUND_ERRORS:
        raise NotFound(f"Paimon table {name!r} does not exist; list_flights names the tables.", table=name) from None
    return {}


def commit(reg: Registries, body: dict) -> dict:
    discard = body.get("discard", False)
    if not isinstance(discard, bool):
        raise InvalidRequest(f"Action 'commit': 'discard' must be true or false, got {discard!r}.")
    reg.push.commit(_require(body, "name", "commit"), _require(body, "offsets", "commit"), discard)
    return {}


def stats(reg: Registries, body: dict) -> dict:
    """Push tables (all, or the one named) and the durable writes into Paimon tables: with a
    name, only what has that name (a push table name, or a DB.TABLE written through this server)."""
    name = body.get("name")
    writes = reg.ingest.stats(name)
    kept = {k: v for k, v in reg.maintainer.stats().items() if name is None or k == name}
    if name is not None and (writes or kept) and name not in {t.name for t in reg.push.tables()}:
        return {names.PUSH: {}, "paimon_writes": writes, "maintenance": kept}
    return {names.PUSH: reg.push.stats(name), "paimon_writes": writes, "maintenance": kept}


def latest_snapshot(reg: Registries, body: dict) -> dict:
    name = table_name(_require(body, "table", "latest_snapshot"), "the body of action 'latest_snapshot'")
    return {"snapshot_id": reg.paimon.latest_snapshot(name), "earliest_snapshot_id": reg.paimon.earliest_snapshot(name)}


def _consumer(body: dict, action: str) -> tuple[str, str]:
    what = f"the body of action {action!r}"
    name = table_name(_require(body, "table", action), what)
    return name, check_consumer_id(_require(body, "consumer_id", action), what)


def consumer_progress(reg: Registries, body: dict) -> dict:
    name, cid = _consumer(body, "consumer_progress")
    return {"next_snapshot": reg.paimon.consumer_progress(name, cid)}


def consumer_commit(reg: Registries, body: dict) -> dict:
    name, cid = _consumer(body, "consumer_commit")
    nxt = _require(body, "next_snapshot", "consumer_commit")
    if not is_int(nxt, minimum=1):
        raise InvalidRequest(f"Action 'consumer_commit': 'next_snapshot' must be an integer >= 1, got {nxt!r}.")
    reg.paimon.consumer_commit(name, cid, nxt)
    return {}


def health(reg: Registries, body: dict) -> dict:
    """Answers while the server serves; a shutting-down server says so."""
    return {"status": "serving" if reg.push.closing is None else "stopping",
            "push_tables": len(reg.push.tables()), "paimon_open_follows": reg.paimon.open_follows,
            "uptime_s": round(time.time() - reg.started, 3)}


def create_table(reg: Registries, body: dict) -> dict:
    name = table_name(_require(body, "table", "create_table"), "the body of action 'create_table'")
    schema = decode_schema(_require(body, "schema", "create_table"), f"Paimon table {name!r}")
    unknown = sorted(set(body) - {"table", "schema", "primary_keys", "partition_keys", "options"})
    if unknown:
        raise InvalidRequest(f"Action 'create_table' takes no key {unknown[0]!r}.")
    return reg.paimon.create_table(name, schema, body.get("primary_keys") or [], body.get("partition_keys") or [],
                                   body.get("options") or {})


def producer_state(reg: Registries, body: dict) -> dict:
    what = "the body of action 'producer_state'"
    name = table_name(_require(body, "table", "producer_state"), what)
    producer = check_consumer_id(_require(body, "producer", "producer_state"), what, names.PRODUCER)
    return reg.ingest.producer_state(name, producer)


def find_snapshot(reg: Registries, body: dict) -> dict:
    what = "the body of action 'find_snapshot'"
    name = table_name(_require(body, "table", "find_snapshot"), what)
    unknown = sorted(set(body) - {"table", "timestamp_millis", "tag"})
    if unknown or ("timestamp_millis" in body) == ("tag" in body):
        raise InvalidRequest(f"Action 'find_snapshot' takes 'table' and exactly one of 'timestamp_millis' or 'tag', "
                             f"got keys {sorted(body)}.")
    if "tag" in body:
        tag = body["tag"]
        if not isinstance(tag, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}", tag):
            raise InvalidRequest(f"Action 'find_snapshot': 'tag' must be a tag name (letters, digits, _ . -), "
                                 f"got {tag!r}.")
        return {"snapshot_id": reg.paimon.tag_snapshot(name, tag)}
    millis = body["timestamp_millis"]
    if not is_int(millis, minimum=0):
        raise InvalidRequest(f"Action 'find_snapshot': 'timestamp_millis' must be an integer >= 0, got {millis!r}.")
    before, after = reg.paimon.snapshots_around(name, millis)
    return {"at_or_before": before, "at_or_after": after}


def compact(reg: Registries, body: dict) -> dict:
    name = table_name(_require(body, "table", "compact"), "the body of action 'compact'")
    _only(body, "compact", {"table", "partition"})
    partition = body.get("partition")
    if partition is not None and (not isinstance(partition, dict) or not all(
            isinstance(k, str) and (isinstance(v, str) or is_int(v)) for k, v in partition.items())):
        raise InvalidRequest(f"Action 'compact': 'partition' must map partition columns to values, got {partition!r}.")
    return reg.maintainer.compact(name, None if partition is None else {k: str(v) for k, v in partition.items()})


def expire_snapshots(reg: Registries, body: dict) -> dict:
    name = table_name(_require(body, "table", "expire_snapshots"), "the body of action 'expire_snapshots'")
    _only(body, "expire_snapshots", {"table", "retain_max", "retain_min", "older_than"})
    ints = {}
    for key in ("retain_max", "retain_min"):
        value = body.get(key)
        if value is not None and not is_int(value, minimum=1):
            raise InvalidRequest(f"Action 'expire_snapshots': {key!r} must be an integer >= 1, got {value!r}.")
        ints[key] = value
    if ints["retain_max"] is not None and ints["retain_min"] is not None and ints["retain_max"] < ints["retain_min"]:
        raise InvalidRequest("Action 'expire_snapshots': 'retain_max' is below 'retain_min'.")
    return reg.maintainer.expire_snapshots(name, ints["retain_max"], ints["retain_min"],
                                           older_than_ms(body.get("older_than"), "expire_snapshots"))


def remove_orphan_files(reg: Registries, body: dict) -> dict:
    name = table_name(_require(body, "table", "remove_orphan_files"), "the body of action 'remove_orphan_files'")
    _only(body, "remove_orphan_files", {"table", "older_than"})
    return reg.maintainer.remove_orphan_files(name, older_than_ms(body.get("older_than"), "remove_orphan_files"))


def older_than_ms(value, action: str) -> int | None:
    """`older_than` as epoch milliseconds: given so, or as a timestamp the way Paimon's procedures
    take it ('2026-11-24 12:00:00', the server's local time; or ISO 8601 with an offset)."""
    if value is None:
        return None
    if is_int(value, minimum=0):
        return value
    if isinstance(value, str):
        from datetime import datetime

        try:
            return int(datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    raise InvalidRequest(f"Action {action!r}: 'older_than' must be epoch milliseconds or a timestamp such as "
                         f"'2026-11-24 12:00:00' (local time) or '2026-11-24T12:00:00Z', got {value!r}.")


def _only(body: dict, action: str, keys: set[str]) -> None:
    unknown = sorted(set(body) - keys)
    if unknown:
        raise InvalidRequest(f"Action {action!r} takes no key {unknown[0]!r}; it takes {', '.join(sorted(keys))}.")


HANDLERS: dict[str, Callable[[Registries, dict], dict]] = {
    names.REGISTER: register,
    names.FAIL: fail,
    names.DROP: drop,
    names.COMMIT: commit,
    names.STATS: stats,
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
}
assert tuple(HANDLERS) == names.ACTIONS == tuple(DESCRIPTIONS)

# The grant each action needs, and the body key(s) naming its table (None: no table, any principal).
GRANTED_BY: dict[str, tuple[str, str | tuple[str, ...]] | None] = {
    names.REGISTER: (ADMIN, "name"),
    names.FAIL: (ADMIN, "name"),
    names.DROP: (ADMIN, ("name", names.TABLE)),  # a push table or a Paimon table
    names.COMMIT: (WRITE, "name"),
    names.STATS: (READ, "name"),
    names.LATEST_SNAPSHOT: (READ, "table"),
    names.CONSUMER_PROGRESS: (READ, "table"),
    names.CONSUMER_COMMIT: (WRITE, "table"),
    names.HEALTH: None,
    names.CREATE_TABLE: (ADMIN, "table"),
    names.PRODUCER_STATE: (WRITE, "table"),
    names.FIND_SNAPSHOT: (READ, "table"),
    names.COMPACT: (ADMIN, "table"),
    names.EXPIRE_SNAPSHOTS: (ADMIN, "table"),
    names.REMOVE_ORPHAN_FILES: (ADMIN, "table"),
}
assert tuple(GRANTED_BY) == names.ACTIONS


def run(reg: Registries, action: str, body: dict, access: Access) -> dict:
    """Run one action for a principal: its grant on the table the body names is checked first;
    `stats` without a name shows only the tables the principal may read."""
    handler = HANDLERS.get(action)
    if handler is None:
        raise InvalidRequest(f"Unknown action {action!r}; list_actions names them: {', '.join(HANDLERS)}.")
    granted_by = GRANTED_BY.get(action, (ADMIN, "name"))  # an action added without a grant: admin
    if granted_by is not None:
        grant, keys = granted_by
        for key in (keys,) if isinstance(keys, str) else keys:
            if key not in body:
                continue
            table = body[key]
            if not isinstance(table, str):
                raise InvalidRequest(f"Action {action!r}: {key!r} must be a table name (a string), got {table!r}.")
            access.require(grant, table, f"table {table!r} (action {action!r})")
    result = handler(reg, body)
    if action == names.STATS and "name" not in body:
        result = {key: {k: v for k, v in part.items() if access.allows(READ, k)} for key, part in result.items()}
    return result
