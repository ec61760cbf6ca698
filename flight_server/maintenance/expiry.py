"""Snapshot expiry, as Java Paimon's ExpireSnapshotsImpl and SnapshotDeletion do it.

Which snapshots: the oldest ones beyond `snapshot.num-retained.max`, and older ones than
`snapshot.time-retained` beyond `snapshot.num-retained.min`, at most `snapshot.expire.limit` a
run; never one at or after a consumer's next snapshot (consumers not written to for
`consumer.expiration-time` are removed first, as Paimon's committer does), and never one the
named producers' record beside the snapshots does not cover yet (it is brought up to date first).

What is deleted, as Java's SnapshotDeletion does, one snapshot at a time from the oldest: for
each expired snapshot S (S + 1 the next, kept or expiring later)
1. the snapshot file of S (first: no listed snapshot ever names a file deleted below; the
   EARLIEST hint moves to `end` at the end of the run);
2. the data files S + 1 removed (its delta's DELETE entries): no snapshot from S + 1 on reads
   them, since a file once removed never comes back; a file the nearest earlier tag reads stays,
   and so does one S + 1 also added (a compaction that moved it to another level without
   rewriting it: Paimon's upgrade, the same file DELETEd at its old level and ADDed at the new);
3. the changelog files S added;
4. S's manifest lists and manifests that S + 1 (and so every later snapshot) and the tags do not name;
5. as Java's cleanUnusedIndexManifests and cleanUnusedStatisticsManifests: the index files S's
   index manifest lists (HASH buckets, deletion vectors, global indexes), then that index manifest,
   and S's statistics file, each unless S + 1 or a tag names it (an index file a later snapshot
   still reads is listed by S + 1's index manifest: a file once dropped from it never comes back).
A run cut off anywhere leaves no snapshot naming a deleted file; the next run starts by deleting
the data files its earliest snapshot removed (step 2 of the step cut off). Only the manifests,
index files and statistics of that one step can be left, unreferenced, for orphan removal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from flight_server.maintenance.options import MaintenanceOptions
from flight_server.maintenance.store import TableStore
from flight_server.wire.errors import InvalidRequest

log = structlog.get_logger(__name__)

DELETE = 1  # a manifest entry's kind


@dataclass
class ExpireResult:
    """What one expiry run did."""

    expired: int = 0
    first_kept: int | None = None
    files_deleted: int = 0
    consumers_removed: list[str] = field(default_factory=list)
    held_by_records: bool = False  # the named producers' records kept snapshots the rest would expire


def unsupported(opts: MaintenanceOptions) -> str | None:
    """Why this server does not expire a table's snapshots, or None."""
    if opts.changelog_retained:
        return (f"it keeps changelogs apart from its snapshots ({', '.join(opts.changelog_retained)}), which this "
                "server's expiry does not do")
    return None


def expire(store: TableStore, opts: MaintenanceOptions, now_ms: int, retain_max: int | None = None,
           retain_min: int | None = None, older_than_ms: int | None = None, covered_through=None,
           max_deletes: int | None = None) -> ExpireResult:
    """Expire what `opts` (or the given overrides, as the `expire_snapshots` action passes them) allow;
    at most `max_deletes` snapshots (Paimon's argument; unset: snapshot.expire.limit).
    `covered_through()` records what the snapshots say beside them (the named producers' seqs,
    ingest/seqs.py) and returns the snapshot the record covers: nothing after it is expired
    (`held_by_records` says whether that kept a snapshot the rest would have expired)."""
    reason = unsupported(opts)
    if reason is not None:
        raise InvalidRequest(f"expire_snapshots {store.name!r}: {reason}; run Paimon's own expire_snapshots "
                             "procedure (Spark or Flink).")
    result = ExpireResult()
    if opts.consumer_expiration_ms is not None:
        result.consumers_removed = store.expire_consumers(now_ms - opts.consumer_expiration_ms)
    latest = store.latest()
    earliest = store.earliest_id()
    if latest is None or earliest is None:
        return result
    given_max = retain_max
    retain_max = opts.retain_max if retain_max is None else retain_max
    retain_min = max(1, opts.retain_min if retain_min is None else retain_min)
    if retain_max < retain_min:
        raise InvalidRequest(
            f"expire_snapshots {store.name!r}: retain_max {retain_max} is below retain_min {retain_min}"
            f"{' (the table option snapshot.num-retained.min)' if given_max is not None else ''}; pass retain_min too.")
    older_than = now_ms - opts.time_retained_ms if older_than_ms is None else older_than_ms
    lowest = max(latest.id - retain_max + 1, earliest)  # below it: past num-retained.max, whatever its age
    end = min(latest.id - retain_min + 1, earliest + (opts.expire_limit if max_deletes is None else max_deletes))
    for sid in range(lowest, end):  # S expires once S + 1 is older than time-retained (Java's rule)
        nxt = store.snapshot(sid + 1)
        if nxt is not None and nxt.time_millis >= older_than:
            end = sid
            break
    consumers = store.consumers()  # last before deleting: another server's consumer commit is seen if it landed
    if consumers:
        end = min(end, min(consumers.values()))
    if end > earliest and covered_through is not None:
        covered = covered_through() + 1
        result.held_by_records = covered < end
        end = min(end, covered)
    result.first_kept = max(end, earliest)
    if end <= earliest:
        return result
    result.files_deleted, result.expired, done = _expire_until(store, earliest, end)
    if done < end:  # another server expired (or is expiring) from here on
        result.first_kept = store.earliest_id()
    log.info("snapshots_expired", table=store.name, begin=done - result.expired, end=done, files=result.files_deleted)
    return result


def _expire_until(store: TableStore, earliest: int, end: int) -> tuple[int, int, int]:
    """Expire the snapshots from the earliest one left up to `end`: (files deleted, snapshots
    expired, the first snapshot this run did not expire)."""
    begin = earliest
    for sid in range(end - 1, earliest - 1, -1):  # another server may be expiring the same range
        if store.snapshot(sid) is None:
            begin = sid + 1
            break
    tag_files: dict[int, set[str]] = {}
    snap = store.snapshot(begin)
    if snap is None:
        return 0, 0, begin
    # A run cut off after deleting the snapshot before `begin` left the files `begin` removed: finish.
    deleted = _delete_removed_by(store, snap, store.tagged_snapshots(), tag_files)
    done = begin
    for sid in range(begin, end):
        tags = store.tagged_snapshots()  # each step: a tag made meanwhile keeps its snapshot's files
        try:
            nxt = store.snapshot(sid + 1)
            # what sid + 1 still names (and so every later one), and what the tags name
            skip = None if nxt is None else _skipping_set(store, tags + [nxt])
        except FileNotFoundError:
            nxt = None
        if nxt is None:
            break  # expired meanwhile by another server, or gone: nothing kept depends on us here
        store.delete(store.snapshot_path(sid))  # first: no listed snapshot ever names a deleted file
        done = sid + 1
        deleted += _delete_removed_by(store, nxt, tags, tag_files)
        if snap.changelog_manifest_list:
            deleted += sum(_delete_all(store, store.data_paths(e))
                           for e in _entries(store, snap, changelog=True) if e.kind != DELETE)
        for list_name in store.manifest_lists(snap):
            if list_name not in skip:
                deleted += sum(_delete_all(store, [store.manifest_path(m)])
                               for m in _listed(store, list_name) if m not in skip)
                deleted += _delete_all(store, [store.manifest_path(list_name)])
        deleted += _delete_index_and_statistics(store, snap, skip)
        snap = nxt
    # Once, at the end, and only as far as this run deleted: a hint above a snapshot that still
    # exists would hide it from expiry; below the earliest one it is harmless (readers look on).
    if done > begin:
        store.write_earliest_hint(done)
    return deleted, done - begin, done


def _delete_removed_by(store: TableStore, snapshot, tags: list, tag_files: dict[int, set[str]]) -> int:
    """Delete the data files `snapshot` removed (its delta's DELETE entries): no snapshot from it on
    reads them, a file once removed never comes back; a file the nearest earlier tag reads stays,
    and so does one `snapshot` also added (upgraded to another level)."""
    earlier = [t for t in tags if t.id < snapshot.id]
    keep: set[str] = set()
    if earlier:
        tag = earlier[-1]
        if tag.id not in tag_files:
            tag_files[tag.id] = store.file_names(tag)
        keep = tag_files[tag.id]
    entries = _entries(store, snapshot)
    keep = keep | {e.file.file_name for e in entries if e.kind != DELETE}  # upgraded: still read at its new level
    return sum(_delete_all(store, store.data_paths(e)) for e in entries
               if e.kind == DELETE and e.file.file_name not in keep)


def _entries(store: TableStore, snapshot, changelog: bool = False) -> list:
    try:
        return store.delta_entries(snapshot, changelog)
    except FileNotFoundError:  # a run cut off after deleting its manifests: its files went before them
        return []


def _listed(store: TableStore, list_name: str) -> list[str]:
    try:
        return store.manifests_of_list(list_name)
    except FileNotFoundError:
        return []


def _skipping_set(store: TableStore, snapshots: list) -> set[str]:
    """The names `snapshots` keep, as Java's manifestSkippingSet: manifest lists and manifests,
    the index manifest and the index files it lists, and the statistics file."""
    names: set[str] = set()
    for snap in snapshots:
        for list_name in store.manifest_lists(snap):
            names.add(list_name)
            names.update(store.manifests_of_list(list_name))
        if snap.index_manifest:
            names.add(snap.index_manifest)
            names.update(name for name, _ in store.index_files(snap.index_manifest))
        if snap.statistics:
            names.add(snap.statistics)
    return names


def _delete_index_and_statistics(store: TableStore, snapshot, skip: set[str]) -> int:
    """Delete the index files of `snapshot`'s index manifest, the manifest, and its statistics file,
    each unless `skip` names it (a kept snapshot's index manifest is in it with all its files)."""
    deleted = 0
    if snapshot.index_manifest and snapshot.index_manifest not in skip:
        try:
            files = store.index_files(snapshot.index_manifest)
        except FileNotFoundError:  # a run cut off after deleting it: its files went before it
            files = []
        deleted += _delete_all(store, [path for name, path in files if name not in skip])
        deleted += _delete_all(store, [store.manifest_path(snapshot.index_manifest)])
    if snapshot.statistics and snapshot.statistics not in skip:
        deleted += _delete_all(store, [store.statistics_path(snapshot.statistics)])
    return deleted


def _delete_all(store: TableStore, paths: list[str]) -> int:
    return sum(1 for p in paths if store.delete(p))
