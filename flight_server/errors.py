"""The single mapping of errors to Flight/gRPC status codes (server side).

Modules below the RPC layer raise the protocol's types (`flight_server.wire.errors`) and never
import pyarrow.flight; the server converts them once, in `to_flight`. Messages start with a
sentence that names the table and partition and says what to do.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight
import structlog

from flight_server.wire.errors import Cancelled, FlightPaimonError, InvalidRequest, NotFound

log = structlog.get_logger(__name__)


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
