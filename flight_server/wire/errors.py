"""The error types of the protocol, the one table of their Flight statuses, and the one way a
client reads a Flight error.

The server raises these below its RPC layer; `STATUSES` says which gRPC status each kind travels
as and which exception pyarrow raises for that status. The server sends them through it
(`flight_server.status.to_flight`, and `status_name` for metrics); `from_flight` reads it the
other way, turning whatever a Flight call raised back into the server's own kind and sentence
(PaimonSink decides what to retry with it, the CLI its exit code, the Spark reader whether the
server was unreachable, timed out or refused); `error_message` gives only the sentence.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass


class FlightPaimonError(Exception):
    """Base of every error this project raises on purpose."""

    code = "error"

    def __init__(self, message: str, **detail: object):
        super().__init__(message)
        self.message = message
        self.detail = detail

    def extra_info(self) -> bytes:
        """Machine-readable detail sent in the Flight error's extra_info."""
        return json.dumps({"code": self.code, **self.detail}, default=str).encode()


class NotFound(FlightPaimonError, KeyError):
    """An unknown table, partition or snapshot: NOT_FOUND on the wire."""

    code = "not_found"

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class InvalidRequest(FlightPaimonError, ValueError):
    """A bad request, schema, ticket or option: INVALID_ARGUMENT on the wire."""

    code = "invalid"


class WrongState(FlightPaimonError):
    """The target exists but cannot do this now: consumed, closed, failed, dropped."""

    code = "state"


class PartitionFailed(WrongState):
    """The partition was ended with an error (by its producer, `fail`, `drop` or shutdown)."""

    code = "failed"


class CommitFailed(WrongState):
    """A durable write's group commit failed: none of the stream's unacked batches were committed."""

    code = "commit_failed"


class CommitRaced(CommitFailed):
    """A group commit lost a race with another writer (a conflict, or an outcome another server's
    expiry hid), or its outcome is not known (its commit worker process died): a named producer
    resumes and resends what the table lacks."""

    code = "commit_raced"


class StorageFailed(WrongState):
    """The warehouse refused a write the server needs (permission denied, no space left): the
    message names the table and what the operator must fix; never a server path (the log has it)."""

    code = "storage_failed"


class TableReplaced(WrongState):
    """The Paimon table was dropped (and perhaps created again) by another server or tool since the
    stream opened: its commit is refused, never made into the table now under that name."""

    code = "table_dropped"


class SchemaChanged(WrongState):
    """A follow asked to end at a schema change (`"on_schema_change": "end"`) met a snapshot written
    with a newer schema than the one it opened with: every row before `snapshot` was sent (and its
    `{"done": snapshot - 1}` mark); open the follow again at `snapshot` (`"start": "snapshot:N"`,
    or the consumer's progress) to read on with the new columns."""

    code = "schema_changed"


class OutcomeUnknown(WrongState):
    """A staged job's commit whose outcome this server cannot tell (it no longer holds the stage,
    and the table's snapshots since the job began are not all kept): look for the stage in the
    snapshots' properties before running the job again."""

    code = "outcome_unknown"


class LimitExceeded(WrongState):
    """A server limit (--max-memory, --max-streams, --max-tables, --max-partitions, a partition's
    capacity_bytes) would be passed: RESOURCE_EXHAUSTED in spirit, UNKNOWN with this code on the
    wire (pyarrow's server has no way to send RESOURCE_EXHAUSTED)."""

    code = "resource_exhausted"


class Unauthenticated(FlightPaimonError):
    """No bearer token, or one the server does not know: UNAUTHENTICATED on the wire."""

    code = "unauthenticated"


class PermissionDenied(FlightPaimonError):
    """The caller's principal has no grant for this: PERMISSION_DENIED on the wire."""

    code = "permission_denied"


class Cancelled(FlightPaimonError):
    """The other end of the stream went away (consumer or producer cancelled)."""

    code = "cancelled"


class Unavailable(FlightPaimonError):
    """The server could not be reached, or is shutting down: UNAVAILABLE on the wire, which clients
    retry (named durable producers reconnect, readers fail over to the endpoint's next location)."""

    code = "unavailable"


class Unimplemented(FlightPaimonError):
    """An RPC this server does not offer (DoExchange)."""

    code = "unimplemented"


class Internal(FlightPaimonError):
    """A bug in the server; its log has the traceback."""

    code = "internal"


class TimedOut(FlightPaimonError):
    """The call's own deadline passed (the client's timeout): DEADLINE_EXCEEDED, raised on the
    client's side; the server never sends it."""

    code = "timed_out"


@dataclass(frozen=True)
class Status:
    """One row of the table: a kind of error, the gRPC status it travels as, and the exception a
    pyarrow client raises for that status (`module.Class`; the server raises it, or a subclass of
    it, to send the status). pyarrow's Flight errors carry the kind's code in extra_info."""

    kind: type[FlightPaimonError]
    name: str  # the gRPC status code, as docs/protocol.md and the metrics name it
    raised: str

    def exception(self) -> type[BaseException]:
        module, _, name = self.raised.rpartition(".")
        return getattr(importlib.import_module(module), name)  # pyarrow is imported only when an error is read

    @property
    def carries_code(self) -> bool:
        """Whether the exception takes extra_info (NOT_FOUND, INVALID_ARGUMENT and UNIMPLEMENTED
        travel as a Python KeyError, ArrowInvalid and NotImplementedError, which do not)."""
        return self.raised.startswith("pyarrow.flight.")


# The one mapping of error kinds to Flight statuses; the first row whose kind an error is wins.
STATUSES: tuple[Status, ...] = (
    Status(NotFound, "NOT_FOUND", "builtins.KeyError"),
    Status(InvalidRequest, "INVALID_ARGUMENT", "pyarrow.ArrowInvalid"),
    Status(Unimplemented, "UNIMPLEMENTED", "builtins.NotImplementedError"),
    Status(Unauthenticated, "UNAUTHENTICATED", "pyarrow.flight.FlightUnauthenticatedError"),
    Status(PermissionDenied, "PERMISSION_DENIED", "pyarrow.flight.FlightUnauthorizedError"),
    Status(Unavailable, "UNAVAILABLE", "pyarrow.flight.FlightUnavailableError"),
    Status(Cancelled, "CANCELLED", "pyarrow.flight.FlightCancelledError"),
    Status(TimedOut, "DEADLINE_EXCEEDED", "pyarrow.flight.FlightTimedOutError"),
    Status(Internal, "INTERNAL", "pyarrow.flight.FlightInternalError"),
    # Every other kind (wrong state, a failed partition or commit, a limit: their code in
    # extra_info), as pyarrow's server can send no better status; a client reads any other
    # Flight error as this row's kind.
    Status(WrongState, "UNKNOWN", "pyarrow.flight.FlightServerError"),
)
UNKNOWN = STATUSES[-1]

# Every kind by its code: the server's own word on the kind, in extra_info or (get_schema) the detail.
KINDS: dict[str, type[FlightPaimonError]] = {kind.code: kind for kind in (
    NotFound, InvalidRequest, WrongState, PartitionFailed, CommitFailed, CommitRaced, TableReplaced, StorageFailed,
    OutcomeUnknown, LimitExceeded, SchemaChanged,
    Unauthenticated, PermissionDenied, Cancelled, Unavailable, Unimplemented, Internal, TimedOut)}


def status_of(error: FlightPaimonError) -> Status:
    """The row an error of ours is sent as."""
    return next((row for row in STATUSES if isinstance(error, row.kind)), UNKNOWN)


def received_status(exc: BaseException) -> Status | None:
    """The row whose exception a Flight call raised (by its class alone), None for another."""
    return next((row for row in STATUSES if isinstance(exc, row.exception())), None)


# What pyarrow or gRPC put after the server's own sentence.
_TAILS = (". Detail:", ". gRPC client debug context:", "\n")


def error_message(exc: BaseException) -> str:
    """The server's own sentence from a Flight error, without what pyarrow or gRPC appended."""
    text = str(exc)
    for marker in _TAILS:
        text = text.split(marker, 1)[0]
    return text.strip() or type(exc).__name__


def connection_hint(exc: BaseException) -> str:
    """What to do about a connection that failed in TLS, in a sentence ("" when it is not that)."""
    text = str(exc)
    if "certificate verify failed" in text:
        return (" The server's TLS certificate is not trusted: pass the CA that signed it (flight_cli --tls-root-certs, "
                "Client(tls_root_certs=...), Spark option tls.root-certs).")
    if "Ssl handshake failed" in text or "Socket closed" in text or "wrong version number" in text:
        return (" The connection was closed during set-up: a TLS server needs a grpc+tls:// URI and the CA of its "
                "certificate (--tls-root-certs), a plain one grpc://; a server that demands client certificates "
                "(mTLS) needs --tls-cert-chain and --tls-private-key (Client(cert_chain=..., private_key=...)).")
    return ""


def from_flight(exc: BaseException) -> FlightPaimonError:
    """The error a client got from a Flight call, as one of the protocol's types with a clean message:
    the kind the server named by its code, else the kind of the status (`STATUSES`); any other
    Flight error is UNKNOWN's kind, anything else a plain `FlightPaimonError`."""
    import pyarrow.flight as flight

    if isinstance(exc, FlightPaimonError):  # one of ours already (raised on this side: a bad value)
        return exc
    message = error_message(exc)
    # The server's own word on what kind of error this is: in extra_info, or (get_schema, whose
    # errors pyarrow sends UNKNOWN) the status detail.
    info = _extra_info(getattr(exc, "extra_info", None))
    code = info.pop("code", None)
    code = code if isinstance(code, str) and code else _detail_code(exc)
    if code in KINDS:
        info.pop("message", None)
        return KINDS[code](message, **info)  # its detail too (schema_changed: the snapshot to resume at)
    row = received_status(exc)
    if row is None and isinstance(exc, flight.FlightError):
        row = UNKNOWN
    return row.kind(message) if row is not None else FlightPaimonError(message)


def _detail_code(exc: BaseException) -> str | None:
    """The code the server put as the detail of an error pyarrow could not give its status."""
    text = str(exc)
    marker = ". Detail: Python exception: "
    return text.split(marker, 1)[1].split(".", 1)[0].strip() if marker in text else None


def _extra_info(extra_info: bytes | None) -> dict:
    """The JSON object the server put in extra_info (its code and detail), {} when there is none."""
    try:
        value = json.loads(extra_info) if extra_info else None
    except (ValueError, UnicodeDecodeError):
        return {}
    return dict(value) if isinstance(value, dict) and all(isinstance(k, str) for k in value) else {}
