"""Compaction of append tables: a bucket's small files rewritten into one, committed as COMPACT.

Which files (`pick`), as Paimon's universal compaction picks sorted runs: once a bucket has
`compaction.min.file-num` files smaller than `target-file-size`, the newest ones are merged, as
many as leave min-file-num - 1 files, and the run grows towards older files while the next one
is no larger than the run so far (plus `compaction.size-ratio` percent), up to
`compaction.max.file-num` files. So a bucket fed a small file per commit holds fewer than
min-file-num small files after each compaction, and files of similar size merge: each byte is
rewritten about log2(its file's final size / a commit's) times, not once per compaction.

A compaction adds no rows and changes none: readers see the same table; deltas and follows skip
COMPACT snapshots. The files it replaced stay until snapshot expiry finds no retained snapshot,
tag or consumer that needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flight_server.maintenance.options import MaintenanceOptions
from flight_server.maintenance.store import LiveFile, TableStore
from flight_server.wire.errors import InvalidRequest


def pick(files: Sequence[LiveFile], opts: MaintenanceOptions) -> list[LiveFile]:
    """The files of one bucket to rewrite now (oldest first), or [] (see the module's docstring)."""
    small = [f for f in files if f.size < opts.target_file_size]
    if len(small) < opts.min_file_num:
        return []
    newest_first = small[::-1]
    count = min(len(small) - opts.min_file_num + 2, opts.max_file_num)
    run, total = newest_first[:count], sum(f.size for f in newest_first[:count])
    for f in newest_first[count:]:
        if len(run) >= opts.max_file_num or f.size * 100 > total * (100 + opts.size_ratio_percent):
            break
        run.append(f)
        total += f.size
    return run[::-1]


@dataclass
class CompactResult:
    """What one compaction of a table did."""

    snapshots: list[int]
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0

    def as_json(self) -> dict:
        return {"snapshots": self.snapshots, "files_in": self.files_in, "files_out": self.files_out,
                "bytes_in": self.bytes_in}


def compact(store: TableStore, opts: MaintenanceOptions, partition: dict | None = None,
            full: bool = False, commit_with=None) -> CompactResult:
    """Compact the buckets of the latest snapshot that need it (all small files of every bucket when
    `full`, as Paimon's `compact` procedure does by hand), one COMPACT commit per bucket.
    `commit_with(fn)` runs a commit where it cannot race this server's own (the table's committer)."""
    if store.table.primary_keys:
        raise InvalidRequest(f"Paimon table {store.name!r} has a primary key: this server compacts append tables "
                             "only (merge-tree compaction is not built yet); use Paimon's own `compact` procedure.")
    result = CompactResult([])
    groups = store.live_files(store.latest())
    keys = store.table.partition_keys
    for (values, _bucket), files in sorted(groups.items(), key=lambda kv: (tuple(map(str, kv[0][0])), kv[0][1])):
        if partition is not None and dict(zip(keys, map(str, values))) != partition:
            continue
        chosen = [f for f in files if f.size < opts.target_file_size] if full else pick(files, opts)
        if len(chosen) < 2:
            continue
        messages = store.rewrite(chosen)
        commit = lambda: store.commit_compact(messages, chosen)  # noqa: E731
        result.snapshots.append(commit() if commit_with is None else commit_with(commit))
        result.files_in += len(chosen)
        result.files_out += sum(len(m.new_files) for m in messages)
        result.bytes_in += sum(f.size for f in chosen)
    return result
