"""`flight_cli serve`: run the server until SIGTERM/SIGINT, then stop within a bound."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

import pyarrow as pa
import structlog

from flight_server.cli import CliError
from flight_server.wire import allocator

log = structlog.get_logger("flight_cli")


def _check_port_free(host: str, port: int) -> None:
    """A port in use is one clear line here, before gRPC logs its own and pyarrow says only
    "Server did not start properly"."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise CliError(f"--host {host!r} does not resolve ({e.strerror}).") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # As gRPC binds: connections of a killed predecessor left in TIME_WAIT do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            raise CliError(f"cannot listen on {host}:{port}: {e.strerror}; is another server running "
                           "there? Pick another --port (0 picks a free one).") from None


def cmd_serve(args) -> int:
    from flight_server.server import FlightPaimonServer

    # Block the signals before gRPC starts its threads: they inherit the mask and the main
    # thread collects the signal with sigwait (on Python 3.11 a Python handler did not run
    # while gRPC threads were busy in Python, e.g. a polling follow, so SIGTERM was ignored).
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    key = os.environ.get("FLIGHT_PAIMON_TICKET_KEY", "").encode() or None
    if args.commit_interval_ms < 1 or args.commit_bytes < 1:
        raise CliError(f"--commit-interval-ms ({args.commit_interval_ms}) and --commit-bytes ({args.commit_bytes}) "
                       "must be positive.")
    _check_port_free(args.host, args.port)
    if args.metrics_port is not None:
        _check_port_free(args.host, args.metrics_port)
    try:
        server = FlightPaimonServer(f"grpc://{args.host}:{args.port}", advertise=args.advertise,
                                    ticket_key=key, warehouse=args.warehouse, metrics=args.metrics_port is not None,
                                    commit_interval_ms=args.commit_interval_ms, commit_bytes=args.commit_bytes)
    except pa.ArrowException as e:
        raise CliError(f"the server did not start on {args.host}:{args.port} ({e}).") from None
    metrics_url = None
    if server.metrics is not None:
        try:
            _, metrics_url = server.metrics.serve_http(args.host, args.metrics_port)
        except OSError as e:
            raise CliError(f"cannot serve metrics on {args.host}:{args.metrics_port}: {e.strerror}.") from None
    os.makedirs(args.warehouse, exist_ok=True)  # only once the server listens: a failed start creates nothing
    thread = threading.Thread(target=server.serve, name="flight-serve", daemon=True)
    thread.start()
    metrics = f", metrics {metrics_url}/metrics" if metrics_url else ""
    print(f"flight-paimon serving {server.uri} (warehouse {os.path.abspath(args.warehouse)}{metrics})", flush=True)
    log.info("serving", uri=server.uri, advertise=server.advertise, warehouse=args.warehouse,
             malloc_arena_max=1 if allocator.one_malloc_arena_set() else None)
    sig = signal.sigwait(signals)
    log.info("shutting_down", signal=signal.Signals(sig).name, timeout_s=args.shutdown_timeout)
    server.close_streams("the server is shutting down")
    stopper = threading.Thread(target=server.shutdown, name="flight-shutdown", daemon=True)
    stopper.start()
    stopper.join(args.shutdown_timeout)
    if stopper.is_alive():
        # A call stuck in gRPC (a frozen client that stopped reading) holds shutdown() forever,
        # and interpreter exit would wait for it too: the bound is the process's exit.
        log.warning("shutdown_timed_out", waited_s=args.shutdown_timeout)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
