"""flight_cli: serve | register | tail | list | stats."""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time

from flight_server.wire import allocator, names

# Before pyarrow is imported: importing pyarrow.flight starts a thread with its own arena.
MALLOC_TUNED = allocator.one_malloc_arena()

import pyarrow as pa  # noqa: E402  (after the malloc set-up above)
import pyarrow.flight as flight  # noqa: E402
import structlog  # noqa: E402

from flight_server import logging as fp_logging  # noqa: E402
from producers.client import FollowProgress, error_message  # noqa: E402

DEFAULT_URI = "grpc://127.0.0.1:8815"

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
             malloc_arena_max=1 if MALLOC_TUNED else None)
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


def _client(args):
    from producers.client import Client

    return Client(args.uri, timeout=args.timeout)


def cmd_register(args) -> int:
    from flight_server.wire.schemas import parse_spec

    result = _client(args).register(args.name, parse_spec(args.schema), capacity=args.capacity,
                                    partitions=args.partitions, writers=args.writers,
                                    end_marker=args.end_marker, idle_timeout_s=args.idle_timeout_s)
    print(json.dumps(result))
    return 0


def cmd_list(args) -> int:
    client = _client(args)
    for info in client.flight.list_flights(options=client.options()):
        path = "/".join(p.decode() for p in info.descriptor.path) if info.descriptor.path else "?"
        cols = ", ".join(f"{f.name}:{f.type}" for f in info.schema)
        print(f"{path}\tendpoints={len(info.endpoints)}\t{cols}")
    return 0


def cmd_stats(args) -> int:
    print(json.dumps(_client(args).stats(args.name), indent=2))
    return 0


class _Printer:
    """Prints rows as they arrive and a live rate on stderr."""

    def __init__(self, fmt: str, limit: int | None):
        self.fmt, self.limit = fmt, limit
        self.rows = 0
        self.start = self.last_rate = time.monotonic()
        self.header_done = False

    def batch(self, batch: pa.RecordBatch) -> bool:
        """Print `batch`; return False once the limit is reached."""
        rows = batch.to_pylist()
        if self.limit is not None:
            rows = rows[: self.limit - self.rows]
        if self.fmt == "jsonl":
            out = "\n".join(json.dumps(r, default=str) for r in rows)
        else:
            lines = [] if self.header_done else [" | ".join(batch.schema.names)]
            self.header_done = True
            lines += [" | ".join("NULL" if v is None else str(v) for v in r.values()) for r in rows]
            out = "\n".join(lines)
        if out:
            print(out, flush=True)
        self.rows += len(rows)
        now = time.monotonic()
        if now - self.last_rate >= 1.0:
            self.last_rate = now
            print(f"\r{self.rows} rows, {self.rows / (now - self.start):,.0f} rows/s", end="",
                  file=sys.stderr, flush=True)
        return self.limit is None or self.rows < self.limit


def cmd_tail(args) -> int:
    allocator.reuse_batch_buffers()
    client = _client(args)
    if args.target.startswith("push:"):
        info = client.info(args.target[len("push:"):])
    elif args.target.count(".") == 1:
        cmd = {names.TABLE: args.target, names.FOLLOW: True, names.START: args.start,
               names.POLL_INTERVAL_MS: args.poll_interval_ms}
        if args.consumer_id:
            cmd[names.CONSUMER_ID] = args.consumer_id
        info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)),
                                              options=client.options())
    else:
        raise SystemExit(f"flight_cli tail: target {args.target!r} is neither push:NAME nor DB.TABLE.")
    printer = _Printer(args.format, args.limit)
    progress = FollowProgress(len(info.endpoints))
    results: queue.Queue = queue.Queue(maxsize=8)
    done = object()

    def pull(i: int, endpoint):
        try:
            reader = client.flight.do_get(endpoint.ticket, options=client.options(None))
            for chunk in reader:
                results.put((i, chunk.data, chunk.app_metadata))
        except Exception as e:  # noqa: BLE001 - every failure is printed and sets the exit status
            results.put(e)
        finally:
            results.put(done)

    for i, ep in enumerate(info.endpoints):
        threading.Thread(target=pull, args=(i, ep), daemon=True, name="tail-pull").start()
    open_streams, status = len(info.endpoints), 0
    try:
        while open_streams:
            item = results.get()
            if item is done:
                open_streams -= 1
                continue
            if isinstance(item, BaseException):
                print(f"\nflight_cli tail: {error_message(item)}", file=sys.stderr)
                status = 1
                break
            i, batch, metadata = item
            if batch.num_rows and not printer.batch(batch):
                break
            # Printed first, committed after: a crash repeats at most what was not committed.
            nxt = progress.update(i, metadata)
            if nxt is not None and args.consumer_id:
                client.action(names.CONSUMER_COMMIT, {names.TABLE: args.target,
                                                      names.CONSUMER_ID: args.consumer_id, "next_snapshot": nxt})
    except KeyboardInterrupt:
        status = 130
    elapsed = time.monotonic() - printer.start
    print(f"\n{printer.rows} rows in {elapsed:.2f}s", file=sys.stderr)
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flight_cli", description="flight-paimon: push tables and Paimon tables over Arrow Flight")
    parser.add_argument("--log-level", default="info")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the server")
    p.add_argument("--warehouse", default="./warehouse")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8815, help="0 picks a free port")
    p.add_argument("--advertise", action="append", help="URI put in FlightInfo endpoints (repeatable)")
    p.add_argument("--shutdown-timeout", type=float, default=5.0,
                   help="seconds SIGTERM/SIGINT wait for calls to end before the process exits anyway (default 5)")
    p.set_defaults(func=cmd_serve)

    def client_args(p):
        p.add_argument("--uri", default=os.environ.get("FLIGHT_PAIMON_URI", DEFAULT_URI))
        p.add_argument("--timeout", type=float, default=30.0, help="seconds per unary call")

    p = sub.add_parser("register", help="register a push table")
    p.add_argument("name")
    p.add_argument("--schema", required=True, help='e.g. "id:int64,name:string,ts:timestamp[us]"')
    p.add_argument("--capacity", type=int, default=16)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--writers", type=int, default=1, help="producer streams per partition (default 1)")
    p.add_argument("--end-marker", choices=["required", "optional"], default="required",
                   help="optional: a stream that half-closes without {\"end\": N} ends cleanly too "
                        "(unsafe: a crashed producer looks the same); for plain Flight clients")
    p.add_argument("--idle-timeout-s", type=float,
                   help="fail a partition whose producers send nothing for this long (default: never)")
    client_args(p)
    p.set_defaults(func=cmd_register)

    p = sub.add_parser("tail", help="print rows of push:NAME or of Paimon table DB.TABLE as they arrive")
    p.add_argument("target", help="push:NAME or DB.TABLE")
    p.add_argument("--from", dest="start", default="latest",
                   help="Paimon start: latest | latest-full | earliest | snapshot:N (default latest)")
    p.add_argument("--consumer-id", help="Paimon consumer id: resume where it stopped")
    p.add_argument("--poll-interval-ms", type=int, default=100, help="Paimon snapshot poll interval")
    p.add_argument("--format", choices=["table", "jsonl"], default="table")
    p.add_argument("--limit", type=int)
    client_args(p)
    p.set_defaults(func=cmd_tail)

    for name, func, text in (("list", cmd_list, "list tables"), ("stats", cmd_stats, "per-table statistics")):
        p = sub.add_parser(name, help=text)
        if name == "stats":
            p.add_argument("name", nargs="?")
        client_args(p)
        p.set_defaults(func=func)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    fp_logging.configure(args.log_level)
    try:
        return args.func(args)
    except flight.FlightError as e:
        print(f"flight_cli {args.command}: {error_message(e)}", file=sys.stderr)
        return 1
    except (KeyError, ValueError, pa.ArrowException) as e:
        print(f"flight_cli {args.command}: {error_message(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
