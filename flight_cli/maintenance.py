"""flight_cli compact, expire-snapshots, remove-orphan-files, create-tag, delete-tag: Paimon's
procedures of those names, with their arguments."""

from __future__ import annotations

import json

from flight_cli import targets
from flight_cli.args import CliError, instant_ms
from flight_cli.connect import client
from flight_server.wire import names


def paimon_table(text: str, command: str) -> str:
    kind, name = targets.parse(text, command)
    if kind == names.PUSH:
        raise CliError(f"{command} {text!r}: push tables live in memory and need no maintenance; name a "
                       "Paimon table DB.TABLE.")
    return name


def partitions(spec: str | None, one: list[tuple[str, str]] | None) -> list[dict] | None:
    """Paimon's `partitions` argument ('p=0;p=1', 'a=1,b=x;a=2,b=y') and --partition COL=VALUE pairs
    (one partition) as a list of {column: value}; None for every partition."""
    out = []
    for part in (spec or "").split(";"):
        if not part.strip():
            continue
        values = {}
        for pair in part.split(","):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise CliError(f"--partitions {spec!r}: {pair.strip()!r} is not COL=VALUE; write e.g. "
                               "'dt=2026-01-01;dt=2026-01-02' (';' between partitions, ',' between columns).")
            values[key.strip()] = value.strip()
        out.append(values)
    if one:
        out.append(dict(one))
    return out or None


def cmd_compact(args) -> int:
    name = paimon_table(args.table, "compact")
    print(json.dumps(client(args).compact(name, partitions=partitions(args.partitions, args.partition)).to_json()))
    return 0


def cmd_expire_snapshots(args) -> int:
    name = paimon_table(args.table, "expire-snapshots")
    older_than = instant_ms(args.older_than, "--older-than")
    print(json.dumps(client(args).expire_snapshots(name, args.retain_max, args.retain_min, older_than,
                                                   max_deletes=args.max_deletes).to_json()))
    return 0


def cmd_remove_orphan_files(args) -> int:
    name = paimon_table(args.table, "remove-orphan-files")
    older_than = instant_ms(args.older_than, "--older-than")
    print(json.dumps(client(args).remove_orphan_files(name, older_than, dry_run=args.dry_run).to_json()))
    return 0


def cmd_create_tag(args) -> int:
    name = paimon_table(args.table, "create-tag")
    print(json.dumps(client(args).create_tag(name, args.tag, args.snapshot, args.time_retained).to_json()))
    return 0


def cmd_delete_tag(args) -> int:
    name = paimon_table(args.table, "delete-tag")
    print(json.dumps({"deleted": client(args).delete_tag(name, args.tag)}))
    return 0
