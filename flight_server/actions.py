"""The `do_action` verbs as plain functions over the registries (no Flight imports)."""

from __future__ import annotations

from collections.abc import Callable

from flight_server.errors import InvalidRequest
from flight_server.push_tables import PushRegistry
from flight_server.schemas import decode_schema

DESCRIPTIONS = {
    "register": 'Register a push table. Body: {"name", "schema": base64 Arrow IPC schema, '
    '"capacity": 16, "partitions": 1, "writers": 1}. Result: {"name", "partitions", "capacity"}.',
    "fail": 'End a push table (or one partition) with an error its readers receive. '
    'Body: {"name", "partition"?: P, "message"}.',
    "drop": 'Remove a push table; blocked writers and readers get an error. Body: {"name"}.',
    "commit": 'Free batches a replaying consumer has processed. Body: {"name", "offsets": {"P": seq}}.',
    "stats": 'Per push table and partition: state, queued batches and bytes, rows in and out. '
    'Body: {"name"?}.',
}


def _require(body: dict, key: str, action: str):
    if key not in body:
        raise InvalidRequest(f"Action {action!r} needs {key!r} in its JSON body.")
    return body[key]


def register(push: PushRegistry, body: dict) -> dict:
    name = _require(body, "name", "register")
    schema = decode_schema(_require(body, "schema", "register"), f"push table {name!r}")
    table = push.register(
        name, schema,
        capacity=body.get("capacity", 16),
        partitions=body.get("partitions", 1),
        writers=body.get("writers", 1),
    )
    return {"name": table.name, "partitions": len(table.partitions), "capacity": table.capacity}


def fail(push: PushRegistry, body: dict) -> dict:
    name = _require(body, "name", "fail")
    message = body.get("message") or "failed by the fail action"
    partition = body.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise InvalidRequest(f"Action 'fail' on push table {name!r}: partition {partition!r} is not an integer.")
    push.fail(name, str(message), partition)
    return {}


def drop(push: PushRegistry, body: dict) -> dict:
    push.drop(_require(body, "name", "drop"))
    return {}


def commit(push: PushRegistry, body: dict) -> dict:
    push.commit(_require(body, "name", "commit"), _require(body, "offsets", "commit"))
    return {}


def stats(push: PushRegistry, body: dict) -> dict:
    return {"push": push.stats(body.get("name"))}


HANDLERS: dict[str, Callable[[PushRegistry, dict], dict]] = {
    "register": register,
    "fail": fail,
    "drop": drop,
    "commit": commit,
    "stats": stats,
}
