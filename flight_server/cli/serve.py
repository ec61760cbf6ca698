"""`flight_cli serve`: run the server until SIGTERM/SIGINT, then stop within a bound."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
import threading

import pyarrow as pa
import pyarrow.flight as flight
import structlog

from flight_server.auth import AuthConfig, AuthConfigError
from flight_server.cli import CliError
from flight_server.limits import StreamSlots, TableBudget
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


def _is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def _read(path: str, flag: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise CliError(f"cannot read {flag} {path!r}: {e.strerror}.") from None


def security(args) -> tuple[str, dict]:
    """The listen scheme and the server's TLS and auth arguments, from the flags; refuses to serve a
    non-loopback address without --auth unless --insecure."""
    kwargs = {}
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CliError("--tls-cert and --tls-key go together: pass the certificate chain and its private key.")
    if args.tls_client_ca and not args.tls_cert:
        raise CliError("--tls-client-ca (mTLS) needs TLS: pass --tls-cert and --tls-key too.")
    scheme = "grpc"
    if args.tls_cert:
        scheme = "grpc+tls"
        kwargs["tls_certificates"] = [flight.CertKeyPair(_read(args.tls_cert, "--tls-cert"), _read(args.tls_key, "--tls-key"))]
        if args.tls_client_ca:
            kwargs.update(verify_client=True, root_certificates=_read(args.tls_client_ca, "--tls-client-ca"))
    if args.auth:
        try:
            kwargs["auth"] = AuthConfig.load(args.auth)
        except AuthConfigError as e:
            raise CliError(str(e)) from None
    elif not args.insecure and not _is_loopback(args.host):
        raise CliError(f"refusing to serve {args.host} without --auth: anyone who reaches it could read, write and "
                       "drop every table. Pass --auth FILE (principals, tokens, grants), or --insecure to serve it "
                       "open anyway.")
    return scheme, kwargs


def limits(args) -> dict:
    for flag in ("max_streams", "max_tables", "max_partitions"):
        if getattr(args, flag) < 1:
            raise CliError(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}.")
    return {"streams": StreamSlots(args.max_streams),
            "budget": TableBudget(args.max_memory, args.max_tables, args.max_partitions)}


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
    scheme, secured = security(args)
    _check_port_free(args.host, args.port)
    if args.metrics_port is not None:
        _check_port_free(args.host, args.metrics_port)
    remote = "://" in args.warehouse  # an object store (s3://...): pypaimon's filesystem options apply
    try:
        server = FlightPaimonServer(f"{scheme}://{args.host}:{args.port}", advertise=args.advertise,
                                    ticket_key=key, warehouse=args.warehouse, metrics=args.metrics_port is not None,
                                    commit_interval_ms=args.commit_interval_ms, commit_bytes=args.commit_bytes,
                                    warehouse_options=dict(args.warehouse_option or []), **secured, **limits(args))
    except pa.ArrowException as e:
        raise CliError(f"the server did not start on {args.host}:{args.port} ({e}).") from None
    if remote:
        try:
            server.paimon.catalog().list_databases()
        except Exception as e:  # noqa: BLE001 - any storage failure: the reason, in one line, and exit
            server.shutdown()
            raise CliError(f"cannot open warehouse {args.warehouse} ({type(e).__name__}: {str(e).splitlines()[0][:300]}); "
                           "check --warehouse-option (s3.endpoint, s3.region, s3.access-key, s3.secret-key, "
                           "s3.path-style-access).") from None
    metrics_url = None
    if server.metrics is not None:
        try:
            _, metrics_url = server.metrics.serve_http(args.host, args.metrics_port)
        except OSError as e:
            raise CliError(f"cannot serve metrics on {args.host}:{args.metrics_port}: {e.strerror}.") from None
    if not remote:
        os.makedirs(args.warehouse, exist_ok=True)  # only once the server listens: a failed start creates nothing
    thread = threading.Thread(target=server.serve, name="flight-serve", daemon=True)
    thread.start()
    metrics = f", metrics {metrics_url}/metrics" if metrics_url else ""
    where = args.warehouse if remote else os.path.abspath(args.warehouse)
    print(f"flight-paimon serving {server.uri} (warehouse {where}{metrics})", flush=True)
    log.info("serving", uri=server.uri, advertise=server.advertise, warehouse=args.warehouse,
             malloc_arena_max=1 if allocator.one_malloc_arena_set() else None,
             auth=f"{len(secured['auth'].principals)} principals" if "auth" in secured else None,
             mtls=bool(args.tls_client_ca), max_memory=args.max_memory, max_streams=args.max_streams)
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
