"""Errors to Flight/gRPC statuses, server side, by the one table of them (`wire.errors.STATUSES`).

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
    STATUSES,
    FlightPaimonError,
    Internal,
    Status,
    received_status,
    status_of,
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


# The statuses pyarrow's server sends only for a Python exception of a type (STATUSES' `raised`):
# raised as these subclasses, whose detail the server formats as the error's code (_clean_details).
_CARRIERS = {"NOT_FOUND": _WireNotFound, "INVALID_ARGUMENT": _WireInvalid, "UNIMPLEMENTED": _WireUnimplemented}
assert all(issubclass(_CARRIERS[row.name], row.exception()) for row in STATUSES if not row.carries_code)
_INTERNAL = next(row for row in STATUSES if row.kind is Internal)  # a bug's status


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
    wire = _raised(status_of(exc), _cut(exc.message).rstrip("."), exc.extra_info())
    wire.wire_code = exc.code
    return wire


def _raised(row: Status, message: str, extra_info: bytes | None = None) -> BaseException:
    """What the server raises to pyarrow to end a call with the row's status."""
    if not row.carries_code:
        return _CARRIERS[row.name](message)
    return row.exception()(message, extra_info=extra_info) if extra_info is not None else row.exception()(message)


def status_name(exc: BaseException | None) -> str:
    """The gRPC status a call ends with, by name (for metrics): an error of ours by the row
    `to_flight` sends it as, a Flight error by its class; anything else is a bug, INTERNAL."""
    if exc is None:
        return "OK"
    if isinstance(exc, FlightPaimonError):
        return status_of(exc).name
    row = received_status(exc) if isinstance(exc, flight.FlightError) else None
    return row.name if row is not None else "INTERNAL"


def _unexpected(exc: BaseException, call: dict) -> BaseException:
    """A bug (whatever its type, KeyError included): logged with its traceback and the call's
    fields, INTERNAL on the wire."""
    log.error("unexpected_error", exc_info=exc, **call)
    first_line = (str(exc).splitlines() or [""])[0][:300]
    wire = _raised(_INTERNAL, f"Internal error in flight-paimon ({type(exc).__name__}: {first_line}); "
                              "the server log has the traceback.")
    wire.wire_code = Internal.code
    return wire
