"""The error types of the protocol, and the one way a client reads a Flight error.

The server raises these below its RPC layer and maps them to gRPC status codes once
(`flight_server.status.to_flight`). `from_flight` turns whatever a Flight call raised back into
the server's own kind and sentence, whatever pyarrow wrapped around it (PaimonSink decides what
to retry with it); `error_message` gives only the sentence, which the CLI and the Spark reader print.
"""

from __future__ import annotations

import json


class FlightPaimonError(Exception):
    """Base of every error this project raises on purpose."""

    code = "error"

    def __init__(self, message: str, **detail):
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
    expiry hid): a named producer resumes and resends what the table lacks."""

    code = "commit_raced"


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
    """The error a client got from a Flight call, as one of the protocol's types with a clean message."""
    import pyarrow as pa
    import pyarrow.flight as flight

    message = error_message(exc)
    by_code = {kind.code: kind for kind in (WrongState, PartitionFailed, CommitFailed, CommitRaced, LimitExceeded,
                                             Cancelled, Internal)}
    code = _extra_info_code(getattr(exc, "extra_info", None)) or _detail_code(exc)
    if code in by_code:  # the server's own word on what kind of error this is
        return by_code[code](message)
    if code in _DETAIL_ONLY:  # get_schema: pyarrow sends every error UNKNOWN, the code in its detail
        return _DETAIL_ONLY[code](message)
    kinds = [
        (flight.FlightUnauthenticatedError, Unauthenticated), (flight.FlightUnauthorizedError, PermissionDenied),
        (flight.FlightUnavailableError, Unavailable), (flight.FlightCancelledError, Cancelled),
        (flight.FlightInternalError, Internal), (KeyError, NotFound),
        (pa.ArrowInvalid, InvalidRequest), (flight.FlightError, WrongState),
    ]
    for source, kind in kinds:
        if isinstance(exc, source):
            return kind(message)
    return FlightPaimonError(message)


_DETAIL_ONLY = {"permission_denied": PermissionDenied, "unauthenticated": Unauthenticated,
                "unavailable": Unavailable, "not_found": NotFound, "invalid": InvalidRequest}


def _detail_code(exc: BaseException) -> str | None:
    """The code the server put as the detail of an error pyarrow could not give its status."""
    text = str(exc)
    marker = ". Detail: Python exception: "
    return text.split(marker, 1)[1].split(".", 1)[0].strip() if marker in text else None


def _extra_info_code(extra_info) -> str | None:
    try:
        value = json.loads(extra_info) if extra_info else None
    except (ValueError, UnicodeDecodeError):
        return None
    return value.get("code") if isinstance(value, dict) else None
