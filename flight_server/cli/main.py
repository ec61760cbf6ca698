"""The flight_cli parser, the client commands, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys

import pyarrow as pa
import pyarrow.flight as flight

from flight_server import logging as fp_logging
from flight_server.cli.serve import cmd_serve
from flight_server.cli.tail import cmd_tail as _tail
from producers.client import Client, error_message

DEFAULT_URI = "grpc://127.0.0.1:8815"


def _client(args) -> Client:
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


def cmd_tail(args) -> int:
    return _tail(args, _client(args))


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
