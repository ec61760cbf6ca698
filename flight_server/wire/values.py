"""JSON values as the protocol reads them: the one strict integer check, and the one reader of
the JSON objects clients send (action bodies, descriptor commands, ticket payloads).

JSON's `true` arrives as Python's `True`, which is an `int`: every count, seq, offset and id the
protocol takes is an int that is not a bool.
"""

from __future__ import annotations

import json
from typing import TypeGuard

from flight_server.wire.errors import InvalidRequest

MAX_BODY_BYTES = 1 << 20  # an action body, descriptor command or ticket: far above any real one
MAX_JSON_DEPTH = 32


def is_int(value: object, minimum: int | None = None, maximum: int | None = None) -> TypeGuard[int]:
    """Whether `value` is a JSON integer (not a bool) within [minimum, maximum] where given."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and (minimum is None or value >= minimum) and (maximum is None or value <= maximum))


def _depth(value: object, limit: int) -> int:
    if limit < 0:
        return 0
    if isinstance(value, dict):
        return 1 + max((_depth(v, limit - 1) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v, limit - 1) for v in value), default=0)
    return 0


def parse_json_object(body: bytes, what: str) -> dict:
    """A client's JSON object, bounded in size and depth; `what` names it in the error."""
    body = bytes(body)
    if len(body) > MAX_BODY_BYTES:
        raise InvalidRequest(f"The {what} is {len(body)} bytes; at most {MAX_BODY_BYTES} are taken.")
    try:
        value = json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise InvalidRequest(f"The {what} is not UTF-8 JSON ({reason}); send a JSON object.") from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"The {what} must be a JSON object, got {type(value).__name__}.")
    if _depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise InvalidRequest(f"The {what} is nested more than {MAX_JSON_DEPTH} levels deep; send a flat JSON object.")
    return value
