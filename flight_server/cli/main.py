"""The flight_cli parser, the client commands, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.cli import logs as fp_logging
from flight_server.cli import CliError, targets
from flight_server.cli.serve import cmd_serve
from flight_server.cli.tail import cmd_tail as _tail
from flight_server.ingest.streams import DEFAULT_WRITERS
from flight_server.limits import DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_STREAMS, DEFAULT_MAX_TABLES
from flight_server.units import parse_flag_bytes
from flight_server.wire import names
from flight_server.wire.errors import connection_hint
from producers.client import Client, error_message

DEFAULT_URI = "grpc://127.0.0.1:8815"


def _client(args) -> Client:
    if "://" not in args.uri:
        raise CliError(f"--uri {args.uri!r} has no scheme; use grpc://{args.uri} (or grpc+tls://).")
    token = args.token if args.token is not None else os.environ.get("FLIGHT_PAIMON_TOKEN") or None
    try:
        return Client(args.uri, timeout=args.timeout, token=token, tls_root_certs=args.tls_root_certs,
                      cert_chain=args.tls_cert_chain, private_key=args.tls_private_key)
    except ValueError as e:
        raise CliError(str(e)) from None


def cmd_register(args) -> int:
    from flight_server.wire.schemas import parse_spec

    result = _client(args).register(args.name, parse_spec(args.schema), capacity=args.capacity,
                                    partitions=args.partitions, writers=args.writers,
                                    end_marker=args.end_marker, idle_timeout_s=args.idle_timeout_s,
                                    capacity_bytes=args.capacity_bytes)
    print(json.dumps(result))
    return 0


def cmd_create(args) -> int:
    from flight_server.wire.schemas import parse_spec

    options = dict(args.option or [])
    if args.buckets is not None:
        options["bucket"] = str(args.buckets)
    if args.bucket_key:
        options["bucket-key"] = args.bucket_key
    result = _client(args).create_table(args.table, parse_spec(args.schema), primary_keys=_names(args.primary_key),
                                        partition_keys=_names(args.partition_by), options=options)
    print(json.dumps(result))
    return 0


def _names(values: list[str] | None) -> list[str]:
    """Repeatable and comma-separated: `--primary-key a,b` or `--primary-key a --primary-key b`."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


def _size(text: str) -> int:
    """A byte flag: Paimon's size grammar (64mb = 64MiB = 64m, all 1024-based), as flight_server.units."""
    try:
        return parse_flag_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _warehouse(text: str) -> str:
    """A local warehouse as an absolute path: pypaimon-rust cannot plan or read a relative one
    (pypaimon then falls back to its slower Python scanner on every read). URIs stay as given."""
    return text if "://" in text else os.path.abspath(os.path.expanduser(text))


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; pass 0 or more")
    return value


def _instant(text: str) -> int | str:
    """Epoch milliseconds as a number, else the timestamp text (the server parses it)."""
    return int(text) if text.strip().isdigit() else text


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. file.format=parquet")
    return key, value


def cmd_drop(args) -> int:
    kind, name = targets.parse(args.name, "drop", bare_push=True)
    client = _client(args)
    if kind == names.PUSH:
        client.drop(name)
    else:
        client.drop_table(name)
    print(json.dumps({"dropped": args.name}))
    return 0


def _paimon_table(text: str, command: str) -> str:
    kind, name = targets.parse(text, command)
    if kind == names.PUSH:
        raise CliError(f"{command} {text!r}: push tables live in memory and need no maintenance; name a "
                       "Paimon table DB.TABLE.")
    return name


def cmd_compact(args) -> int:
    name = _paimon_table(args.table, "compact")
    print(json.dumps(_client(args).compact(name, dict(args.partition) if args.partition else None)))
    return 0


def cmd_expire_snapshots(args) -> int:
    name = _paimon_table(args.table, "expire-snapshots")
    print(json.dumps(_client(args).expire_snapshots(name, args.retain_max, args.retain_min, args.older_than)))
    return 0


def cmd_remove_orphan_files(args) -> int:
    name = _paimon_table(args.table, "remove-orphan-files")
    print(json.dumps(_client(args).remove_orphan_files(name, args.older_than)))
    return 0


def cmd_create_tag(args) -> int:
    name = _paimon_table(args.table, "create-tag")
    print(json.dumps(_client(args).create_tag(name, args.tag, args.snapshot, args.time_retained).to_json()))
    return 0


def cmd_delete_tag(args) -> int:
    name = _paimon_table(args.table, "delete-tag")
    print(json.dumps({"deleted": _client(args).delete_tag(name, args.tag)}))
    return 0


def cmd_list(args) -> int:
    client = _client(args)
    for info in client.flight.list_flights(args.prefix.encode(), options=client.options()):
        path = targets.spelled([p.decode() for p in info.descriptor.path])  # as tail and drop take it
        cols = ", ".join(f"{f.name}:{f.type}" for f in info.schema)
        print(f"{path}\tendpoints={len(info.endpoints)}\t{cols}")
    return 0


def cmd_stats(args) -> int:
    print(json.dumps(_client(args).stats(args.name), indent=2))
    return 0


def cmd_tail(args) -> int:
    return _tail(args, _client(args))


LOG_LEVELS = ("debug", "info", "warning", "error")


class HELP(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's "(default: X)" only where the help does not state the default itself and there is
    one to state: each default shows once, and never as "(default: None)"."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text or "unset:" in text:
            return text
        return super()._get_help_string(action)


def _version() -> str:
    try:
        return importlib.metadata.version("flight-paimon")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flight_cli", formatter_class=HELP,
                                     description="flight-paimon: push tables and Paimon tables over Arrow Flight")
    parser.add_argument("--version", action="version", version=f"flight_cli {_version()}")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="log level, on stderr")
    # Also after the command (`flight_cli list --log-level debug`); SUPPRESS keeps the global value.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS, help="log level, on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, text: str, func):
        p = sub.add_parser(name, help=text, description=text, parents=[common], formatter_class=HELP)
        p.set_defaults(func=func)
        return p

    p = command("serve", "run the server (FLIGHT_PAIMON_TICKET_KEY: the ticket key servers of one warehouse share)",
                cmd_serve)
    p.add_argument("--warehouse", default="./warehouse", type=_warehouse,
                   help="Paimon warehouse: a directory (created when missing), or an object store URI such as "
                        "s3://bucket/path")
    p.add_argument("--warehouse-option", action="append", type=_option, metavar="KEY=VALUE",
                   help="a pypaimon catalog/filesystem option (repeatable), e.g. s3.endpoint=http://HOST:9000, "
                        "s3.region, s3.access-key, s3.secret-key, s3.path-style-access=true")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8815, help="port to listen on; 0 picks a free port")
    p.add_argument("--advertise", action="append", help="URI put in FlightInfo endpoints (repeatable; default: the listen URI)")
    p.add_argument("--shutdown-timeout", type=float, default=5.0,
                   help="seconds SIGTERM/SIGINT wait for calls to end before the process exits anyway")
    p.add_argument("--metrics-port", type=int,
                   help="serve Prometheus /metrics and /healthz over HTTP on this port (0: a free one; unset: off); "
                        "with --auth, /metrics needs the bearer token of a principal with 'admin' on \"*\"")
    p.add_argument("--metrics-host", default="127.0.0.1",
                   help="address the metrics port listens on (another than loopback needs --auth or --insecure, "
                        "as --host does)")
    p.add_argument("--commit-interval-ms", type=int, default=100,
                   help="durable writes: commit the batches of a Paimon table's producers at most this often")
    p.add_argument("--commit-bytes", type=_size, default="64MiB",
                   help="durable writes: commit sooner once this many bytes are written, e.g. 16MiB (sizes as "
                        "Paimon writes them: 16mb = 16m = 16MiB); producers wait while a quarter of it (4-16 MiB) "
                        "waits for a writer thread")
    p.add_argument("--write-threads", type=int, default=DEFAULT_WRITERS,
                   help="durable writes: threads that encode an append table's (bucket -1) batches in parallel "
                        f"(default: half the CPU count, 1 to 8; here {DEFAULT_WRITERS}); a table with primary keys or "
                        "fixed buckets takes one")
    p.add_argument("--maintenance-interval-ms", type=int, default=1000,
                   help="compact and expire a Paimon table this server writes at most this often after its commits "
                        "(docs/protocol.md, \"Table maintenance\")")
    s = p.add_argument_group("security (docs/protocol.md, \"Security\")")
    s.add_argument("--tls-cert", help="PEM certificate chain: serve grpc+tls:// (with --tls-key)")
    s.add_argument("--tls-key", help="PEM private key of --tls-cert")
    s.add_argument("--tls-client-ca", help="PEM CA: demand client certificates it signed (mTLS)")
    s.add_argument("--auth", help="JSON file of principals, sha256 of their bearer tokens, and grants per table pattern")
    s.add_argument("--insecure", action="store_true",
                   help="serve a non-loopback --host or --metrics-host without --auth (anyone who reaches the "
                        "port may do anything)")
    s = p.add_argument_group("limits")
    s.add_argument("--max-memory", type=_size,
                   help="bytes all push tables may hold, e.g. 2GiB (= 2gb: Paimon's sizes, 1024-based): register "
                        "reserves partitions x capacity_bytes (default capacity_bytes 64 MiB) and is refused past "
                        "it (unset: no byte bound)")
    s.add_argument("--max-streams", type=int, default=DEFAULT_MAX_STREAMS, help="do_get/do_put streams open at once")
    s.add_argument("--max-tables", type=int, default=DEFAULT_MAX_TABLES, help="push tables registered at once")
    s.add_argument("--max-partitions", type=int, default=DEFAULT_MAX_PARTITIONS,
                   help="partitions of all push tables together")

    def client_args(p):
        p.add_argument("--uri", default=os.environ.get("FLIGHT_PAIMON_URI", DEFAULT_URI),
                       help="server URI (environment: FLIGHT_PAIMON_URI)")
        p.add_argument("--timeout", type=float, default=30.0, help="seconds per unary call")
        p.add_argument("--token", help="bearer token of a server with --auth (environment: FLIGHT_PAIMON_TOKEN, "
                       "preferred: a command line is visible to other users)")
        p.add_argument("--tls-root-certs", default=os.environ.get("FLIGHT_PAIMON_TLS_ROOT_CERTS"),
                       help="PEM CA of a grpc+tls:// server's certificate (environment: FLIGHT_PAIMON_TLS_ROOT_CERTS)")
        p.add_argument("--tls-cert-chain", help="PEM client certificate, for a server that demands one (mTLS)")
        p.add_argument("--tls-private-key", help="PEM private key of --tls-cert-chain")

    p = command("register", "register a push table", cmd_register)
    p.add_argument("name", help="push table name")
    p.add_argument("--schema", required=True, help='columns, e.g. "id:int64!,name:string,ts:timestamp[us]" (! = not null)')
    p.add_argument("--capacity", type=int, default=16, help="batches a partition holds before producers wait")
    p.add_argument("--partitions", type=int, default=1, help="partitions (one endpoint each)")
    p.add_argument("--writers", type=int, default=1, help="producer streams per partition")
    p.add_argument("--end-marker", choices=["required", "optional"], default="required",
                   help="optional: a stream that half-closes without {\"end\": N} ends cleanly too "
                        "(unsafe: a crashed producer looks the same); for plain Flight clients")
    p.add_argument("--idle-timeout-s", type=float,
                   help="fail a partition whose producers send nothing for this many seconds (unset: never)")
    p.add_argument("--capacity-bytes", type=_size,
                   help="bytes a partition holds before producers wait, e.g. 64MiB (= 64mb: Paimon's sizes, "
                        "1024-based; unset: the server's default)")
    client_args(p)

    p = command("create", "create a Paimon table for durable writes (do_put into it, Client.paimon_sink)", cmd_create)
    p.add_argument("table", help="DB.TABLE (the database is created when missing)")
    p.add_argument("--schema", required=True, help='columns, e.g. "id:int64!,name:string,ts:timestamp[us]" (! = not null)')
    p.add_argument("--primary-key", action="append", help="primary key column(s), comma-separated or repeated")
    p.add_argument("--partition-by", action="append", help="partition column(s), comma-separated or repeated")
    p.add_argument("--buckets", type=int, help="fixed bucket count (default: Paimon's, -1: dynamic or unaware)")
    p.add_argument("--bucket-key", help="column(s) that pick an append table's bucket (needed with --buckets)")
    p.add_argument("--option", action="append", type=_option, help="a Paimon table option KEY=VALUE (repeatable)")
    client_args(p)

    p = command("drop", "drop a push table (its blocked writers and readers get an error) or a Paimon table "
                "(its data and snapshots are deleted)", cmd_drop)
    p.add_argument("name", metavar="TABLE", help="push:NAME (or just NAME), or DB.TABLE (or paimon:DB.TABLE), as "
                   "`list` prints it")
    client_args(p)

    p = command("tail", "print rows of push:NAME or of Paimon table DB.TABLE as they arrive", cmd_tail)
    p.add_argument("target", help="push:NAME, DB.TABLE or paimon:DB.TABLE, as `list` prints it")
    p.add_argument("--from", dest="start", default="latest",
                   help="Paimon: latest | latest-full | earliest | from-snapshot | from-snapshot-full (Spark's "
                        "scan.mode names; the last two with --snapshot-id); push: latest | earliest (the batches "
                        "the partition still holds)")
    p.add_argument("--snapshot-id", type=int, help="Paimon: the snapshot of --from from-snapshot[-full]")
    p.add_argument("--partition", type=int, help="push: view only this partition (default: all)")
    p.add_argument("--consumer-id", help="Paimon consumer id: resume where it stopped, commit after printing")
    p.add_argument("--poll-interval-ms", type=int, default=100, help="Paimon snapshot poll interval")
    p.add_argument("--format", choices=["table", "jsonl"], default="table", help="output format")
    p.add_argument("--limit", type=_count, help="stop after this many rows")
    client_args(p)

    def maintenance(name: str, text: str, func):
        p = command(name, text, func)
        p.add_argument("table", metavar="TABLE", help="DB.TABLE (or paimon:DB.TABLE)")
        return p

    p = maintenance("compact", "rewrite a Paimon append table's small files now, one file per bucket (Paimon's "
                    "compact procedure; the server also compacts the tables it writes, after their commits)",
                    cmd_compact)
    p.add_argument("--partition", action="append", type=_option, metavar="COL=VALUE",
                   help="only this partition (repeat for each partition column)")
    client_args(p)

    p = maintenance("expire-snapshots", "expire a Paimon table's old snapshots now and delete the files no kept "
                    "snapshot, tag or consumer needs (Paimon's expire_snapshots procedure)", cmd_expire_snapshots)
    p.add_argument("--retain-max", type=_count, help="keep at most this many snapshots (unset: the table's "
                   "snapshot.num-retained.max)")
    p.add_argument("--retain-min", type=_count, help="keep at least this many (unset: snapshot.num-retained.min)")
    p.add_argument("--older-than", type=_instant, metavar="TIME", help="expire snapshots committed before "
                   "TIME: '2026-11-24 12:00:00' (local time), ISO 8601, or epoch ms (unset: now - "
                   "snapshot.time-retained)")
    client_args(p)

    p = maintenance("remove-orphan-files", "delete a Paimon table's files that nothing kept names (left by "
                    "commits that never happened), as Paimon's remove_orphan_files", cmd_remove_orphan_files)
    p.add_argument("--older-than", type=_instant, metavar="TIME", help="only files last written before TIME, "
                   "as for expire-snapshots (unset: a day ago; at least 10 minutes ago)")
    client_args(p)

    p = maintenance("create-tag", "tag a Paimon snapshot (the latest unless --snapshot), as Paimon's create_tag "
                    "procedure: the tag keeps it from expiry, and reads take it as scan.tag-name", cmd_create_tag)
    p.add_argument("tag", help="the tag's name (letters, digits, _ . -; not all digits)")
    p.add_argument("--snapshot", type=_count, metavar="N", help="the snapshot id to tag (unset: the latest)")
    p.add_argument("--time-retained", metavar="DURATION", help="written into the tag as Paimon's time_retained, "
                   "e.g. '1 d' (Paimon's writers and expire_tags remove the tag after it; this server does not)")
    client_args(p)

    p = maintenance("delete-tag", "delete a Paimon tag, as Paimon's delete_tag procedure (its files only: what "
                    "only it kept goes with expiry or remove-orphan-files)", cmd_delete_tag)
    p.add_argument("tag", help="the tag's name, or several comma-separated")
    client_args(p)

    p = command("list", "list push tables and Paimon tables", cmd_list)
    p.add_argument("prefix", nargs="?", default="", help="only names that start with this")
    client_args(p)
    p = command("stats", "per push table and partition: state, reader, queue, rows; durable writes per Paimon table",
                cmd_stats)
    p.add_argument("name", nargs="?", help="one push table or DB.TABLE written through this server (default: all)")
    client_args(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    fp_logging.configure(args.log_level)
    where = f"flight_cli {args.command}"
    try:
        status = args.func(args)
        sys.stdout.flush()  # a closed pipe raises here, not in the flush at exit (exit code 120)
        return status
    except BrokenPipeError:
        # `flight_cli list | head -1`: the reader has all it wanted, which is no error. Point stdout
        # at /dev/null so the flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CliError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 2
    except flight.FlightUnavailableError as e:
        print(f"{where}: cannot reach a flight-paimon server at {getattr(args, 'uri', '?')}: is "
              f"`flight_cli serve` running there? ({error_message(e)}){connection_hint(e)}", file=sys.stderr)
        return 1
    except flight.FlightError as e:
        print(f"{where}: {error_message(e)}", file=sys.stderr)
        return 1
    except (KeyError, ValueError, pa.ArrowException) as e:
        print(f"{where}: {error_message(e)}", file=sys.stderr)
        return 2
