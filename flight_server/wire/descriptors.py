"""Flight descriptors: what a client's descriptor names, parsed once for every RPC that takes one.

A descriptor is a path (`["push", NAME]`, `["push", NAME, "P"]`, `["paimon", "DB.TABLE"]`) or a
JSON command (`{"table": ...}` a Paimon read, `{"push": ...}` a replay range or a view of a push
partition; for do_put `{"write": ...}` a named producer's durable write, `{"push": ...}` a named
producer's push stream). Callers pass the descriptor's parts (`path` None for a command), so this
module needs no Flight import.
"""

from __future__ import annotations

from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.requests import (
    PaimonRequest,
    PushTarget,
    PushView,
    ReplayRange,
    WriteTarget,
    check_consumer_id,
    parse_path,
    table_name,
)
from flight_server.wire.values import is_int, parse_json_object

ReadRequest = PushTarget | PaimonRequest | PushView | ReplayRange


def read_request(path: list | None, command: bytes | None) -> ReadRequest:
    """What a get_flight_info or get_schema descriptor names."""
    if path is not None:
        parts = path_parts(path or [b""])
        if parts[0] == names.PAIMON:
            return parse_path(parts)
        return parse_push_path(path)
    cmd = parse_json_object(command or b"", "descriptor command")
    if names.PUSH in cmd:
        return PushView.from_json(cmd) if names.VIEW in cmd else ReplayRange.from_json(cmd)
    if names.TABLE in cmd:
        return PaimonRequest.from_json(cmd)
    raise InvalidRequest(
        "The descriptor command names no table; send {\"table\": \"db.t\", ...} for a "
        "Paimon read or {\"push\": NAME, \"partition\": P, \"start\": S, \"end\": E} for a replay."
    )


def write_target(path: list | None, command: bytes | None) -> PushTarget | WriteTarget:
    """What a do_put writes to: a push partition, or a Paimon table (`["paimon", T]`, `{"write": T, ...}`)."""
    if path is not None:
        parts = path_parts(path or [b""])
        if parts[0] != names.PAIMON:
            return parse_push_path(path or [b""])
        if len(parts) != 2:
            parse_path(parts)  # raises, saying what a path is
        return WriteTarget(table_name(parts[1], "the descriptor path"))  # a system table ('$') is read only
    cmd = parse_json_object(command or b"", "do_put descriptor command")
    if names.PUSH in cmd:
        return parse_push_command(cmd)
    if names.WRITE not in cmd:
        raise InvalidRequest('A do_put command names its Paimon table in "write": {"write": "db.t", "producer": "ID"}, '
                             'or a push partition in "push": {"push": NAME, "partition": P, "producer": "ID"}.')
    return WriteTarget.from_json(cmd)


def path_parts(path: list) -> list[str]:
    """A descriptor path's segments as text; they must be UTF-8."""
    try:
        return [p.decode("utf-8") if isinstance(p, bytes) else str(p) for p in path]
    except UnicodeDecodeError:
        raise InvalidRequest(
            f"Descriptor path {path!r} has a segment that is not UTF-8; names on the wire are UTF-8."
        ) from None


def parse_push_path(path: list) -> PushTarget:
    """`["push", NAME]` or `["push", NAME, "P"]`."""
    parts = path_parts(path)
    if len(parts) not in (2, 3) or parts[0] != names.PUSH or not parts[1]:
        raise InvalidRequest(
            f"Descriptor path {parts!r} is not understood; use ['push', NAME], "
            "['push', NAME, 'P'] or ['paimon', 'DB.TABLE']."
        )
    if len(parts) == 2:
        return PushTarget(parts[1])
    if not (parts[2].isascii() and parts[2].isdigit()) or len(parts[2]) > 9:
        raise InvalidRequest(
            f"Partition {parts[2]!r} of push table {parts[1]!r} is not a decimal number; use e.g. '0'."
        )
    return PushTarget(parts[1], int(parts[2]))


def parse_push_command(cmd: dict) -> PushTarget:
    """`{"push": NAME, "partition": P, "producer": "ID"}`: a named producer's stream into a partition."""
    name, p, producer = cmd.get(names.PUSH), cmd.get(names.PARTITION, 0), cmd.get(names.PRODUCER)
    unknown = sorted(set(cmd) - {names.PUSH, names.PARTITION, names.PRODUCER})
    if unknown or not isinstance(name, str) or not name:
        raise InvalidRequest('A named producer\'s do_put command is {"push": NAME, "partition": P, "producer": "ID"}; '
                             f"got keys {sorted(cmd)}.")
    if not is_int(p, minimum=0):
        raise InvalidRequest(f"Partition {p!r} of push table {name!r} is not an integer >= 0.")
    return PushTarget(name, p, check_consumer_id(producer, f"A write into push table {name!r}", names.PRODUCER))
