"""flight_cli's command line: every command, its flags, its help and an example.

Commands are named as "module:function" and imported only once chosen, so a client command
loads the client and the wire, never pypaimon or the server. flight_cli builds the flags of the
command it runs only (`command_in`): argparse made every command's flags in ~10 ms of CPU.
"""

from __future__ import annotations

import argparse
import os

from flight_cli import args as a
from flight_cli.args import HELP, examples
from flight_cli.serve_args import add_serve_arguments

LOG_LEVELS = ("debug", "info", "warning", "error")
TAIL_STARTS = ("default", "latest", "latest-full", "full", "earliest", "from-snapshot", "from-snapshot-full",
               "from-timestamp")  # Paimon's scan.mode names (`full`: its older name of latest-full)

_URI = os.environ.get("FLIGHT_PAIMON_URI", a.DEFAULT_URI)


def create_flags(p) -> None:
    """A Paimon table's flags, as `create` takes them and each line of its --file."""
    p.add_argument("--schema", help="columns, e.g. 'id:int64!,name:string,ts:timestamp[us]' (! = not null), or the "
                   "columns `list` prints (required: here or on each --file line)")
    p.add_argument("--primary-key", action="append", help="primary key column(s), comma-separated or repeated")
    p.add_argument("--partition-by", action="append", help="partition column(s), comma-separated or repeated")
    p.add_argument("--buckets", type=int, help="fixed bucket count (default: Paimon's, -1: dynamic or unaware)")
    p.add_argument("--bucket-key", help="column(s) that pick an append table's bucket (needed with --buckets)")
    p.add_argument("--option", action="append", type=a.option, help="a Paimon table option KEY=VALUE (repeatable)")


def page_flags(p) -> None:
    """`list` and `stats`: a page of the tables, by name."""
    p.add_argument("--limit", type=a.count, metavar="N", help="at most N tables (the first by name); stderr says "
                   "how to ask for the next page")
    p.add_argument("--after", metavar="NAME", help="only tables after NAME (as printed: the last of the previous page)")


class _Change(argparse.Action):
    """`alter`'s change flags, kept in the order given (one list, `changes`: (flag, values))."""

    def __call__(self, parser, namespace, values, option_string=None):
        changes = list(getattr(namespace, self.dest) or [])
        changes.append((self.option_strings[0], values if isinstance(values, list) else [values]))
        setattr(namespace, self.dest, changes)


def _client_args(p) -> None:
    p.add_argument("--uri", default=_URI, help="server URI: grpc://HOST:PORT, or grpc+tls://HOST:PORT "
                   "(environment: FLIGHT_PAIMON_URI)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per unary call")
    p.add_argument("--token", help="bearer token of a server with --auth (environment: FLIGHT_PAIMON_TOKEN, "
                   "preferred: a command line is visible to other users)")
    p.add_argument("--tls-root-certs", default=os.environ.get("FLIGHT_PAIMON_TLS_ROOT_CERTS"),
                   help="PEM CA of a grpc+tls:// server's certificate (environment: FLIGHT_PAIMON_TLS_ROOT_CERTS)")
    p.add_argument("--tls-cert-chain", help="PEM client certificate, for a server that demands one (mTLS)")
    p.add_argument("--tls-private-key", help="PEM private key of --tls-cert-chain")


class _NotBuilt:
    """A command `build_parser` was told is not run: its flags are not made."""

    def add_argument(self, *args, **kwargs) -> None:
        pass

    def add_argument_group(self, *args, **kwargs) -> _NotBuilt:
        return self


def command_in(argv: list[str]) -> str | None:
    """The command an argument list runs (its first word that is no global flag or flag value),
    None when there is none or it is no command (the whole parser then says what there is)."""
    words = iter(argv)
    for word in words:
        if word in ("--uri", "--log-level"):
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """flight_cli's parser; with `only`, a command, the other commands are left out."""
    parser = argparse.ArgumentParser(
        prog="flight_cli", formatter_class=HELP,
        description="flight-paimon: push tables and Paimon tables over Arrow Flight. Table names as `list` prints "
                    "them: push:NAME, paimon:DB.TABLE (or DB.TABLE).",
        epilog=a.EXIT_CODES + "\n\n" + examples("flight_cli serve --warehouse ./warehouse",
                                                "flight_cli list", "flight_cli tail db.orders -e"))
    parser.add_argument("--version", action="store_true",
                        help="print flight_cli's version; with --uri also the server's (its health action)")
    parser.add_argument("--uri", dest="version_uri", metavar="URI", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="log level, on stderr")
    # Also after the command (`flight_cli list --log-level debug`); SUPPRESS keeps the global value.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", choices=LOG_LEVELS, default=argparse.SUPPRESS, help="log level, on stderr")
    # Not required: `flight_cli --version` runs none (main says a command is needed otherwise).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, text: str, func: str, *example: str, client: bool = True):
        if only is not None and name != only:
            return _NotBuilt()
        p = sub.add_parser(name, help=text, description=text, parents=[common], formatter_class=HELP,
                           epilog=examples(*example) + ("\n\n" + a.EXIT_CODES if client else ""))
        p.set_defaults(func=func)
        return p

    p = command("serve", "run the server (FLIGHT_PAIMON_TICKET_KEY: the ticket key servers of one warehouse share)",
                "flight_cli.serve:cmd_serve", "flight_cli serve --warehouse ./warehouse --port 8815",
                "flight_cli serve --warehouse s3://bucket/wh --warehouse-option s3.endpoint=http://minio:9000 "
                "--metrics-port 9464", client=False)
    add_serve_arguments(p)

    tables = "flight_cli.tables"
    p = command("register", "register a push table", f"{tables}:cmd_register",
                "flight_cli register orders --schema 'id:int64!,name:string,ts:timestamp[us]' --partitions 2")
    p.add_argument("name", help="push table name")
    p.add_argument("--schema", required=True, help="columns, e.g. 'id:int64!,name:string,ts:timestamp[us]' (! = not "
                   "null), or the columns `list` prints")
    p.add_argument("--capacity", type=int, default=16, help="batches a partition holds before producers wait")
    p.add_argument("--partitions", type=int, default=1, help="partitions (one endpoint each)")
    p.add_argument("--writers", type=int, default=1, help="producer streams per partition")
    p.add_argument("--end-marker", choices=["required", "optional"], default="required",
                   help="optional: a stream that half-closes without {\"end\": N} ends cleanly too "
                        "(unsafe: a crashed producer looks the same); for plain Flight clients")
    p.add_argument("--idle-timeout-s", type=float,
                   help="fail a partition whose producers send nothing for this many seconds (unset: never)")
    p.add_argument("--capacity-bytes", type=a.size,
                   help="bytes a partition holds before producers wait, e.g. 64MiB (= 64mb: Paimon's sizes, "
                        "1024-based; unset: the server's default)")
    _client_args(p)

    p = command("create", "create Paimon tables for durable writes (do_put into them, Client.paimon_sink): one, "
                "several with the same flags, or a file of them, in one call each over one connection; every line "
                "is checked before any table is created", f"{tables}:cmd_create",
                "flight_cli create db.orders --schema 'id:int64!,region:string,amount:double' "
                "--primary-key id,region --partition-by region --buckets 2",
                "flight_cli create db.t1 db.t2 db.t3 --schema 'id:int64,v:double'",
                "flight_cli create --file tables.txt --schema 'id:int64,v:double'   # a line: db.t4 [--primary-key id]")
    p.add_argument("table", nargs="*", help="DB.TABLE (the database is created when missing); several take the same "
                   "flags")
    p.add_argument("--file", metavar="FILE", help="tables to create, one a line as this command takes them "
                   "(DB.TABLE --schema ... --primary-key ...; # comments, blank lines); the command line's flags are "
                   "each line's defaults (--option merges); - reads standard input")
    create_flags(p)
    _client_args(p)

    p = command("alter", "change a Paimon table's schema, as Paimon's ALTER TABLE: the flags apply in the order "
                "given, as one new schema or not at all (a refusal gives Paimon's reason); types as --schema takes "
                "them", f"{tables}:cmd_alter",
                "flight_cli alter db.orders --add-column email:string --after name",
                "flight_cli alter db.orders --add-column note:string --first",
                "flight_cli alter db.orders --rename-column name customer",
                "flight_cli alter db.orders --drop-column note",
                "flight_cli alter db.orders --update-type amount:decimal(12,2)      # widening only",
                "flight_cli alter db.orders --nullable region",
                "flight_cli alter db.orders --not-null email      # with 'alter-column-null-to-not-null.disabled'=false",
                "flight_cli alter db.orders --comment email 'where receipts go'",
                "flight_cli alter db.orders --set snapshot.time-retained=2h",
                "flight_cli alter db.orders --remove snapshot.time-retained",
                "flight_cli alter db.orders --add-column email:string --set snapshot.num-retained.max=500   # one change")
    p.add_argument("table", metavar="TABLE", help="DB.TABLE (or paimon:DB.TABLE)")
    change = {"dest": "changes", "action": _Change}
    p.add_argument("--add-column", metavar="NAME:TYPE", **change,
                   help="add a nullable column at the end (or --after COL, --first), e.g. email:string")
    p.add_argument("--after", metavar="COL", **change, help="with --add-column: put it after column COL")
    p.add_argument("--first", nargs=0, **change, help="with --add-column: put it first")
    p.add_argument("--rename-column", nargs=2, metavar=("OLD", "NEW"), **change, help="rename a column")
    p.add_argument("--drop-column", metavar="NAME", **change, help="drop a column (not a key)")
    p.add_argument("--update-type", metavar="NAME:TYPE", **change,
                   help="widen a column's type (int32 to int64, decimal(10,2) to decimal(12,2)); it keeps its "
                        "nullability unless TYPE ends with ! (NOT NULL)")
    p.add_argument("--nullable", metavar="NAME", **change, help="make a column nullable")
    p.add_argument("--not-null", metavar="NAME", **change, help="make a column NOT NULL (Paimon refuses it unless "
                   "the table sets 'alter-column-null-to-not-null.disabled'=false)")
    p.add_argument("--comment", nargs=2, metavar=("NAME", "TEXT"), **change, help="set a column's comment")
    p.add_argument("--set", metavar="KEY=VALUE", **change, help="set a Paimon table option")
    p.add_argument("--remove", metavar="KEY", **change, help="remove a Paimon table option (back to its default)")
    _client_args(p)

    p = command("drop", "drop a push table (its blocked writers and readers get an error) or a Paimon table "
                "(its data and snapshots are deleted)", f"{tables}:cmd_drop", "flight_cli drop push:orders",
                "flight_cli drop db.orders")
    p.add_argument("name", metavar="TABLE", help="push:NAME (or just NAME), or DB.TABLE (or paimon:DB.TABLE), as "
                   "`list` prints it")
    _client_args(p)

    p = command("tail", "print rows of push:NAME or of Paimon table DB.TABLE as they arrive (as kcat -C)",
                "flight_cli.tail:cmd_tail", "flight_cli tail db.orders --from earliest -e",
                "flight_cli tail db.orders --from from-timestamp --timestamp 1h --format jsonl | jq .id",
                "flight_cli tail push:orders --from earliest --limit 10")
    p.add_argument("target", help="push:NAME, DB.TABLE or paimon:DB.TABLE, as `list` prints it; DB.TABLE$audit_log: "
                   "every change with a leading rowkind column (+I, -U, +U, -D), as Paimon's system table")
    p.add_argument("--from", dest="start", metavar="MODE",
                   help="Paimon: a scan.mode name, as Paimon and the Spark source take them: latest-full, latest, "
                        "earliest, from-snapshot, from-snapshot-full, from-timestamp (unset: Paimon's default, "
                        "from-timestamp with --timestamp, from-snapshot with --snapshot-id, else latest-full); push: "
                        "latest (unset: latest) or earliest (the batches the partition still holds)")
    p.add_argument("--snapshot-id", type=int, help="Paimon: the snapshot of --from from-snapshot[-full]")
    p.add_argument("--timestamp", metavar="TIME",
                   help="Paimon: the start of --from from-timestamp: epoch ms, '2026-11-24 12:00:00' (local time), "
                        "ISO 8601, or a duration ago such as 1h or 7d")
    p.add_argument("-e", "--exit", action="store_true",
                   help="exit once every row there was at the start has been printed (kcat -e)")
    p.add_argument("--partition", type=int, help="push: view only this partition (default: all)")
    p.add_argument("--consumer-id", help="Paimon consumer id: resume where it stopped, commit after printing")
    p.add_argument("--poll-interval-ms", type=int, default=100, help="Paimon snapshot poll interval")
    p.add_argument("--format", choices=["table", "jsonl"], default="table", help="output format")
    p.add_argument("--limit", type=a.count, help="stop after this many rows (kcat -c)")
    p.add_argument("--reconnect-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="when the server goes away (a restart), reconnect within this long and resume where tail "
                        "was (0: end at once, exit code 1)")
    _client_args(p)

    maint = "flight_cli.maintenance"

    def maintenance(name: str, text: str, func: str, *example: str):
        p = command(name, text, f"{maint}:{func}", *example)
        p.add_argument("table", metavar="TABLE", help="DB.TABLE (or paimon:DB.TABLE)")
        return p

    p = maintenance("compact", "compact a Paimon table now, as Paimon's compact procedure: an append table's small "
                    "files become one per bucket; a primary-key table's sorted runs are merged into one (the "
                    "server also compacts the tables it writes, after their commits)", "cmd_compact",
                    "flight_cli compact db.orders", "flight_cli compact db.orders --partitions 'dt=2026-01-01;dt=2026-01-02'")
    p.add_argument("--partitions", metavar="SPEC", help="only these partitions, as Paimon's procedure takes them: "
                   "'p=0;p=1', or 'a=1,b=x;a=2,b=y' for two partition columns")
    p.add_argument("--partition", action="append", type=a.option, metavar="COL=VALUE",
                   help="one partition (repeat for each partition column); --partitions takes several")
    _client_args(p)

    p = maintenance("expire-snapshots", "expire a Paimon table's old snapshots now and delete the files no kept "
                    "snapshot, tag or consumer needs (Paimon's expire_snapshots procedure)", "cmd_expire_snapshots",
                    "flight_cli expire-snapshots db.orders --retain-max 10 --older-than 7d --max-deletes 100")
    p.add_argument("--retain-max", type=a.count, help="keep at most this many snapshots (unset: the table's "
                   "snapshot.num-retained.max)")
    p.add_argument("--retain-min", type=a.count, help="keep at least this many (unset: snapshot.num-retained.min)")
    p.add_argument("--older-than", metavar="TIME", help="expire snapshots committed before TIME: "
                   "a duration ago (7d, 1h, 30min), '2026-11-24 12:00:00' (local time), ISO 8601, or epoch ms "
                   "(unset: now - snapshot.time-retained)")
    p.add_argument("--max-deletes", type=a.count, metavar="N", help="expire at most N snapshots in this call "
                   "(unset: the table's snapshot.expire.limit)")
    _client_args(p)

    p = maintenance("remove-orphan-files", "delete a Paimon table's files that nothing kept names (left by "
                    "commits that never happened), as Paimon's remove_orphan_files", "cmd_remove_orphan_files",
                    "flight_cli remove-orphan-files db.orders --older-than 2d --dry-run")
    p.add_argument("--older-than", metavar="TIME", help="only files last written before TIME, "
                   "as for expire-snapshots (unset: a day ago; at least 10 minutes ago)")
    p.add_argument("--dry-run", action="store_true", help="list the files it would delete, and delete none")
    _client_args(p)

    p = maintenance("create-tag", "tag a Paimon snapshot (the latest unless --snapshot), as Paimon's create_tag "
                    "procedure: the tag keeps it from expiry, and reads take it as scan.tag-name", "cmd_create_tag",
                    "flight_cli create-tag db.orders nightly-2026-01-01 --time-retained 7d")
    p.add_argument("tag", help="the tag's name (letters, digits, _ . -; not all digits)")
    p.add_argument("--snapshot", type=a.count, metavar="N", help="the snapshot id to tag (unset: the latest)")
    p.add_argument("--time-retained", metavar="DURATION", help="written into the tag as Paimon's time_retained, "
                   "e.g. '1 d' (Paimon's writers and expire_tags remove the tag after it; this server does not)")
    _client_args(p)

    p = maintenance("delete-tag", "delete a Paimon tag, as Paimon's delete_tag procedure (its files only: what "
                    "only it kept goes with expiry or remove-orphan-files)", "cmd_delete_tag",
                    "flight_cli delete-tag db.orders nightly-2026-01-01,nightly-2026-01-02")
    p.add_argument("tag", help="the tag's name, or several comma-separated")
    _client_args(p)

    p = command("list", "list push tables and Paimon tables, sorted by name: NAME, endpoints, columns (as --schema "
                "takes them)", f"{tables}:cmd_list", "flight_cli list", "flight_cli list db.",
                "flight_cli list 'db.orders_*' --limit 50", "flight_cli list db. --limit 50 --after paimon:db.t049")
    p.add_argument("prefix", nargs="?", default="", metavar="PATTERN",
                   help="only names that start with this (the server looks no further), or a shell pattern "
                        "(* ? [...]) the whole name matches: 'db.orders_*', 'push:*'")
    page_flags(p)
    _client_args(p)
    p = command("stats", "a push table's partitions (state, reader, queue, rows), or a Paimon table's snapshots, "
                "files, tags and consumers and what this server did to it; all push tables and this server's "
                "Paimon writes without a name", "flight_cli.stats:cmd_stats", "flight_cli stats db.orders",
                "flight_cli stats push:orders --format json")
    p.add_argument("name", nargs="?", metavar="TABLE", help="push:NAME (or NAME), or DB.TABLE (or paimon:DB.TABLE), "
                   "as `list` prints it (unset: every push table and this server's Paimon writes); a shell pattern "
                   "(* ? [...]: 'db.t1*', 'push:*') keeps those tables of the unset case")
    p.add_argument("--format", choices=["text", "json"], help="output format (unset: text on a terminal, else json)")
    page_flags(p)
    _client_args(p)
    parser.command_parsers = sub.choices  # each command's parser, by name (serve --config reads serve's flags)
    return parser


# Every command build_parser makes (tests/test_cli_startup.py keeps the two the same).
COMMANDS = ("serve", "register", "create", "alter", "drop", "tail", "compact", "expire-snapshots",
            "remove-orphan-files", "create-tag", "delete-tag", "list", "stats")
