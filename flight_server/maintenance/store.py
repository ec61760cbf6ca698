"""A Paimon table's files as maintenance sees them: the live files of the latest snapshot, a
rewrite of some of them with the native writer, a COMPACT commit (Paimon's optimistic commit: a
concurrent one that removed the same files makes ours fail, never both land), and what each
snapshot's manifests name, for expiry.

pypaimon 2.1 has neither compaction nor snapshot expiry: what this needs of its commit and
manifest code is in flight_server/paimon/compat/ (manifests.py, commit.py), as every use of
pypaimon's internals is.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any

import structlog

from flight_server.paimon import compat

log = structlog.get_logger(__name__)

_IDENTIFIERS = itertools.count(1)


@dataclass(frozen=True)
class LiveFile:
    """A data file of the latest snapshot, with what compaction orders and sizes it by."""

    entry: Any  # pypaimon's ManifestEntry (untyped: compaction reads its file's schema_id)
    name: str
    size: int
    rows: int
    min_seq: int
    level: int
    max_seq: int = 0
    deletes: int | None = 0  # retracting rows in it (primary-key files; None: not recorded)
    created_ms: int = 0  # when it was written (append files: their order, as pypaimon's writers number from 0)


REWRITE_BATCH_BYTES = 8 << 20  # a compaction reads its files in batches of about this many bytes of Arrow
PARQUET_TO_ARROW = 4  # about how much larger a row is in Arrow than in (compressed) Parquet


def rewrite_batch_rows(files: list[LiveFile]) -> int:
    """Rows a compaction's read batch holds: about REWRITE_BATCH_BYTES of Arrow as the files'
    sizes estimate it, 1,024 to 65,536 rows."""
    rows, size = sum(f.rows for f in files), sum(f.size for f in files)
    per_row = PARQUET_TO_ARROW * size / max(rows, 1)
    return max(1024, min(65536, int(REWRITE_BATCH_BYTES / max(per_row, 1))))


class TableStore:
    """One Paimon table, for maintenance."""

    def __init__(self, table, name: str):
        self.table, self.name = table, name
        self._lists: dict[str, list[str]] = {}
        self._live: tuple[int, dict] | None = None  # the last snapshot planned, and its files
        self._indexes: dict[str, list[tuple[str, str]]] = {}
        self.manager = table.snapshot_manager()
        self.files = compat.TableFiles(table)  # where its files are, and their reads and deletes by path
        self._commit_user = f"flight-paimon-maintenance-{uuid.uuid4()}"

    # -- snapshots -------------------------------------------------------------------------

    def latest(self):
        return self.manager.get_latest_snapshot()

    def earliest_id(self) -> int | None:
        return compat.earliest_snapshot_id(self.manager)

    def snapshot(self, snapshot_id: int):
        """The snapshot, None when its file is gone (expired meanwhile)."""
        return compat.snapshot(self.manager, snapshot_id)

    def snapshot_path(self, snapshot_id: int) -> str:
        return self.files.snapshot_path(snapshot_id)

    def write_earliest_hint(self, snapshot_id: int) -> None:
        self.files.write_earliest_hint(snapshot_id)

    def tagged_snapshots(self) -> list:
        """The snapshots the table's tags keep, by id."""
        return compat.tagged_snapshots(self.files.file_io, self.files.root)

    def consumers(self) -> dict[str, int]:
        """Consumer id -> its next snapshot."""
        return compat.consumers(self.files.file_io, self.files.root)

    def expire_consumers(self, older_than_ms: int) -> list[str]:
        """Remove consumers whose progress file was last written before `older_than_ms` (epoch ms),
        as Java's ConsumerManager.expire; returns their ids. Not pypaimon's `expire`: on an object
        store it compares a datetime with a float and swallows the TypeError (nothing expires)."""
        prefix = compat.CONSUMER_PREFIX
        removed = []
        for path, name, _size, mtime_ms in self.files.consumer_files():
            if name.startswith(prefix) and mtime_ms < older_than_ms and self.delete(path):
                removed.append(name[len(prefix):])
        return sorted(removed)

    # -- files -----------------------------------------------------------------------------

    def live_files(self, snapshot) -> dict[tuple, list[LiveFile]]:
        """The data files `snapshot` reads, by (partition values, bucket): planned once per
        snapshot (a round plans the latest to compact it, and again to report its shape)."""
        if snapshot is None:
            return {}
        if self._live is not None and self._live[0] == snapshot.id:
            return {key: list(files) for key, files in self._live[1].items()}
        groups = self._plan(snapshot)
        self._live = (snapshot.id, groups)
        return {key: list(files) for key, files in groups.items()}

    def _plan(self, snapshot) -> dict[tuple, list[LiveFile]]:
        groups: dict[tuple, list[LiveFile]] = {}
        for entry in compat.live_entries(self.table, snapshot.id):
            f = entry.file
            key = (tuple(entry.partition.values), entry.bucket)
            groups.setdefault(key, []).append(
                LiveFile(entry, f.file_name, f.file_size, f.row_count, f.min_sequence_number, f.level,
                         f.max_sequence_number, f.delete_row_count, f.creation_time_epoch_millis() or 0))
        for files in groups.values():
            files.sort(key=lambda lf: (lf.min_seq, lf.created_ms, lf.name))
        return groups

    def data_paths(self, entry) -> list[str]:
        """Where a data file (and its extra files) lives."""
        f = entry.file
        main = compat.data_file_path(self.table, tuple(entry.partition.values), entry.bucket, f)
        parent = main.rsplit("/", 1)[0]
        return [main] + [f"{parent}/{extra}" for extra in (f.extra_files or [])]

    def manifest_path(self, name: str) -> str:
        return self.files.manifest_path(name)

    def statistics_path(self, name: str) -> str:
        return self.files.statistics_path(name)

    def index_files(self, index_manifest: str) -> list[tuple[str, str]]:
        """(name, path) of each index file an index manifest lists (its entries' files: HASH
        buckets, deletion vectors, global indexes). Raises FileNotFoundError when the manifest is
        gone (pypaimon's reader answers [] then, which would name nothing). Manifests are immutable:
        read once per store."""
        if index_manifest not in self._indexes:
            entries = compat.index_manifest_entries(self.table, index_manifest)
            path = self.manifest_path(index_manifest)
            if not entries and not self.files.exists(path):  # gone (before or while it was read)
                raise FileNotFoundError(path)
            if len(self._indexes) > 256:
                self._indexes.clear()
            self._indexes[index_manifest] = [(e.index_file.file_name, compat.index_file_path(self.table, e, self.files.file_io))
                                             for e in entries]
        return self._indexes[index_manifest]

    def manifest_lists(self, snapshot) -> list[str]:
        """The manifest list files a snapshot names (base, delta, changelog)."""
        return [n for n in (snapshot.base_manifest_list, snapshot.delta_manifest_list,
                            snapshot.changelog_manifest_list) if n]

    def manifests_of_list(self, list_name: str) -> list[str]:
        """The manifests a list names (lists are immutable: read once per store)."""
        if list_name not in self._lists:
            if len(self._lists) > 4096:
                self._lists.clear()
            self._lists[list_name] = [m.file_name for m in compat.manifest_list(self.table, list_name)]
        return self._lists[list_name]

    def delta_entries(self, snapshot, changelog: bool = False) -> list:
        """The entries a snapshot's delta (or changelog) manifests hold: what it added and removed."""
        list_name = snapshot.changelog_manifest_list if changelog else snapshot.delta_manifest_list
        if not list_name:
            return []
        read = compat.manifest_reader(self.table)
        return [e for name in self.manifests_of_list(list_name) for e in read(name)]

    def file_names(self, snapshot) -> set[str]:
        """The names of the data files `snapshot` reads (a tag's snapshot too, whose own snapshot
        file may be gone): its base and delta manifests, merged."""
        read = compat.manifest_reader(self.table)
        entries = [e for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list) if list_name
                   for name in self.manifests_of_list(list_name) for e in read(name)]
        return {e.file.file_name for e in compat.merged_entries(entries) if e.kind == 0}

    def listed_snapshot_ids(self) -> list[int]:
        return compat.listed_snapshot_ids(self.manager)

    def referenced_files(self) -> set[str]:
        """The name of every file a snapshot file or a tag names: manifest lists, manifests, the
        data, changelog and extra files in them, index manifests, the index files they list, and
        statistics. Snapshots come from listing the snapshot directory (not from the EARLIEST hint,
        which may lag), before the tags, so a tag made meanwhile on a snapshot expired meanwhile is
        seen one way or the other; a table whose listing finds no snapshot but has a latest one
        fails rather than keep nothing."""
        latest = self.latest()
        snapshots = [s for s in (self.snapshot(i) for i in self.listed_snapshot_ids()) if s is not None]
        if latest is not None and not snapshots:
            raise RuntimeError(f"Paimon table {self.name!r}: no snapshot file listed under {self.manager.snapshot_dir} "
                               f"although snapshot {latest.id} is the latest; nothing is deleted.")
        snapshots += self.tagged_snapshots()
        names: set[str] = set()
        manifests: set[str] = set()
        index_manifests: set[str] = set()
        for snap in snapshots:
            for list_name in self.manifest_lists(snap):
                names.add(list_name)
                manifests.update(self.manifests_of_list(list_name))
            names.update(n for n in (snap.index_manifest, snap.statistics) if n)
            if snap.index_manifest:
                index_manifests.add(snap.index_manifest)
        read = compat.manifest_reader(self.table)
        for name in manifests:
            for entry in read(name):
                names.add(entry.file.file_name)
                names.update(entry.file.extra_files or [])
        for name in index_manifests:
            names.update(e.index_file.file_name for e in compat.index_manifest_entries(self.table, name))
        return names | manifests

    def exists(self, path: str) -> bool:
        return self.files.exists(path)

    def has_entries(self, directory: str) -> bool:
        """Whether the table's top-level `directory` (branch, changelog, ...) holds anything."""
        return self.files.has_entries(directory)

    def list_files(self, top_dirs):
        """(path, name, size, mtime in epoch ms) of every file in the table's top-level directories
        `top_dirs(name)` accepts, and in the directories under them."""
        return self.files.list_files(top_dirs)

    def delete(self, path: str) -> bool:
        """Delete one file; True if this call removed it (False: it was gone already)."""
        return self.files.delete(path)

    # -- compaction ------------------------------------------------------------------------

    def rewrite(self, files: list[LiveFile]):
        """The rows of `files` (one partition and bucket) written again by pypaimon-rust's writer:
        commit messages naming the new files, not yet committed."""
        first = files[0].entry
        split = compat.data_split([lf.entry for lf in files], lambda entry: self.data_paths(entry)[0], first.partition,
                                  first.bucket, first.total_buckets, raw_convertible=not self.table.primary_keys)
        # Batch by batch, in file order: a rewrite holds a batch and the writer's open row group,
        # not the files' rows (reading them whole held ~1 GiB under fast ingest). Batches of about
        # REWRITE_BATCH_BYTES, not pypaimon's 1,024 rows: each read and write call costs per batch
        # (docs/benchmarks_ingest.md, section 3).
        table = self.table.copy({"read.batch-size": str(rewrite_batch_rows(files))})
        reader = table.new_read_builder().new_read().to_arrow_batch_reader([split], parallelism=1)
        builder = compat.native_write_table(self.table).new_batch_write_builder()
        write = builder.new_write()
        try:
            for batch in reader:
                if batch.num_rows:
                    write.write_arrow_batch(batch)
            messages = write.prepare_commit()
        finally:
            write.close()
        return compat.mark_compacted(messages)  # as Java's append compaction marks its output

    def merge(self, group: list, level: int, drop_delete: bool, rewriter) -> object:
        """A primary-key bucket's sections (see kv_files.sections) merged into new files at `level`:
        the commit message naming them, not yet committed."""
        first = group[0][0][0].entry
        metas = rewriter.rewrite(lambda entry: self.data_paths(entry)[0], first.partition, first.bucket,
                                 first.total_buckets, group, level, drop_delete)
        return compat.commit_message(tuple(first.partition.values), first.bucket, metas, first.total_buckets)

    def moved(self, lf: LiveFile, level: int) -> object:
        """The commit message that adds `lf` again at `level` (Paimon's upgrade: the same file, its
        DELETE at the old level in the same commit)."""
        e = lf.entry
        meta = self._with_stats(lf) or e.file  # the planner's entries carry no value stats
        return compat.commit_message(tuple(e.partition.values), e.bucket, [compat.at_level(meta, level)], e.total_buckets)

    def _with_stats(self, lf: LiveFile):
        """`lf`'s DataFileMeta with its value stats, from the latest snapshot's manifests (None if not found)."""
        latest = self.latest()
        read = compat.manifest_reader(self.table)
        for list_name in (latest.delta_manifest_list, latest.base_manifest_list):
            for name in self.manifests_of_list(list_name) if list_name else []:
                for entry in read(name, drop_stats=False):
                    if entry.kind == 0 and entry.file.file_name == lf.name and entry.file.level == lf.level:
                        return entry.file
        return None

    def commit_compact(self, messages, replaced: list[LiveFile]) -> int:
        """Commit the rewritten files in place of `replaced` as one COMPACT snapshot (adds no rows).
        Raises when the commit conflicts (another writer removed a replaced file meanwhile), and
        only when it did not land (a commit whose outcome pypaimon calls uncertain may have)."""
        commit = compat.CompactCommit(self.table, self._commit_user, messages, [lf.entry for lf in replaced])
        identifier = next(_IDENTIFIERS)
        start = time.perf_counter()
        seen: list = []  # the latest snapshot at each attempt: ours can only come after the first
        try:
            commit.run(identifier, seen)
        except Exception:
            found = None if not seen else self._landed(identifier, 0 if seen[0] is None else seen[0].id)
            if found is None:
                raise
            log.warning("compaction_commit_landed_despite_its_error", table=self.name, snapshot=found, exc_info=True)
        else:
            found = compat.find_commit(self.table, self._commit_user, identifier)
        finally:
            commit.close()
        log.info("compaction_committed", table=self.name, snapshot=found, files_in=len(replaced),
                 files_out=len(commit.adds), ms=round((time.perf_counter() - start) * 1000, 1))
        return found

    def _landed(self, identifier: int, after: int) -> int | None:
        """The snapshot after `after` that this store's commit `identifier` made, or None."""
        latest = self.latest()
        for sid in range(latest.id if latest is not None else after, after, -1):
            snap = self.snapshot(sid)
            if snap is None:
                break
            if snap.commit_user == self._commit_user and snap.commit_identifier == identifier:
                return sid
        return None

    def written_files(self, messages, kept: list[LiveFile]) -> dict[str, tuple[str, int]]:
        """name -> (path, size) of the data files `messages` add that a compaction wrote, not
        those it only moved to another level (`moved`: the same file, already in `kept`)."""
        existing = {lf.name for lf in kept}
        out = {}
        for m in messages:
            for f in m.new_files:
                if f.file_name not in existing:
                    out[f.file_name] = (compat.data_file_path(self.table, tuple(m.partition), m.bucket, f), f.file_size)
        return out
