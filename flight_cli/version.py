"""`flight_cli --version --uri URI`: the client's version, then the server's, from its `health` action."""

from __future__ import annotations

import os

from flight_cli.args import OK
from flight_cli.connect import client
from flight_server.wire import names
from flight_server.wire.version import VERSION


def cmd_version(args) -> int:
    print(f"flight_cli {VERSION}", flush=True)
    args.timeout, args.token = 10.0, None  # the token, TLS roots: from the environment, as every command's
    args.tls_root_certs = os.environ.get("FLIGHT_PAIMON_TLS_ROOT_CERTS")
    args.tls_cert_chain = args.tls_private_key = None
    c = client(args)
    try:
        health = c.action(names.HEALTH)
    finally:
        c.close()
    server = health.get("version") or "older than 0.1.0 (its health action names no version)"
    print(f"server {args.uri}: flight-paimon {server}")
    return OK
