"""Compaction: a bucket's files rewritten into fewer, committed as COMPACT (adds no rows).

Append tables: a bucket's small files (below `compaction.small-file-ratio` of `target-file-size`,
as Java Paimon's append compaction: a rewrite's files roll a little under the target, and are not
rewritten again to grow a few percent) are rewritten by size tiers (`tier_pick`), so that each byte is
rewritten O(log(target / a commit's size)) times whatever the commit rate, never once a round:
- tiny files, below the part-file size (`target-file-size` / 16, 16 MiB by default), sit in tiers
  TIER_FANIN (16) times apart: [part / 16, part), [part / 256, part / 16), ... The files below a
  tier's bound merge once they add up to it (and are at least `compaction.min.file-num`), the
  lowest tier first. Their merge lands at or above the bound, so each merge lifts every byte in
  it by at least a tier: from a 20 KB commit to a 16 MiB part file, 3 rewrites. A bucket keeps
  fewer than about 16 files a tier while commits go on;
- part files, at least that large, cost a reader little more than their rows
  (docs/benchmarks_maintenance.md, "What part files cost a read"), and are left until the
  oldest of them add up to the target (at least min-file-num of them) or max-file-num gather, then
  rewritten once into target-size files, as Java Paimon's AppendOnlyCompactManager picked (a
  window that slides past a file too large to join min-file-num others under the target).
- once a table has been quiet (no commit for the maintainer's settle_s), `settle_pick` merges the
  smallest tiny files of each bucket until it holds at most one file per READ_FILE_BYTES (4 MiB) of
  data besides the first, within a budget of SETTLE_COST bytes per byte committed since the last
  settling merge (so a table that commits once per quiet spell is not rewritten whole each time):
  over Flight a file costs a full read about what 0.6 MB of rows do (docs/benchmarks_maintenance.md,
  "What maintenance costs per byte"), so a quiet table reads close to the same rows in one
  commit. It rewrites at most the bucket's tiny files (< the part size) once per quiet spell.

Primary-key tables: a bucket's sorted runs (each level-0 file, then each level above) merged as
Paimon's universal compaction picks them (`pick_runs`), into the level just below the next run
left out, or the top level when none is; a file that overlaps nothing is moved to the output
level without being rewritten, as Paimon's MergeTreeCompactTask does (kv_files.py merges).

A compaction adds no rows and changes none: readers see the same table; deltas and follows skip
COMPACT snapshots. The files it replaced stay until snapshot expiry finds no retained snapshot,
tag or consumer that needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from flight_server.maintenance import kv_files
from flight_server.maintenance.options import MaintenanceOptions
from flight_server.maintenance.store import LiveFile, TableStore
from flight_server.maintenance.workers import RewriteWorker

log = structlog.get_logger(__name__)


TIER_FANIN = 16  # tiers of tiny files are this many times apart in size (PART_FILES: parts to the target)
READ_FILE_BYTES = 4 << 20  # a quiet bucket keeps one file besides the first per this many bytes


def tier_pick(files: Sequence[LiveFile], opts: MaintenanceOptions) -> list[LiveFile]:
    """The files of one bucket to rewrite now (oldest first), or [] (see the module's docstring)."""
    small = [f for f in files if f.size < opts.compaction_file_size]
    run = _tier_run([f for f in small if f.size < opts.part_file_size], opts)
    return run or _oldest_parts([f for f in small if f.size >= opts.part_file_size], opts)


def tier_bounds(opts: MaintenanceOptions) -> list[int]:
    """The upper bounds of the tiny files' tiers, the lowest first: ..., part / 256, part / 16, part."""
    bounds, bound = [], opts.part_file_size
    while bound >= 1:
        bounds.append(bound)
        bound //= TIER_FANIN
    return bounds[::-1]


def _tier_run(tiny: list[LiveFile], opts: MaintenanceOptions) -> list[LiveFile]:
    """The tiny files below the lowest tier bound they add up to, once at least min-file-num (at
    most max-file-num: the largest), in the bucket's order; or []. The merge reaches the bound, so
    each of its bytes moves up at least a tier (pypaimon's append writers number their files from
    0 each, so tiers go by size, not by position)."""
    for bound in tier_bounds(opts):
        below = [f for f in tiny if f.size < bound]
        if len(below) >= max(2, opts.min_file_num) and sum(f.size for f in below) >= bound:
            if len(below) > opts.max_file_num:
                keep = {id(f) for f in sorted(below, key=lambda f: -f.size)[:opts.max_file_num]}
                below = [f for f in below if id(f) in keep]
            return below
    return []


SETTLE_COST = 4  # settling rewrites at most this many bytes per byte committed since its last merge


def settle_pick(files: Sequence[LiveFile], opts: MaintenanceOptions, budget: int) -> list[LiveFile]:
    """The smallest tiny files of a quiet bucket that, merged into one, leave it at most one file
    per READ_FILE_BYTES besides the first, as many as `budget` bytes allow (in the bucket's
    order), or []. The budget (SETTLE_COST x the bytes committed since the table's last settling
    merge) keeps a table that commits once per quiet spell from rewriting a growing file each time:
    its files then merge once the new ones are worth it, and settling adds at most SETTLE_COST
    rewrites per byte."""
    tiny = [f for f in files if f.size < opts.part_file_size]
    extra = len(files) - 1 - sum(f.size for f in files) // READ_FILE_BYTES
    if extra <= 0 or len(tiny) < 2:
        return []
    chosen: list[LiveFile] = []
    spent = 0
    for f in sorted(tiny, key=lambda f: f.size)[:min(len(tiny), extra + 1, opts.max_file_num)]:
        if spent + f.size > budget:
            break
        chosen.append(f)
        spent += f.size
    picked = {id(f) for f in chosen}
    return [f for f in tiny if id(f) in picked] if len(chosen) >= 2 else []


def _oldest_parts(parts: list[LiveFile], opts: MaintenanceOptions) -> list[LiveFile]:
    """The oldest part files that add up to target-file-size, at least min-file-num of them, or
    max-file-num of them, as Java Paimon's AppendOnlyCompactManager picked (a window that slides
    past a file too large to join min-file-num others under the target)."""
    window: list[LiveFile] = []
    total = 0
    for f in parts:
        window.append(f)
        total += f.size
        if (total >= opts.target_file_size and len(window) >= opts.min_file_num) or len(window) >= opts.max_file_num:
            return window
        while total >= opts.target_file_size and window:
            total -= window.pop(0).size
    return []


Run = tuple[int, list[LiveFile]]  # a sorted run: its level and files
Uncommitted = Callable[[dict[str, tuple[str, int]]], None]  # told a failed commit's files: name -> (path, size)


def sorted_runs(files: Sequence[LiveFile]) -> list[Run]:
    """A primary-key bucket's sorted runs, newest first: each level-0 file (the newest first, as
    Paimon's Levels orders them), then each non-empty level above."""
    level0 = sorted((f for f in files if f.level == 0), key=lambda f: (-f.max_seq, f.min_seq, f.name))
    runs: list[Run] = [(0, [f]) for f in level0]
    for level in sorted({f.level for f in files if f.level > 0}):
        runs.append((level, [f for f in files if f.level == level]))
    return runs


def _size(run: Run) -> int:
    return sum(f.size for f in run[1])


def pick_runs(runs: list[Run], opts: MaintenanceOptions, max_level: int) -> tuple[int, list[Run]] | None:
    """(output level, the newest runs to merge) as Paimon's UniversalCompaction.pick, or None: all
    runs when the newer ones together exceed `compaction.max-size-amplification-percent` of the
    oldest; else the newest runs of similar size (`compaction.size-ratio`); else, past
    `num-sorted-run.compaction-trigger` runs, enough of the newest to get back to it."""
    trigger = opts.sorted_run_trigger
    if len(runs) < trigger:
        return None
    if sum(map(_size, runs[:-1])) * 100 > opts.max_size_amp_percent * _size(runs[-1]):
        return max_level, runs
    unit = _pick_for_size_ratio(runs, opts, max_level, 1)
    if unit is None and len(runs) > trigger:
        unit = _pick_for_size_ratio(runs, opts, max_level, len(runs) - trigger + 1)
    return unit


def _pick_for_size_ratio(runs: list[Run], opts: MaintenanceOptions, max_level: int,
                         count: int) -> tuple[int, list[Run]] | None:
    size = sum(map(_size, runs[:count]))
    triggered = count > 1
    for level, files in runs[count:]:
        if size * (100 + opts.size_ratio_percent) / 100 < _size((level, files)) and (not triggered or level > 1):
            break
        size += _size((level, files))
        count += 1
        triggered = True
    if not triggered:
        return None
    # the output goes just below the first run left out, never to level 0 (Paimon's createUnit)
    level = max_level if count == len(runs) else max(0, runs[count][0] - 1)
    if level == 0:
        for next_level, _ in runs[count:]:
            count += 1
            if next_level != 0:
                level = next_level
                break
    return (max_level if count == len(runs) else level), runs[:count]


@dataclass
class CompactResult:
    """What one compaction of a table did."""

    snapshots: list[int]
    files_in: int = 0
    files_out: int = 0
    bytes_in: int = 0
    upgraded: int = 0  # primary-key files moved to another level without a rewrite


def compact(store: TableStore, opts: MaintenanceOptions, partition: dict | None = None,
            full: bool = False, commit_with: Callable[[Callable[[], int]], int] | None = None,
            uncommitted: Uncommitted | None = None, settle: int | None = None,
            worker: RewriteWorker | None = None) -> CompactResult:
    """Compact the buckets of the latest snapshot that need it (all small files of every bucket when
    `full`, as Paimon's `compact` procedure does by hand; a quiet append table's `settle_pick` with
    a budget of `settle` bytes, when given), one COMPACT commit per bucket.
    `commit_with(fn)` runs a commit where it cannot race this server's own (the table's committer).
    `uncommitted(files)` is told the files (name -> (path, size)) a commit that failed wrote: no
    snapshot names them, and only orphan removal deletes them. `worker` rewrites the files (in a
    worker process: workers.py); None: in this thread."""
    worker = worker or RewriteWorker(None, None, processes=0)
    rewriter = kv_files.KvRewriter(store.table, store.name) if store.table.primary_keys else None
    result = CompactResult([])
    groups = store.live_files(store.latest())
    keys = store.table.partition_keys
    for (values, _bucket), files in sorted(groups.items(), key=lambda kv: (tuple(map(str, kv[0][0])), kv[0][1])):
        if partition is not None and dict(zip(keys, map(str, values))) != partition:
            continue
        upgraded: list[LiveFile] = []  # moved to another level, not rewritten
        newer = max(f.entry.file.schema_id for f in files)
        if newer > store.table.table_schema.id:  # the schema changed since this round loaded the table
            log.info("compaction_deferred", table=store.name, schema_id=newer, reason="a newer schema: next round")
            continue
        if rewriter is not None and settle is not None:  # a merge tree's runs: universal compaction's
            continue
        if rewriter is not None:
            messages, chosen, upgraded = _merge_bucket(store, rewriter, files, opts, full, worker)
        else:
            if full:
                chosen = [f for f in files if f.size < opts.compaction_file_size]
            else:
                chosen = settle_pick(files, opts, settle) if settle is not None else tier_pick(files, opts)
            messages = worker.rewrite(store, chosen) if len(chosen) >= 2 else []
        if not messages:
            continue
        # A commit that fails leaves the new files unnamed by any snapshot: orphan removal takes them.
        commit = _committing(store, messages, chosen, uncommitted)
        result.snapshots.append(commit() if commit_with is None else commit_with(commit))
        result.files_in += len(chosen)
        result.files_out += sum(len(m.new_files) for m in messages) - len(upgraded)
        result.upgraded += len(upgraded)
        moved = {f.name for f in upgraded}
        result.bytes_in += sum(f.size for f in chosen if f.name not in moved)  # rewritten bytes (amplification)
    return result


def _committing(store: TableStore, messages: list, chosen: list[LiveFile],
                uncommitted: Uncommitted | None) -> Callable[[], int]:
    """The commit of one bucket's compaction, telling `uncommitted` what it wrote if it fails."""
    def commit() -> int:
        try:
            return store.commit_compact(messages, chosen)
        except Exception:
            if uncommitted is not None:
                uncommitted(store.written_files(messages, chosen))  # not the files it only moved
            raise
    return commit


def _merge_bucket(store: TableStore, rewriter: kv_files.KvRewriter, files: list[LiveFile], opts: MaintenanceOptions,
                  full: bool, worker: RewriteWorker) -> tuple[list, list[LiveFile], list[LiveFile]]:
    """One primary-key bucket's compaction, as Paimon's MergeTreeCompactTask does it: (commit
    messages, the files they replace, those of them only moved to another level)."""
    runs = sorted_runs(files)
    max_level = max(opts.num_levels or opts.sorted_run_trigger + 1, max(f.level for f in files) + 1) - 1
    if rewriter.level0_unread and runs[0][0] == 0:
        # A first-row table's reads skip level 0, and files above it must not repeat a key (Paimon
        # keeps that with lookups while compacting, not built here): everything to the top level.
        full = True
    if full:  # Paimon's pickFullCompaction: everything to the top level, unless it is there already
        done = len(runs) == 1 and runs[0][0] == max_level and (rewriter.keeps_deletes or all(f.deletes == 0 for f in files))
        unit = None if done else (max_level, runs)
    else:
        unit = pick_runs(runs, opts, max_level)
    if unit is None:
        return [], [], []
    level, chosen_runs = unit
    chosen = [f for _, run in chosen_runs for f in run]
    if len(chosen) == 1 and chosen[0].level == level:
        return [], [], []
    # Deletes can go once nothing older lies below the output (Paimon's dropDelete), unless a later
    # row may sort below them (kv_files.keeps_deletes).
    drop_delete = level != 0 and level >= max(f.level for f in files) and not rewriter.keeps_deletes
    small = opts.compaction_file_size
    rewrites: list[list[list[list[LiveFile]]]] = []  # groups of sections merged together
    upgrades: list[LiveFile] = []
    candidate: list = []

    def flush() -> None:
        if len(candidate) == 1 and len(candidate[0]) == 1:  # one run overlapping nothing: moved, not merged
            for f in candidate[0][0]:
                upgrade(f)
        elif candidate:
            rewrites.append(list(candidate))
        candidate.clear()

    def upgrade(f: LiveFile) -> None:
        if level == max_level and f.deletes != 0 and not rewriter.keeps_deletes:  # its deletes must go: rewritten alone
            rewrites.append([[[f]]])
        elif f.level != level:
            upgrades.append(f)

    for section in kv_files.sections(chosen):
        if len(section) > 1:
            candidate.append(section)
            continue
        for f in section[0]:
            if f.size < small:
                candidate.append([[f]])
            else:
                flush()
                upgrade(f)
    flush()
    messages = [worker.merge(store, group, level, drop_delete, rewriter) for group in rewrites]
    messages += [store.moved(f, level) for f in upgrades]
    replaced = [f for group in rewrites for section in group for run in section for f in run] + upgrades
    return messages, replaced, upgrades
