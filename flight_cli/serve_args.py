"""`flight_cli serve`'s flags (argparse only: building the parser imports no server code)."""

from __future__ import annotations

from flight_cli import args as a
from flight_server.limits import (  # no server imports
    DEFAULT_MAX_PARTITIONS,
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_TABLES,
)


def add_serve_arguments(p) -> None:
    p.add_argument("--config", metavar="FILE",
                   help="a TOML file of these settings: each flag's name without -- is a key (port = 8815, "
                        "metrics-port = 9464, commit-bytes = \"64MiB\", insecure = true, advertise = [...], a "
                        "[warehouse-option] table); a flag given here wins over its key (deploy/serve.toml)")
    p.add_argument("--warehouse", default="./warehouse", type=a.warehouse,
                   help="Paimon warehouse: a directory (created when missing), or an object store URI such as "
                        "s3://bucket/path")
    p.add_argument("--warehouse-option", action="append", type=a.option, metavar="KEY=VALUE",
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
    p.add_argument("--metrics-table-window", type=a.duration_or_off_ms, default="10 min",
                   help="/metrics has series with a table label only of tables active this recently (a stream moved "
                        "their batches, a group commit landed, their push partitions hold batches, a follow of them "
                        "is open or their maintenance did something); an idle table's go at the next scrape, the server-wide totals stay "
                        "(Paimon's durations: 10 min, 1 h; 0: no per-table series)")
    p.add_argument("--metrics-max-tables", type=a.count, default=1000,
                   help="per-table series of at most this many active tables, the first to be active; another "
                        "counts only in the totals and flight_paimon_metrics_omitted_tables (a warning names it) "
                        "until an idle table's place frees (0: no per-table series)")
    p.add_argument("--commit-interval-ms", type=int, default=100,
                   help="durable writes: commit the batches of a Paimon table's producers at most this often")
    p.add_argument("--commit-bytes", type=a.size, default="64MiB",
                   help="durable writes: commit sooner once this many bytes are written, e.g. 16MiB (sizes as "
                        "Paimon writes them: 16mb = 16m = 16MiB); producers wait while a quarter of it (4-16 MiB) "
                        "waits for a writer thread")
    p.add_argument("--write-threads", type=int,
                   help="durable writes: threads that encode an append table's (bucket -1) batches in parallel "
                        "(unset: half the CPU count, 1 to 8); a table with primary keys or fixed buckets takes one")
    p.add_argument("--write-pool-threads", type=int,
                   help="durable writes: the threads every table's writes run on (each table's writer pinned to "
                        "one), so threads do not grow with tables (default: the CPU count, 2 to 16; at least "
                        "--write-threads)")
    p.add_argument("--commit-threads", type=int,
                   help="durable writes: the threads that run every table's group commits, in the order the "
                        "tables' commits fell due: how many tables commit at once (default 4)")
    p.add_argument("--commit-processes", type=int, default=0,
                   help="durable writes: worker processes every table's Parquet writes and Paimon commits "
                        "(manifests, snapshots) run in, off the serving interpreter, which keeps the exactly-once "
                        "check (default 0: in the serving process; for machines with more cores than 2, where "
                        "the serving process's share of a commit caps it: docs/benchmarks_ingest.md)")
    p.add_argument("--table-idle-timeout", type=a.duration_ms, default="1 min",
                   help="durable writes: a table's committer (its writers and what they hold, its producer map) unused "
                        "this long is closed, so resources follow the active tables; its next stream opens a new "
                        "one, reading the producer map from the table (Paimon's durations: 30 s, 5 min)")
    p.add_argument("--max-open-tables", type=int, default=256,
                   help="durable writes: past this many tables' committers open, the least recently used of those "
                        "with nothing in flight close without waiting for --table-idle-timeout (default 256): fewer "
                        "open at once, less memory a burst of tables leaves behind")
    p.add_argument("--maintenance-interval-ms", type=int, default=1000,
                   help="compact and expire a Paimon table this server writes at most this often after its commits "
                        "(docs/protocol.md, \"Table maintenance\")")
    p.add_argument("--maintenance-workers", type=int, choices=(0, 1), default=1,
                   help="1: compactions rewrite files in a worker process, off the interpreter that serves; "
                        "0: on the server's maintenance thread")
    s = p.add_argument_group("security (docs/protocol.md, \"Security\")")
    s.add_argument("--tls-cert", help="PEM certificate chain: serve grpc+tls:// (with --tls-key)")
    s.add_argument("--tls-key", help="PEM private key of --tls-cert")
    s.add_argument("--tls-client-ca", help="PEM CA: demand client certificates it signed (mTLS)")
    s.add_argument("--auth", help="JSON file of principals, sha256 of their bearer tokens, and grants per table pattern")
    s.add_argument("--ticket-lifetime", type=a.duration_ms, default="1 d",
                   help="serve a ticket for this long after get_flight_info planned it (Paimon's durations: 12h, "
                        "30min); an older one is refused INVALID_ARGUMENT, and its reader plans again (a stream "
                        "open longer goes on). Servers sharing FLIGHT_PAIMON_TICKET_KEY check it with their clocks")
    s.add_argument("--insecure", action="store_true",
                   help="serve a non-loopback --host or --metrics-host without --auth (anyone who reaches the "
                        "port may do anything)")
    s = p.add_argument_group("limits")
    s.add_argument("--max-memory", type=a.size,
                   help="bytes all push tables may hold, e.g. 2GiB (= 2gb: Paimon's sizes, 1024-based): register "
                        "reserves partitions x capacity_bytes (default capacity_bytes 64 MiB) and is refused past "
                        "it (unset: no byte bound)")
    s.add_argument("--max-streams", type=int, default=DEFAULT_MAX_STREAMS, help="do_get/do_put streams open at once")
    s.add_argument("--max-tables", type=int, default=DEFAULT_MAX_TABLES, help="push tables registered at once")
    s.add_argument("--max-partitions", type=int, default=DEFAULT_MAX_PARTITIONS,
                   help="partitions of all push tables together")
