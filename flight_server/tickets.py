"""The one codec for tickets and descriptors: what a client names, decoded into typed requests.

Tickets are opaque to clients: JSON signed with the server's key (HMAC-SHA256), so a garbled or
forged ticket is refused with a clear error. Servers sharing a warehouse share `--ticket-key`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass

from flight_server.wire.errors import InvalidRequest
from flight_server.wire import names

_PREFIX = b"fp1."


@dataclass(frozen=True)
class PushTarget:
    """A push table, or one partition of it (`partition` None means all partitions)."""

    name: str
    partition: int | None = None


def parse_json_object(body: bytes, what: str) -> dict:
    try:
        value = json.loads(bytes(body).decode("utf-8")) if body else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidRequest(f"The {what} is not UTF-8 JSON ({e}); send a JSON object.") from e
    if not isinstance(value, dict):
        raise InvalidRequest(f"The {what} must be a JSON object, got {type(value).__name__}.")
    return value


def parse_push_path(path: list[bytes]) -> PushTarget:
    """`["push", NAME]` or `["push", NAME, "P"]`."""
    parts = [p.decode("utf-8", "replace") if isinstance(p, bytes) else str(p) for p in path]
    if len(parts) not in (2, 3) or parts[0] != names.PUSH or not parts[1]:
        raise InvalidRequest(
            f"Descriptor path {parts!r} is not understood; use ['push', NAME], "
            "['push', NAME, 'P'] or ['paimon', 'DB.TABLE']."
        )
    if len(parts) == 2:
        return PushTarget(parts[1])
    if not parts[2].isdigit():
        raise InvalidRequest(
            f"Partition {parts[2]!r} of push table {parts[1]!r} is not a decimal number; use e.g. '0'."
        )
    return PushTarget(parts[1], int(parts[2]))


class TicketCodec:
    """Signs and verifies tickets: `fp1.` + base64(JSON) + `.` + base64(HMAC)."""

    def __init__(self, key: bytes | None = None):
        self._key = key or os.urandom(32)

    def encode(self, payload: dict) -> bytes:
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode())
        return _PREFIX + body + b"." + base64.urlsafe_b64encode(self._mac(body))

    def decode(self, ticket: bytes) -> dict:
        ticket = bytes(ticket)
        body, dot, mac = ticket[len(_PREFIX):].rpartition(b".")
        if not ticket.startswith(_PREFIX) or not dot:
            raise InvalidRequest(
                "The ticket is not a flight-paimon ticket; take tickets from get_flight_info "
                "(or flight_cli) and pass them unchanged."
            )
        try:
            given = base64.urlsafe_b64decode(mac)
        except ValueError:
            given = b""
        if not hmac.compare_digest(given, self._mac(body)):
            raise InvalidRequest(
                "The ticket's signature does not match: it was altered, forged, or issued by a "
                "server with another --ticket-key; get a fresh ticket from get_flight_info."
            )
        return json.loads(base64.urlsafe_b64decode(body))

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:16]
