"""flight_cli register, create, drop and list: the commands that make, remove and name tables."""

from __future__ import annotations

import json

from flight_server.cli import targets
from flight_server.cli.args import CliError
from flight_server.cli.connect import client
from flight_server.wire import names
from flight_server.wire.actions import SchemaChange
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.type_spec import format_spec, format_type, parse_spec


def cmd_register(args) -> int:
    result = client(args).register(args.name, parse_spec(args.schema), capacity=args.capacity,
                                   partitions=args.partitions, writers=args.writers, end_marker=args.end_marker,
                                   idle_timeout_s=args.idle_timeout_s, capacity_bytes=args.capacity_bytes)
    print(json.dumps(result.to_json()))
    return 0


def _names(values: list[str] | None) -> list[str]:
    """Repeatable and comma-separated: `--primary-key a,b` or `--primary-key a --primary-key b`."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


def cmd_create(args) -> int:
    options = dict(args.option or [])
    if args.buckets is not None:
        options["bucket"] = str(args.buckets)
    if args.bucket_key:
        options["bucket-key"] = args.bucket_key
    result = client(args).create_table(args.table, parse_spec(args.schema), primary_keys=_names(args.primary_key),
                                       partition_keys=_names(args.partition_by), options=options)
    print(json.dumps(result.to_json()))
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
    c = client(args)
    for info in c.flight.list_flights(args.prefix.encode(), options=c.options()):
        path = targets.spelled([p.decode() for p in info.descriptor.path])  # as tail, stats and drop take it
        print(f"{path}\tendpoints={len(info.endpoints)}\t{format_spec(info.schema)}")  # as --schema takes it
    return 0
