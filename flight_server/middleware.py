"""The server's gRPC middleware: every call's bearer token is checked here, before any handler runs."""

from __future__ import annotations

import pyarrow.flight as flight
import structlog

from flight_server.auth import ALLOW_ALL, Access, AuthConfig
from flight_server.status import to_flight
from flight_server.wire.errors import Unauthenticated

log = structlog.get_logger(__name__)

AUTH = "auth"  # the middleware's key on the server

# Refused here, where pyarrow tells no peer: the calls whose first message pyarrow reads before the
# handler runs (a DoPut's could be any size: a refused one must end before it is read), and
# get_schema (pyarrow sends its handler's errors UNKNOWN, not UNAUTHENTICATED).
_REFUSED_AT_ONCE = frozenset({flight.FlightMethod.HANDSHAKE, flight.FlightMethod.DO_PUT,
                              flight.FlightMethod.DO_EXCHANGE, flight.FlightMethod.GET_SCHEMA})


class _Authenticated(flight.ServerMiddleware):
    def __init__(self, access: Access):
        self.access = access


class _Refused(flight.ServerMiddleware):
    """A call whose token was refused: its handler ends it UNAUTHENTICATED before anything else
    (`authenticated`), where the call's peer is known to log it; pyarrow gives a middleware
    factory only the method and the headers."""

    def __init__(self, error: Unauthenticated):
        self.error = error


class AuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Authenticates all nine RPC types (handshake included): a call without a known token ends
    UNAUTHENTICATED, logged as `rpc_unauthenticated`: with its peer in its handler, or here (peer
    null) for handshake, do_put, do_exchange and get_schema; grants are checked by the handlers through `access(context)`."""

    def __init__(self, config: AuthConfig):
        self.config = config

    def start_call(self, info, headers):
        try:
            return _Authenticated(self.config.authenticate(headers.get("authorization")))
        except Unauthenticated as e:
            if info.method not in _REFUSED_AT_ONCE:
                return _Refused(e)
            log.warning("rpc_unauthenticated", rpc=str(info.method).rsplit(".", 1)[-1].lower(), peer=None,
                        reason=e.message)
            raise to_flight(e) from None


def authenticated(context, rpc: str) -> None:
    """End a call UNAUTHENTICATED, logged with its peer, when the middleware refused its token."""
    middleware = context.get_middleware(AUTH) if context is not None else None
    if isinstance(middleware, _Refused):
        log.warning("rpc_unauthenticated", rpc=rpc, peer=context.peer(), reason=middleware.error.message)
        raise to_flight(middleware.error) from None


def access(context) -> Access:
    """The calling principal's Access (everything, when the server runs without --auth)."""
    middleware = context.get_middleware(AUTH) if context is not None else None
    if isinstance(middleware, _Refused):  # never reached past `authenticated`; refused all the same
        raise middleware.error
    return middleware.access if middleware is not None else ALLOW_ALL
