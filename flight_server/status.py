"""The single mapping of errors to Flight/gRPC status codes (server side).

Modules below the RPC layer raise the protocol's types (`flight_server.wire.errors`) and never
import pyarrow.flight; the server converts them once, in `to_flight`. Messages start with a
sentence that names the table and partition and says what to do.
"""

from __future__ import annotations

import functools
import traceback

import pyarrow as pa
import pyarrow.flight as flight
import structlog

from flight_server.wire.errors import (
    Cancelled, FlightPaimonError, InvalidRequest, NotFound, PermissionDenied, Unauthenticated, Unavailable,
    Unimplemented,
)

log = structlog.get_logger(__name__)


MAX_MESSAGE_BYTES = 2000  # gRPC carries the message in trailers (twice, one base64) within its 8 KiB


class _WireNotFound(KeyError):
    """NOT_FOUND on the wire: a KeyError whose str() is not quoted."""

    def __str__(self) -> str:
        return self.args[0]


class _WireInvalid(pa.ArrowInvalid):
    """INVALID_ARGUMENT on the wire."""


class _WireUnimplemented(NotImplementedError):
    """UNIMPLEMENTED on the wire."""


def _clean_details(format_exception):
    """pyarrow's server sends a Python exception's NOT_FOUND/INVALID_ARGUMENT status with a detail
    made by `traceback.format_exception` (the server's traceback and file paths). For the errors
    `to_flight` made, whose message is already the whole story, the detail is the error's code.
    (get_schema is the RPC where that matters for every error: pyarrow's `_get_schema` callback,
    unlike the others, does not turn a FlightError into its status, so each one arrives UNKNOWN
    with this detail.)"""

    @functools.wraps(format_exception)
    def wrapper(exc, /, *args, **kwargs):
        value = args[0] if args and args[0] is not None else exc
        if getattr(value, "wire_code", None) is not None:
            return [value.wire_code]
        return format_exception(exc, *args, **kwargs)

    wrapper.flight_paimon = True
    return wrapper


def install_clean_details() -> None:
    """Idempotent; the server calls it at start. Other exceptions format as before."""
    if not getattr(traceback.format_exception, "flight_paimon", False):
        traceback.format_exception = _clean_details(traceback.format_exception)


def _cut(message: str) -> str:
    raw = message.encode("utf-8", "replace")
    if len(raw) <= MAX_MESSAGE_BYTES:
        return message
    return raw[: MAX_MESSAGE_BYTES - 30].decode("utf-8", "ignore") + f" ... ({len(raw)} bytes in all)"


def to_flight(exc: BaseException, call: dict | None = None) -> BaseException:
    """Return the exception to raise to pyarrow.flight for `exc`: the one mapping to the wire.
    `call`: the call's log fields (rpc, action, table, peer), for the line a bug is logged with."""
    if isinstance(exc, flight.FlightError):
        return exc
    if not isinstance(exc, FlightPaimonError):
        return _unexpected(exc, call or {})
    # pyarrow appends ". Detail: ..." to every message: drop our full stop so it reads once.
    message = _cut(exc.message).rstrip(".")
    if isinstance(exc, (NotFound, InvalidRequest)):
        wire = _WireNotFound(message) if isinstance(exc, NotFound) else _WireInvalid(message)
    elif isinstance(exc, Unimplemented):
        wire = _WireUnimplemented(message)
    elif isinstance(exc, Cancelled):
        wire = flight.FlightCancelledError(message, extra_info=exc.extra_info())
    elif isinstance(exc, Unavailable):
        wire = flight.FlightUnavailableError(message, extra_info=exc.extra_info())
    elif isinstance(exc, Unauthenticated):
        wire = flight.FlightUnauthenticatedError(message, extra_info=exc.extra_info())
    elif isinstance(exc, PermissionDenied):
        wire = flight.FlightUnauthorizedError(message, extra_info=exc.extra_info())
    else:
        wire = flight.FlightServerError(message, extra_info=exc.extra_info())
    wire.wire_code = exc.code
    return wire


def status_name(exc: BaseException | None) -> str:
    """The gRPC status a call ends with, by name (for metrics): the same mapping as `to_flight`."""
    if exc is None:
        return "OK"
    if isinstance(exc, NotFound):
        return "NOT_FOUND"
    if isinstance(exc, InvalidRequest):
        return "INVALID_ARGUMENT"
    if isinstance(exc, Unimplemented):
        return "UNIMPLEMENTED"
    if isinstance(exc, (Cancelled, flight.FlightCancelledError)):
        return "CANCELLED"
    if isinstance(exc, (Unauthenticated, flight.FlightUnauthenticatedError)):
        return "UNAUTHENTICATED"
    if isinstance(exc, (PermissionDenied, flight.FlightUnauthorizedError)):
        return "PERMISSION_DENIED"
    if isinstance(exc, (Unavailable, flight.FlightUnavailableError)):
        return "UNAVAILABLE"
    if isinstance(exc, (FlightPaimonError, flight.FlightServerError)):
        return "UNKNOWN"
    return "INTERNAL"


def _unexpected(exc: BaseException, call: dict) -> BaseException:
    """A bug (whatever its type, KeyError included): logged with its traceback and the call's
    fields, INTERNAL on the wire."""
    log.error("unexpected_error", exc_info=exc, **call)
    first_line = (str(exc).splitlines() or [""])[0][:300]
    wire = flight.FlightInternalError(
        f"Internal error in flight-paimon ({type(exc).__name__}: {first_line}); "
        "the server log has the traceback."
    )
    wire.wire_code = "internal"
    return wire
