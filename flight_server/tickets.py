"""Tickets: what a client names, decoded into typed requests.

Tickets are opaque to clients: JSON signed with the server's key (HMAC-SHA256), so a garbled or
forged ticket is refused with a clear error. Servers sharing a warehouse share the key
(FLIGHT_PAIMON_TICKET_KEY). The signed JSON carries when the ticket was planned (`iat`, epoch ms),
and a ticket older than the lifetime (`flight_cli serve --ticket-lifetime`, a day by default) is
refused: a ticket that leaked (a log, a Spark plan) is no key to the table for ever. A ticket
decodes into one of two frozen dataclasses, every field checked, so nothing below `do_get` reads
an untyped dict.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.requests import PaimonRequest, PaimonSubject, PushSubject
from flight_server.wire.values import MAX_BODY_BYTES, is_int

_PREFIX = b"fp1."
DEFAULT_LIFETIME_MS = 24 * 3600 * 1000  # a plan is read within seconds; a long follow is opened within it
ISSUED = "iat"  # the payload's key of when the ticket was planned (JWT's name), outside the ticket's fields


@dataclass(frozen=True)
class PushTicket(PushSubject):
    """One push partition: drained once, the replayable range [start, end) (end None: to EOF), or a
    viewer's window. Served only by the server that planned it (the table lives there)."""

    any_server = False

    name: str
    uid: str  # tells this table from an earlier one of the same name
    partition: int
    start: int | None = None
    end: int | None = None
    view: str | None = None  # a viewer's ticket: "earliest" or "latest"; never consumes
    principal: str | None = None  # who planned it (--auth): only they may read it

    @property
    def plain(self) -> bool:
        """Whether its batches carry no app_metadata: a drain or replay range (a view's carry seqs)."""
        return self.view is None

    @property
    def direction(self) -> str:
        """How its rows are counted: a view leaves them for the readers that consume them."""
        return "viewed" if self.view else "out"

    def log_fields(self) -> dict:
        fields = super().log_fields()
        return {**fields, "view": self.view} if self.view else fields


@dataclass(frozen=True)
class PaimonTicket(PaimonSubject):
    """One endpoint of a Paimon read, planned once: any server over the warehouse serves it.

    `mode` is the request's: "snapshot" reads `snapshot` (None: the table had none), "delta" the
    snapshots `from_snapshot`+1..`to_snapshot`, "follow" a full scan of `full` (if set) and then
    every snapshot from `next` on. `bucket` or split `group` (i, n) picks this endpoint's share;
    `identity` is the table's, so a table created again under the name is never read.
    `pinned` is the plan itself, made once at get_flight_info: per snapshot to read, this
    endpoint's splits (`compat.pin_splits`), so serving the ticket reads no manifest. None when
    the plan was too large for a ticket: the server then plans the pinned snapshot(s) again.
    """

    request: PaimonRequest
    identity: str | None
    mode: str
    snapshot: int | None = None
    from_snapshot: int | None = None
    to_snapshot: int | None = None
    full: int | None = None
    next: int | None = None
    bucket: int | None = None
    group: tuple[int, int] | None = None
    principal: str | None = None  # who planned it (--auth): only they may read it
    pinned: tuple[tuple[int, tuple[str, ...]], ...] | None = None

    any_server = True  # any server over the warehouse serves it
    direction = "out"

    @property
    def table(self) -> str:
        return self.request.table

    @property
    def plain(self) -> bool:
        """Whether its batches carry no app_metadata: a snapshot read (deltas and follows carry marks)."""
        return self.mode == names.SNAPSHOT_READ

    def log_fields(self) -> dict:
        return {"table": self.table, "bucket": self.bucket, "mode": self.mode}


Ticket = PushTicket | PaimonTicket


_MALFORMED = ("The ticket's payload is malformed ({}); take tickets from get_flight_info "
              "(or flight_cli) and pass them unchanged.")


def _check(value: Any, kind: str, what: str, optional: bool = False) -> Any:  # JSON in, its checked value out
    """`value` if it is of `kind` ("int" >= 0, "str", "pair" of ints), else a clear refusal."""
    if value is None and optional:
        return None
    ok = {
        "int": lambda v: is_int(v, minimum=0),
        "str": lambda v: isinstance(v, str),
        "pair": lambda v: isinstance(v, list) and len(v) == 2 and all(
            is_int(x, minimum=0) for x in v) and v[0] < v[1],
        "pinned": lambda v: isinstance(v, list) and all(
            isinstance(e, list) and len(e) == 2 and is_int(e[0])
            and e[0] >= 1 and isinstance(e[1], list) and all(isinstance(s, str) for s in e[1]) for e in v),
    }[kind](value)
    if not ok:
        raise InvalidRequest(_MALFORMED.format(f"{what} is {str(value)[:100]!r}"))
    if kind == "pinned":
        return tuple((sid, tuple(splits)) for sid, splits in value)
    return tuple(value) if kind == "pair" else value


def _from_payload(payload: object) -> Ticket:
    if not isinstance(payload, dict):
        raise InvalidRequest(_MALFORMED.format("not a JSON object"))
    kind = payload.get("kind")
    if kind == names.PUSH:
        start, end = _check(payload.get("start"), "int", "start", True), _check(payload.get("end"), "int", "end", True)
        if (start is None and end is not None) or (end is not None and end < start):
            raise InvalidRequest(_MALFORMED.format(f"range [{start}, {end})"))
        view = payload.get("view")
        if view not in (None, *names.VIEW_STARTS) or (view is not None and start is not None):
            raise InvalidRequest(_MALFORMED.format(f"view {view!r}"))
        return PushTicket(_check(payload.get("name"), "str", "name"), _check(payload.get("uid"), "str", "uid"),
                          _check(payload.get("partition"), "int", "partition"), start, end, view,
                          _check(payload.get("principal"), "str", "principal", True))
    if kind == names.PAIMON:
        request = PaimonRequest.from_json(payload.get("request"))
        mode = payload.get("mode")
        if mode != request.mode:
            raise InvalidRequest(_MALFORMED.format(f"mode {mode!r}"))
        ints = {k: _check(payload.get(k), "int", k, True)
                for k in ("snapshot", "from_snapshot", "to_snapshot", "full", "next", "bucket")}
        if mode == names.DELTA_READ and (ints["from_snapshot"] is None or ints["to_snapshot"] is None):
            raise InvalidRequest(_MALFORMED.format("a delta without its snapshots"))
        if mode == names.FOLLOW_READ and ints["next"] is None:
            raise InvalidRequest(_MALFORMED.format("a follow without its next snapshot"))
        return PaimonTicket(request, _check(payload.get("identity"), "str", "identity", True), mode,
                            group=_check(payload.get("group"), "pair", "group", True),
                            principal=_check(payload.get("principal"), "str", "principal", True),
                            pinned=_check(payload.get("pinned"), "pinned", "pinned", True), **ints)
    raise InvalidRequest(_MALFORMED.format(f"kind {kind!r}"))


def _to_payload(ticket: Ticket) -> dict:
    if isinstance(ticket, PushTicket):
        return {"kind": names.PUSH, **asdict(ticket)}
    out = {k: v for k, v in asdict(ticket).items() if v is not None}
    out["request"] = ticket.request.to_json()
    return {"kind": names.PAIMON, **out}


class TicketCodec:
    """Signs and verifies tickets: `fp1.` + base64(JSON) + `.` + base64(HMAC); a ticket is served
    for `lifetime_ms` after it was planned (checked when a do_get opens it: a stream open longer
    goes on). `clock`: epoch seconds (time.time)."""

    def __init__(self, key: bytes | None = None, lifetime_ms: int = DEFAULT_LIFETIME_MS,
                 clock: Callable[[], float] = time.time):
        if lifetime_ms < 1:
            raise ValueError(f"a ticket lifetime must be positive, got {lifetime_ms} ms")
        self._key = key or os.urandom(32)
        self.lifetime_ms, self.clock = lifetime_ms, clock

    def encode(self, ticket: Ticket) -> bytes:
        payload = {**_to_payload(ticket), ISSUED: int(self.clock() * 1000)}
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode())
        return _PREFIX + body + b"." + base64.urlsafe_b64encode(self._mac(body))

    def decode(self, ticket: bytes) -> Ticket:
        ticket = bytes(ticket)
        body, dot, mac = ticket[len(_PREFIX):].rpartition(b".")
        if not ticket.startswith(_PREFIX) or not dot or len(ticket) > MAX_BODY_BYTES:
            raise InvalidRequest(
                "The ticket is not a flight-paimon ticket; take tickets from get_flight_info "
                "(or flight_cli) and pass them unchanged."
            )
        try:
            given = base64.urlsafe_b64decode(mac)
        except (ValueError, binascii.Error):
            given = b""
        if base64.urlsafe_b64encode(given) != mac:  # not as signed: base64 decoding skips stray characters
            given = b""  # and unused bits, so an altered signature could decode to the same bytes
        if not hmac.compare_digest(given, self._mac(body)):
            raise InvalidRequest(
                "The ticket's signature does not match: it was altered, forged, or issued by a "
                "server with another ticket key; get a fresh ticket from get_flight_info."
            )
        try:
            payload = json.loads(base64.urlsafe_b64decode(body))
        except (ValueError, binascii.Error, RecursionError):
            raise InvalidRequest(_MALFORMED.format("not base64 of JSON")) from None
        self._check_age(payload)
        return _from_payload(payload)

    def _check_age(self, payload: object) -> None:
        issued = payload.get(ISSUED) if isinstance(payload, dict) else None
        if not is_int(issued, minimum=0):
            raise InvalidRequest(_MALFORMED.format(f"it has no planning time ({ISSUED!r} is {str(issued)[:40]!r})"))
        age_ms = int(self.clock() * 1000) - issued
        if age_ms > self.lifetime_ms:
            raise InvalidRequest(
                f"The ticket expired: it was planned {_span(age_ms)} ago and this server serves tickets for "
                f"{_span(self.lifetime_ms)} (flight_cli serve --ticket-lifetime); plan the read again "
                "(get_flight_info) and read the tickets it returns."
            )

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self._key, body, hashlib.sha256).digest()[:16]


def _span(ms: int) -> str:
    """A duration as the lifetime flag takes it: whole days, hours, minutes or seconds."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms / size:.3g} {unit}"
    return f"{ms} ms"
