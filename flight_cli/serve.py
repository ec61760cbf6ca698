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

from flight_cli.args import CliError
from flight_cli.sd_notify import notify
from flight_server.auth import AuthConfig, AuthConfigError
from flight_server.limits import StreamSlots, TableBudget
from flight_server.wire import allocator
from flight_server.wire.version import VERSION

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


def _exposed(args) -> list[str]:
    """What the flags make reachable from other hosts: the Flight port, the metrics port."""
    ports = [("--host", args.host)] + ([("--metrics-host", args.metrics_host)] if args.metrics_port is not None else [])
    return [f"{flag} {host}" for flag, host in ports if not _is_loopback(host)]


def security(args) -> tuple[str, dict]:
    """The listen scheme and the server's TLS and auth arguments, from the flags; refuses to serve a
    non-loopback address without --auth unless --insecure, and warns when it is --insecure."""
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
    elif exposed := _exposed(args):
        if not args.insecure:
            raise CliError(f"refusing to serve {' and '.join(exposed)} without --auth: anyone who reaches it could "
                           "read, write and drop every table (or, on the metrics port, see every table's name). "
                           "Pass --auth FILE (principals, tokens, grants), or --insecure to serve it open anyway.")
        # One line, before the server starts: an operator who passed --insecure long ago is reminded.
        print(f"flight_cli serve: warning: --insecure: {' and '.join(exposed)} is reachable from other hosts "
              f"without {'tokens' if args.tls_cert else 'TLS or tokens'}; anyone who reaches it may read, write "
              "and drop every table. Pass --auth FILE (and --tls-cert) to close it.", file=sys.stderr, flush=True)
    return scheme, kwargs


def _local_warehouse(path: str) -> None:
    """A local --warehouse is a directory, or will be one: a file in its place is one clear line
    here, not a traceback from the first read."""
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        what = "is a file" if existing == path else f"is under {existing!r}, a file"
        raise CliError(f"--warehouse {path!r} {what}, not a directory; pass a directory (it is created when "
                       "missing) or an object store URI such as s3://bucket/path.")


def limits(args) -> dict:
    for flag in ("max_streams", "max_tables", "max_partitions"):
        if getattr(args, flag) < 1:
            raise CliError(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}.")
    return {"streams": StreamSlots(args.max_streams),
            "budget": TableBudget(args.max_memory, args.max_tables, args.max_partitions)}


def _notify(state: str) -> None:
    """Tell systemd (Type=notify units); a socket it set but that cannot be reached is logged, not fatal."""
    try:
        notify(state)
    except OSError as e:
        log.warning("sd_notify_failed", notify_socket=os.environ.get("NOTIFY_SOCKET"), error=e.strerror or str(e))


def cmd_serve(args) -> int:
    from flight_server.paimon import compat
    from flight_server.server import FlightPaimonServer

    # Block the signals before gRPC starts its threads: they inherit the mask and the main
    # thread collects the signal with sigwait (on Python 3.11 a Python handler did not run
    # while gRPC threads were busy in Python, e.g. a polling follow, so SIGTERM was ignored).
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    key = os.environ.get("FLIGHT_PAIMON_TICKET_KEY", "").encode() or None
    if args.maintenance_interval_ms < 1:
        raise CliError(f"--maintenance-interval-ms ({args.maintenance_interval_ms}) must be at least 1.")
    threads = {"write_threads": args.write_threads, "write_pool": args.write_pool_threads,
               "commit_threads": args.commit_threads}  # unset: the server's defaults
    processes = args.commit_processes
    if processes < 0:
        raise CliError(f"--commit-processes ({processes}) must be 0 (in the serving process) or more.")
    if args.max_open_tables < 1:
        raise CliError(f"--max-open-tables ({args.max_open_tables}) must be 1 or more.")
    if args.commit_interval_ms < 1 or args.commit_bytes < 1 or min(n or 1 for n in threads.values()) < 1:
        raise CliError(f"--commit-interval-ms ({args.commit_interval_ms}), --commit-bytes ({args.commit_bytes}), "
                       f"--write-threads ({args.write_threads}), --write-pool-threads ({args.write_pool_threads}) "
                       f"and --commit-threads ({args.commit_threads}) must be positive.")
    catalog_options = dict(args.warehouse_option or [])
    unservable = compat.unservable(catalog_options)  # REST, an unknown metastore, a JDBC catalog without its URI
    if unservable is not None:
        raise CliError(f"--warehouse-option: {unservable}.")
    jdbc = catalog_options.get("metastore") == "jdbc"  # the table names in a database: opened at start as well
    remote = "://" in args.warehouse  # an object store (s3://...): pypaimon's filesystem options apply
    if not remote:
        _local_warehouse(args.warehouse)
    scheme, secured = security(args)
    _check_port_free(args.host, args.port)
    if args.metrics_port is not None:
        _check_port_free(args.metrics_host, args.metrics_port)
    try:
        server = FlightPaimonServer(f"{scheme}://{args.host}:{args.port}", advertise=args.advertise,
                                    ticket_key=key, ticket_lifetime_ms=args.ticket_lifetime,
                                    warehouse=args.warehouse, metrics=args.metrics_port is not None,
                                    commit_interval_ms=args.commit_interval_ms, commit_bytes=args.commit_bytes,
                                    **{k: n for k, n in threads.items() if n is not None},
                                    commit_processes=processes,
                                    maintenance_interval_ms=args.maintenance_interval_ms,
                                    table_idle_ms=args.table_idle_timeout, max_open_tables=args.max_open_tables,
                                    maintenance_workers=args.maintenance_workers,
                                    metrics_table_window_ms=args.metrics_table_window,
                                    metrics_max_tables=args.metrics_max_tables,
                                    warehouse_options=catalog_options, **secured, **limits(args))
    except pa.ArrowException as e:
        raise CliError(f"the server did not start on {args.host}:{args.port} ({e}).") from None
    if remote or jdbc:
        try:
            server.paimon.catalog().list_databases()
        except Exception as e:  # noqa: BLE001 - any storage or database failure: the reason, in one line, and exit
            server.shutdown()
            check = ("uri, jdbc.user, jdbc.password; psycopg2 or pymysql installed for PostgreSQL or MySQL"
                     if jdbc else "s3.endpoint, s3.region, s3.access-key, s3.secret-key, s3.path-style-access")
            what = f"the JDBC catalog {catalog_options.get('uri')}" if jdbc else f"warehouse {args.warehouse}"
            raise CliError(f"cannot open {what} ({type(e).__name__}: {str(e).splitlines()[0][:300]}); "
                           f"check --warehouse-option ({check}).") from None
    metrics_url = None
    if server.metrics is not None:
        try:
            _, metrics_url = server.metrics.serve_http(args.metrics_host, args.metrics_port, secured.get("auth"))
        except OSError as e:
            server.shutdown()
            raise CliError(f"cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {e.strerror}.") from None
    if not remote:
        try:
            os.makedirs(args.warehouse, exist_ok=True)  # only once the server listens: a failed start creates nothing
        except OSError as e:
            server.shutdown()
            raise CliError(f"cannot create --warehouse {args.warehouse!r}: {e.strerror}.") from None
    thread = threading.Thread(target=server.serve, name="flight-serve", daemon=True)
    thread.start()
    metrics = f", metrics {metrics_url}/metrics" if metrics_url else ""
    print(f"flight-paimon {VERSION} serving {server.uri} (warehouse {args.warehouse}{metrics})", flush=True)
    log.info("serving", version=VERSION, uri=server.uri, advertise=server.advertise, warehouse=args.warehouse,
             malloc_arena_max=1 if allocator.one_malloc_arena_set() else None,
             auth=f"{len(secured['auth'].principals)} principals" if "auth" in secured else None,
             mtls=bool(args.tls_client_ca), max_memory=args.max_memory, max_streams=args.max_streams)
    _notify(f"READY=1\nSTATUS=serving {server.uri}\nMAINPID={os.getpid()}")
    sig = signal.sigwait(signals)
    log.info("shutting_down", signal=signal.Signals(sig).name, timeout_s=args.shutdown_timeout)
    _notify("STOPPING=1\nSTATUS=draining")
    if not server.close("the server is shutting down", args.shutdown_timeout):
        # A call stuck in gRPC (a frozen client that stopped reading) holds shutdown() forever,
        # and interpreter exit would wait for it too: the bound is the process's exit.
        log.warning("shutdown_timed_out", waited_s=args.shutdown_timeout)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
