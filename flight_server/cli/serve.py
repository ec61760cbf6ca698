"""`flight_cli serve`: run the server until SIGTERM/SIGINT, then stop within a bound."""

from __future__ import annotations

import os
import signal
import sys
import threading

import structlog

from flight_server.wire import allocator

log = structlog.get_logger("flight_cli")


def cmd_serve(args) -> int:
    from flight_server.server import FlightPaimonServer

    # Block the signals before gRPC starts its threads: they inherit the mask and the main
    # thread collects the signal with sigwait (on Python 3.11 a Python handler did not run
    # while gRPC threads were busy in Python, e.g. a polling follow, so SIGTERM was ignored).
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    os.makedirs(args.warehouse, exist_ok=True)
    key = os.environ.get("FLIGHT_PAIMON_TICKET_KEY", "").encode() or None
    server = FlightPaimonServer(f"grpc://{args.host}:{args.port}", advertise=args.advertise,
                                ticket_key=key, warehouse=args.warehouse)
    thread = threading.Thread(target=server.serve, name="flight-serve", daemon=True)
    thread.start()
    print(f"flight-paimon serving {server.uri} (warehouse {os.path.abspath(args.warehouse)})", flush=True)
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
