"""The client a flight_cli command talks through, from its --uri, --token and TLS flags."""

from __future__ import annotations

import os

from flight_cli.args import CliError, check_uri
from producers.client import Client

RECONNECT_BACKOFF_S = 1.0  # gRPC's wait between connection attempts while a command waits for its server


def client(args, reconnecting: bool = False) -> Client:
    """The command's client; `reconnecting`: one that looks for a server that went away every
    RECONNECT_BACKOFF_S (gRPC's own backoff grows to 2 minutes)."""
    token = args.token if args.token is not None else os.environ.get("FLIGHT_PAIMON_TOKEN") or None
    try:
        return Client(check_uri(args.uri), timeout=args.timeout, token=token, tls_root_certs=args.tls_root_certs,
                      cert_chain=args.tls_cert_chain, private_key=args.tls_private_key,
                      max_reconnect_backoff_s=RECONNECT_BACKOFF_S if reconnecting else None)
    except ValueError as e:
        raise CliError(str(e)) from None
