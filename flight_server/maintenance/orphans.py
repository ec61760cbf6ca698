"""Orphan files: data and manifest files that no snapshot, tag or changelog names, left by commits
that never happened (a writer killed after writing its files) or by an expiry cut off mid-way.

As Paimon's remove_orphan_files: a file is deleted only if nothing kept names it and it is older
than `older_than` (default a day), so the files of a commit still in flight are never touched.
Candidates are only what Paimon's OrphanFilesClean lists: the files under manifest/, index/,
statistics/ and the partition (`key=value`) and bucket (`bucket-N`) directories; everything else in
the table's directory (snapshot/, schema/, tag/, consumer/, Iceberg metadata, anything else) is
left alone. A table with branches or with changelogs kept apart from its snapshots (changelog/)
is refused: their files live beside the main branch's, and this server does not read their
snapshots (Paimon's own procedure does).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from flight_server.maintenance.store import TableStore
from flight_server.paimon import compat
from flight_server.wire.errors import InvalidRequest

log = structlog.get_logger(__name__)

DEFAULT_OLDER_THAN_MS = 86_400_000
MIN_AGE_MS = 600_000  # a file younger than this may belong to a commit in flight: never a candidate


candidate_dir = compat.orphan_candidate_dir  # a table's top-level directory whose files orphan removal may delete


@dataclass
class OrphanResult:
    deleted: int = 0
    bytes: int = 0
    scanned: int = 0
    would_delete: list[tuple[str, int]] | None = None  # a dry run's (path, size) of each file


def remove_orphan_files(store: TableStore, now_ms: int, older_than_ms: int | None = None,
                        in_use: frozenset[str] = frozenset(), dry_run: bool = False) -> OrphanResult:
    """Delete the files nothing kept names, last written before `older_than_ms` (epoch ms); never one
    of `in_use` (names of files this server's staged writes hold for a commit to come). A `dry_run`
    lists them (would_delete) and deletes nothing, as Paimon's dry_run."""
    older_than = now_ms - DEFAULT_OLDER_THAN_MS if older_than_ms is None else older_than_ms
    if older_than > now_ms - MIN_AGE_MS:
        raise InvalidRequest(
            f"remove_orphan_files {store.name!r}: older_than must be at least {MIN_AGE_MS // 60000} minutes ago "
            "(younger files may belong to a commit in flight, whose snapshot would then name deleted files).")
    for directory, what in (("branch", "branches"), ("changelog", "changelogs kept apart from its snapshots")):
        if store.has_entries(directory):
            raise InvalidRequest(
                f"remove_orphan_files {store.name!r}: the table has {what} ({directory}/), whose files this server "
                "does not follow; run Paimon's own remove_orphan_files procedure (Spark or Flink).")
    used = store.referenced_files() | in_use
    result = OrphanResult(would_delete=[] if dry_run else None)
    for path, name, size, mtime_ms in store.list_files(candidate_dir):
        result.scanned += 1
        if name in used or mtime_ms >= older_than:
            continue
        if dry_run:
            result.would_delete.append((path, size))
        elif store.delete(path):
            result.deleted += 1
            result.bytes += size
    if result.deleted:
        log.info("orphan_files_removed", table=store.name, files=result.deleted, bytes=result.bytes)
    return result
