"""The project's error hierarchy and its single mapping to Flight/gRPC status codes.

Modules below the RPC layer raise these types and never import pyarrow.flight; the server
converts them once, in `to_flight`. Messages start with a sentence that names the table and
partition and says what to do.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import structlog

log = structlog.get_logger(__name__)


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


class Cancelled(FlightPaimonError):
    """The other end of the stream went away (consumer or producer cancelled)."""

    code = "cancelled"


def to_flight(exc: BaseException) -> BaseException:
    """Return the exception to raise to pyarrow.flight for `exc`: the one mapping to the wire."""
    if isinstance(exc, flight.FlightError):
        return exc
    if not isinstance(exc, FlightPaimonError):
        return _unexpected(exc)
    # pyarrow appends ". Detail: ..." to every message: drop our full stop so it reads once.
    message = exc.message.rstrip(".")
    if isinstance(exc, NotFound):
        return NotFound(message)  # a KeyError whose str() is not quoted
    if isinstance(exc, InvalidRequest):
        return pa.ArrowInvalid(message)
    if isinstance(exc, Cancelled):
        return flight.FlightCancelledError(message, extra_info=exc.extra_info())
    return flight.FlightServerError(message, extra_info=exc.extra_info())


def _unexpected(exc: BaseException) -> BaseException:
    if isinstance(exc, (KeyError, pa.ArrowInvalid)):
        return exc
    log.error("unexpected_error", exc_info=exc)
    first_line = (str(exc).splitlines() or [""])[0][:300]
    return flight.FlightInternalError(
        f"Internal error in flight-paimon ({type(exc).__name__}: {first_line}); "
        "the server log has the traceback."
    )
