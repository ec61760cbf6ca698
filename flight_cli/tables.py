"""flight_cli register, create, drop and list: the commands that make, remove and name tables."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import TYPE_CHECKING

from flight_cli import pages, targets
from flight_cli.args import CliError
from flight_cli.connect import client
from flight_server.wire import names
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.type_spec import format_spec, format_type, parse_spec

if TYPE_CHECKING:  # imported where used: `list` builds none of the actions' dataclasses
    from flight_server.wire.actions import SchemaChange


def cmd_register(args) -> int:
    result = client(args).register(args.name, parse_spec(args.schema), capacity=args.capacity,
                                   partitions=args.partitions, writers=args.writers, end_marker=args.end_marker,
                                   idle_timeout_s=args.idle_timeout_s, capacity_bytes=args.capacity_bytes)
    print(json.dumps(result.to_json()))
    return 0


def _names(values: list[str] | None) -> list[str]:
    """Repeatable and comma-separated: `--primary-key a,b` or `--primary-key a --primary-key b`."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


CREATE_FLAGS = ("schema", "primary_key", "partition_by", "buckets", "bucket_key", "option")


class _LineParser(argparse.ArgumentParser):
    """A --file line's parser: a mistake is a CliError naming the line, not argparse's exit."""

    def error(self, message):
        raise CliError(message)


def _line_parser() -> argparse.ArgumentParser:
    from flight_cli.parser import create_flags

    p = _LineParser(prog="a --file line", add_help=False)
    p.add_argument("table")
    create_flags(p)
    return p


def _file_lines(path: str) -> list[tuple[str, str]]:
    """(where, text) of each line that names a table: `FILE:N`."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read --file {path!r}: {getattr(e, 'strerror', None) or e}.") from None
    where = "stdin" if path == "-" else path
    return [(f"{where}:{n}", line) for n, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def _table(args, line: argparse.Namespace | None, where: str) -> dict:
    """One table's create_table arguments: a --file line's flags over the command line's."""
    flags = {k: getattr(args, k) for k in CREATE_FLAGS}
    if line is not None:
        flags.update({k: getattr(line, k) for k in CREATE_FLAGS if getattr(line, k) is not None})
        flags["option"] = (args.option or []) + (line.option or [])
    if flags["schema"] is None:
        raise CliError(f"{where}: --schema is required, e.g. --schema 'id:int64!,name:string' (on the command "
                       "line for every table, or on the line).")
    try:
        schema = parse_spec(flags["schema"])
    except InvalidRequest as e:
        raise CliError(f"{where}: --schema {flags['schema']!r}: {e}") from None
    options = dict(flags["option"] or [])
    if flags["buckets"] is not None:
        options["bucket"] = str(flags["buckets"])
    if flags["bucket_key"]:
        options["bucket-key"] = flags["bucket_key"]
    return {"schema": schema, "primary_keys": _names(flags["primary_key"]),
            "partition_keys": _names(flags["partition_by"]), "options": options}


def _paimon_name(text: str, where: str) -> str:
    """DB.TABLE (or paimon:DB.TABLE) as the server checks it, here before any table is created."""
    if text.startswith(names.PUSH + ":"):
        raise CliError(f"{where} {text!r}: create makes Paimon tables (DB.TABLE); a push table is made with "
                       "`flight_cli register`.")
    from flight_server.wire.requests import table_name

    name = text.removeprefix(names.PAIMON + ":")
    try:
        return table_name(name, where)
    except InvalidRequest as e:
        raise CliError(str(e)) from None


def creations(args) -> list[tuple[str, dict]]:
    """Every table to create and its arguments, all checked before any is created."""
    out = [(_paimon_name(t, "create"), _table(args, None, t)) for t in args.table]
    if args.file is not None:
        parser = _line_parser()
        for where, text in _file_lines(args.file):
            try:
                line = parser.parse_args(shlex.split(text, comments=True))
            except (CliError, ValueError) as e:
                raise CliError(f"{where}: {e}") from None
            out.append((_paimon_name(line.table, where), _table(args, line, where)))
    if not out:
        raise CliError("create needs a table: DB.TABLE (several take the same flags), or --file FILE.")
    seen = set()
    for name, _ in out:
        if name in seen:
            raise CliError(f"create names {name} twice; nothing was created.")
        seen.add(name)
    return out


def cmd_create(args) -> int:
    tables = creations(args)
    c = client(args)
    for done, (name, spec) in enumerate(tables):
        try:
            result = c.create_table(name, **spec)
        except Exception:  # noqa: BLE001 - re-raised: main says why; this says how far it got
            if len(tables) > 1:
                print(f"flight_cli create: {done} of {len(tables)} tables created; {name} failed, the rest were "
                      "not tried", file=sys.stderr)
            raise
        print(json.dumps(result.to_json()), flush=len(tables) > 1)
    return 0


def _column(text: str, flag: str) -> tuple[str, str]:
    """NAME:TYPE as --schema takes a column (a name with , or : in backquotes; ! = NOT NULL): the
    name and the type as the wire takes it."""
    try:
        schema = parse_spec(text)
    except InvalidRequest as e:
        raise CliError(f"{flag} {text!r}: {e}") from None
    if len(schema) != 1:
        raise CliError(f"{flag} {text!r} names {len(schema)} columns; give one NAME:TYPE per flag.")
    f = schema.field(0)
    return f.name, format_type(f.type) + ("" if f.nullable else "!")


def alter_changes(flags: list[tuple[str, list[str]]]) -> list[SchemaChange]:
    """`alter`'s flags, in order, as Paimon's schema changes (--after and --first go with the
    --add-column before them)."""
    from flight_server.wire.actions import SchemaChange

    out: list[SchemaChange] = []
    for flag, values in flags:
        if flag in ("--after", "--first"):
            last = out[-1] if out else None
            if last is None or last.change != names.ADD_COLUMN or last.after is not None or last.first:
                raise CliError(f"{flag} goes right after the --add-column it places, e.g. "
                               "--add-column email:string --after name (once per column).")
            out[-1] = SchemaChange.add_column(last.column, last.type, last.comment, after=values[0] if values else None,
                                              first=flag == "--first")
        elif flag == "--add-column":
            out.append(SchemaChange.add_column(*_column(values[0], flag)))
        elif flag == "--rename-column":
            out.append(SchemaChange.rename_column(*values))
        elif flag == "--drop-column":
            out.append(SchemaChange.drop_column(values[0]))
        elif flag == "--update-type":
            out.append(SchemaChange.update_column_type(*_column(values[0], flag)))
        elif flag in ("--nullable", "--not-null"):
            out.append(SchemaChange.update_column_nullability(values[0], flag == "--nullable"))
        elif flag == "--comment":
            out.append(SchemaChange.update_column_comment(*values))
        elif flag == "--set":
            key, sep, value = values[0].partition("=")
            if not sep or not key:
                raise CliError(f"--set {values[0]!r} is not KEY=VALUE, e.g. snapshot.time-retained=2h.")
            out.append(SchemaChange.set_option(key, value))
        elif flag == "--remove":
            out.append(SchemaChange.remove_option(values[0]))
    if not out:
        raise CliError("alter needs at least one change, e.g. --add-column email:string (flight_cli alter --help "
                       "lists them).")
    return out


def cmd_alter(args) -> int:
    kind, name = targets.parse(args.table, "alter")
    if kind == names.PUSH:
        raise CliError(f"alter {args.table!r}: a push table keeps the schema it was registered with; name a "
                       "Paimon table DB.TABLE.")
    changes = alter_changes(args.changes or [])
    print(json.dumps(client(args).alter_table(name, changes).to_json()))
    return 0


def cmd_drop(args) -> int:
    kind, name = targets.parse(args.name, "drop", bare_push=True)
    c = client(args)
    if kind == names.PUSH:
        c.drop(name)
    else:
        c.drop_table(name)
    print(json.dumps({"dropped": args.name}))
    return 0


def cmd_list(args) -> int:
    """The server lists a page (--limit, --after) by name and plans only its tables; a pattern
    filters here what the server's prefix let through, asking for more pages until one is full."""
    from flight_server.wire.listing import ListQuery

    c = client(args)
    pattern = args.prefix if pages.is_pattern(args.prefix) else args.prefix + "*"
    want = None if args.limit is None else args.limit + 1  # one more than shown: is there a next page?
    found, after = {}, args.after
    while True:
        query = ListQuery(pages.server_prefix(pattern), after, want)
        listed = {targets.spelled([p.decode() for p in info.descriptor.path]): info  # as tail, stats and drop take it
                  for info in c.flight.list_flights(query.criteria(), options=c.options())}
        found.update((name, info) for name, info in listed.items()
                     if pages.matches(pattern, *name.split(":", 1)))
        if want is None or len(found) >= want or len(listed) < want:
            break
        after = max(listed)
    for name in pages.page(list(found), args.limit, args.after, "list", total=False):
        info = found[name]
        print(f"{name}\tendpoints={len(info.endpoints)}\t{format_spec(info.schema)}")  # as --schema takes it
    return 0
