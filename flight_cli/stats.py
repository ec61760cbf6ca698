"""`flight_cli stats`: a push table's partitions, or a Paimon table read from the table; a
readable summary on a terminal, JSON otherwise (or with --format json)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys

from flight_cli import pages, targets
from flight_cli.connect import client
from flight_server.wire import names
from flight_server.wire.actions import (
    PaimonTableStats,
    PaimonWriteStats,
    PushTableStats,
    Stats,
)


def cmd_stats(args) -> int:
    c = client(args)
    if args.name is None or pages.is_pattern(args.name):
        result = selected(c.stats(), args.name or "*", args.limit, args.after)
    else:
        kind, name = targets.parse(args.name, "stats", bare_push=True)
        result = c.stats(name) if kind == names.PUSH else c.stats(table=name)
    fmt = args.format or ("text" if sys.stdout.isatty() else "json")
    print(json.dumps(result.to_json(), indent=2) if fmt == "json" else summary(result))
    return 0


def selected(result: Stats, pattern: str, limit: int | None, after: str | None) -> Stats:
    """The tables `pattern` matches, one page of them by name (as `list` prints them)."""
    kinds = {"push": names.PUSH, "paimon": names.PAIMON, "paimon_writes": names.PAIMON,
             "maintenance": names.PAIMON, "staged": names.PAIMON}
    spelled = {f"{kinds[part]}:{name}" for part in kinds for name in (getattr(result, part) or {})
               if pages.matches(pattern, kinds[part], name)}
    keep = set(pages.page(list(spelled), limit, after, "stats"))
    return dataclasses.replace(result, **{
        part: {name: v for name, v in value.items() if f"{kinds[part]}:{name}" in keep}
        for part in kinds if (value := getattr(result, part)) is not None})


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)


def _when(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="seconds")


def _paimon(name: str, t: PaimonTableStats) -> list[str]:
    keys = [f"primary key {', '.join(t.primary_keys)}"] if t.primary_keys else ["append table"]
    if t.partition_keys:
        keys.append(f"partitioned by {', '.join(t.partition_keys)}")
    lines = [f"paimon:{name} ({'; '.join(keys)})"]
    if t.latest_snapshot is None:
        lines.append("  no snapshot yet")
    else:
        lines += [f"  snapshots   {t.snapshots} kept ({t.earliest_snapshot}..{t.latest_snapshot}); the latest "
                  f"{t.latest_commit_kind} at {_when(t.latest_commit_ms)}",
                  f"  data        {t.records:,} records in {t.data_files:,} files, {_size(t.data_bytes)}; "
                  f"{t.partitions} partitions, {t.buckets} buckets"]
    tags = ", ".join(f"{tag} (snapshot {sid})" for tag, sid in t.tags.items())
    consumers = ", ".join(f"{cid} (next {nxt})" for cid, nxt in t.consumers.items())
    lines += [f"  tags        {tags or 'none'}", f"  consumers   {consumers or 'none'}"]
    return lines


def _push(name: str, t: PushTableStats) -> list[str]:
    lines = [f"push:{name} ({t.schema})"]
    for p, s in t.partitions.items():
        lines.append(f"  partition {p}: {s.state}, {s.rows_in:,} rows in, {s.rows_out:,} out, "
                     f"{s.queued_batches} batches queued ({_size(s.queued_bytes)}), reader {s.reader or 'none'}, "
                     f"{s.viewers} viewers{', error: ' + s.error if s.error else ''}")
    return lines


def _writes(name: str, w: PaimonWriteStats) -> list[str]:
    """A Paimon table's durable writes through this server, in words (`--format json`: every field)."""
    last = "none yet" if w.last_snapshot is None else f"the last at snapshot {w.last_snapshot}"
    producers = ", ".join(map(str, w.named_producers_writing)) or "no named producer"
    line = (f"writes into {name} (this server): {w.commits:,} group commits ({last}); {w.queued_batches} batches "
            f"queued ({_size(w.queued_bytes)}), {w.in_commit_batches} in the commit; {w.writers} writer threads; "
            f"{producers} writing")
    return [line + (f"; closed: {w.closed}" if w.closed else "")]


def summary(result: Stats) -> str:
    """Lines a person reads: each table, then this server's writes and maintenance of it."""
    lines = []
    for name, t in (result.paimon or {}).items():
        lines += _paimon(name, t)
    for name, t in (result.push or {}).items():
        lines += _push(name, t)
    for name, w in result.paimon_writes.items():
        lines += _writes(name, w)
    for name, m in result.maintenance.items():
        lines.append(f"maintenance of {name} (this server, since it started): {m.compactions} compactions, "
                     f"{m.expiries} expiries, {m.files_deleted} files deleted"
                     f"{', last error: ' + m.last_error if m.last_error else ''}")
    for name, stages in result.staged.items():
        lines.append(f"staged writes into {name}: {len(stages)} stages")
    return "\n".join(lines) or "no tables"
