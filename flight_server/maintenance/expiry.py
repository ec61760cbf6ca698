"""Snapshot expiry, as Java Paimon's ExpireSnapshotsImpl and SnapshotDeletion do it.

Which snapshots: the oldest ones beyond `snapshot.num-retained.max`, and older ones than
`snapshot.time-retained` beyond `snapshot.num-retained.min`, at most `snapshot.expire.limit` a
run; never one at or after a consumer's next snapshot (consumers not written to for
`consumer.expiration-time` are removed first, as Paimon's committer does).

What is deleted, for the expired range [begin, end) (`end` the first snapshot kept):
1. data files that a snapshot in (begin, end] removed (its delta's DELETE entries): no snapshot at
   or after `end` reads them, since a file once removed never comes back; a file the nearest
   earlier tag reads is kept;
2. the changelog files the expired snapshots added;
3. their manifest lists and manifests, unless snapshot `end` or a tag names them;
4. the snapshot files, oldest first, then the EARLIEST hint.
In that order, as Paimon's: a run cut off anywhere leaves the expired snapshots' files in place
for the next run to finish (files already gone are skipped), and never a kept snapshot, tag or
consumer position that names a deleted file.
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

    def as_json(self) -> dict:
        return {"expired": self.expired, "first_kept": self.first_kept, "files_deleted": self.files_deleted,
                "consumers_removed": self.consumers_removed}


def expire(store: TableStore, opts: MaintenanceOptions, now_ms: int, retain_max: int | None = None,
           retain_min: int | None = None, older_than_ms: int | None = None) -> ExpireResult:
    """Expire what `opts` (or the given overrides, as the `expire_snapshots` action passes them) allow."""
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
    end = latest.id - retain_min + 1
    consumers = store.consumers()
    if consumers:
        end = min(end, min(consumers.values()))
    end = min(end, earliest + opts.expire_limit)
    for sid in range(lowest, end):
        snap = store.snapshot(sid)
        if snap is not None and snap.time_millis >= older_than:
            end = sid
            break
    result.first_kept = max(end, earliest)
    if end <= earliest:
        return result
    result.files_deleted, result.expired = _expire_until(store, earliest, end)
    log.info("snapshots_expired", table=store.name, begin=end - result.expired, end=end, files=result.files_deleted)
    return result


def _expire_until(store: TableStore, earliest: int, end: int) -> tuple[int, int]:
    begin = earliest
    for sid in range(end - 1, earliest - 1, -1):  # a run cut off may have deleted the oldest already
        if store.snapshot(sid) is None:
            begin = sid + 1
            break
    kept = store.snapshot(end)
    if kept is None:
        raise RuntimeError(f"snapshot {end} of {store.name} vanished while expiring before it")
    tags = store.tagged_snapshots()
    deleted = 0
    tag_files: dict[int, set[str]] = {}
    for sid in range(begin + 1, end + 1):  # 1. data files removed by (begin, end]
        snap = kept if sid == end else store.snapshot(sid)
        if snap is None:
            continue
        previous_tags = [t for t in tags if t.id < sid]
        keep = set()
        if previous_tags:
            tag = previous_tags[-1]
            if tag.id not in tag_files:
                tag_files[tag.id] = store.file_names(tag)
            keep = tag_files[tag.id]
        for entry in _entries(store, snap):
            if entry.kind == DELETE and entry.file.file_name not in keep:
                deleted += _delete_all(store, store.data_paths(entry))
    for sid in range(begin, end):  # 2. changelog files of the expired snapshots
        snap = store.snapshot(sid)
        if snap is not None and snap.changelog_manifest_list:
            for entry in _entries(store, snap, changelog=True):
                if entry.kind != DELETE:
                    deleted += _delete_all(store, store.data_paths(entry))
    skip = _manifest_names(store, [kept, *tags])
    for sid in range(begin, end):  # 3. manifests and lists no kept snapshot or tag names
        snap = store.snapshot(sid)
        if snap is None:
            continue
        for list_name in store.manifest_lists(snap):
            if list_name in skip:
                continue
            for name in _listed(store, list_name):
                if name not in skip:
                    deleted += _delete_all(store, [store.manifest_path(name)])
            deleted += _delete_all(store, [store.manifest_path(list_name)])
    for sid in range(begin, end):  # 4. the snapshots themselves, oldest first
        store.delete(store.snapshot_path(sid))
    store.write_earliest_hint(end)
    return deleted, end - begin


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


def _manifest_names(store: TableStore, snapshots: list) -> set[str]:
    names: set[str] = set()
    for snap in snapshots:
        for list_name in store.manifest_lists(snap):
            names.add(list_name)
            names.update(store.manifests_of_list(list_name))
    return names


def _delete_all(store: TableStore, paths: list[str]) -> int:
    return sum(1 for p in paths if store.delete(p))
