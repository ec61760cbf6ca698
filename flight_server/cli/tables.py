"""flight_cli register, create, drop and list: the commands that make, remove and name tables."""

from __future__ import annotations

import json

from flight_server.cli import targets
from flight_server.cli.connect import client
from flight_server.wire import names
from flight_server.wire.type_spec import format_spec, parse_spec


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
