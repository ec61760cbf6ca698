"""The server's gRPC middleware: every call's bearer token is checked here, before any handler runs."""

from __future__ import annotations

import pyarrow.flight as flight
import structlog

from flight_server.auth import ALLOW_ALL, Access, AuthConfig
from flight_server.status import to_flight
from flight_server.wire.errors import Unauthenticated

log = structlog.get_logger(__name__)

AUTH = "auth"  # the middleware's key on the server


class _Authenticated(flight.ServerMiddleware):
    def __init__(self, access: Access):
        self.access = access


class AuthMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Authenticates all nine RPC types (handshake included): a call without a known token ends
    UNAUTHENTICATED here; grants are checked by the handlers through `access(context)`."""

    def __init__(self, config: AuthConfig):
        self.config = config

    def start_call(self, info, headers):
        try:
            return _Authenticated(self.config.authenticate(headers.get("authorization")))
        except Unauthenticated as e:
            log.warning("rpc_unauthenticated", rpc=str(info.method).rsplit(".", 1)[-1].lower(), reason=e.message)
            raise to_flight(e) from None


def access(context) -> Access:
    """The calling principal's Access (everything, when the server runs without --auth)."""
    middleware = context.get_middleware(AUTH) if context is not None else None
    return middleware.access if middleware is not None else ALLOW_ALL
