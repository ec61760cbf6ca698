"""Files and manifests: where a data or index file lives, the files a snapshot reads, what its
manifest lists and manifests name, and the manifest merge each of our commits does.

pypaimon 2.1 has neither compaction nor snapshot expiry, and leaves manifest merging to
"external maintenance"; maintenance (flight_server/maintenance/) reads a table's files through
these, as Java Paimon's FileStoreScan, ManifestList and ManifestFile read them.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections import OrderedDict
from io import BytesIO
from typing import cast

MANIFEST_MERGE_MIN_COUNT = 30  # Paimon's `manifest.merge-min-count` default
# Merged manifests are cut at this size, not at `manifest.target-file-size` (8 MiB): a merge holds
# its entries as pypaimon objects, some 50 times their size on disk (docs/benchmarks_ingest.md).
MERGED_MANIFEST_BYTES = 64 << 10
WRITTEN_LISTS_KEPT = 4  # a commit's manifest lists kept for the next commit's read (base, delta, changelog)


# -- data files -----------------------------------------------------------------------------


def live_entries(table, snapshot_id: int) -> list:
    """The manifest entries (ADD, merged) of the data files snapshot `snapshot_id` reads, level 0
    included, as a writer must see them.

    Read from pypaimon 2.1.0: `new_read_builder().new_scan()` has a `file_scanner` (FileScanner)
    whose `skip_level0` batch reads of first-row tables set, and whose `plan_files()` gives the
    entries."""
    scan = table.copy({"scan.snapshot-id": str(snapshot_id)}).new_read_builder().new_scan()
    scan.file_scanner.skip_level0 = False  # batch reads of first-row tables skip level 0; a writer must not
    return scan.file_scanner.plan_files()


def data_file_path(table, partition_values: tuple, bucket: int, meta) -> str:
    """Where a data file lives: its external path, or its place in the table's bucket directory.

    Read from pypaimon 2.1.0: `DataFileMeta.external_path` and `physical_path()`;
    `pypaimon.utils.file_store_path_factory.canonical_data_file_path(table, partition, bucket, name)`."""
    from pypaimon.utils.file_store_path_factory import canonical_data_file_path

    return meta.physical_path() if meta.external_path else canonical_data_file_path(table, partition_values, bucket,
                                                                                     meta.file_name)


def written_paths(table, messages: list) -> list[str]:
    """Where the files that uncommitted commit messages name were written (data, their extra
    files, changelog files): what discarding them deletes.

    Read from pypaimon 2.1.0: `CommitMessage.new_files`, `changelog_files`, `partition`, `bucket`;
    `DataFileMeta.external_path`, `extra_files`; `canonical_data_file_path`."""
    from pypaimon.utils.file_store_path_factory import canonical_data_file_path

    paths = []
    for message in messages:
        for f in [*message.new_files, *message.changelog_files]:
            main = f.external_path or canonical_data_file_path(table, tuple(message.partition), message.bucket,
                                                               f.file_name)
            parent = main.rsplit("/", 1)[0]
            paths += [main, *(f"{parent}/{extra}" for extra in (f.extra_files or []))]
    return paths


# -- manifests ------------------------------------------------------------------------------


def manifest_list(table, list_name: str) -> list:
    """The manifests (ManifestFileMetas: `file_name`, `file_size`) a manifest list names.

    Read from pypaimon 2.1.0: `pypaimon.manifest.manifest_list_manager.ManifestListManager(table).read(name)`."""
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    return ManifestListManager(table).read(list_name)


def manifest_reader(table):
    """A reader of the table's manifests: `read(name, drop_stats=True)` gives a manifest's entries
    (ManifestEntries: `kind` 0 ADD or 1 DELETE, `partition`, `bucket`, `total_buckets`, `file`);
    `drop_stats=False` keeps the files' value stats.

    Read from pypaimon 2.1.0: `pypaimon.manifest.manifest_file_manager.ManifestFileManager(table)`
    and its `read(name, drop_stats=...)`."""
    from pypaimon.manifest.manifest_file_manager import ManifestFileManager

    files = ManifestFileManager(table)

    def read(name: str, drop_stats: bool = True) -> list:
        return files.read(name) if drop_stats else files.read(name, drop_stats=False)

    return read


def merged_entries(entries) -> list:
    """Manifest entries merged: a file's ADD and DELETE cancel, what is left is read.

    Read from pypaimon 2.1.0: `pypaimon.manifest.schema.file_entry.FileEntry.merge_entries`."""
    from pypaimon.manifest.schema.file_entry import FileEntry

    return FileEntry.merge_entries(entries)


def index_manifest_entries(table, index_manifest: str) -> list:
    """The entries of an index manifest (`index_file` with `file_name`, `index_type`,
    `external_path`; `partition`, `bucket`); [] when it is gone.

    Read from pypaimon 2.1.0: `pypaimon.manifest.index_manifest_file.IndexManifestFile(table).read(name)`."""
    from pypaimon.manifest.index_manifest_file import IndexManifestFile

    return IndexManifestFile(table).read(index_manifest)


def index_file_path(table, entry, file_io) -> str:
    """Where an index manifest entry's file lives, as pypaimon's commit abort finds it (Java's
    IndexFileHandler.filePath): a bucket index by the path factory (index/, or the bucket's
    directory with index-file-in-data-file-dir), a global index under its root; an external
    path as recorded.

    Read from pypaimon 2.1.0: `table.path_factory()`, its `bucket_index_path(partition, bucket,
    index_file, file_io)` and `global_index_path_factory().to_path(name)`."""
    index_file = entry.index_file
    factory = table.path_factory()
    if index_file.index_type in ("DELETION_VECTORS", "HASH"):
        return factory.bucket_index_path(tuple(entry.partition.values), entry.bucket, index_file, file_io)
    return index_file.external_path or factory.global_index_path_factory().to_path(index_file.file_name)


# -- manifests older Paimon versions wrote ----------------------------------------------------

UPGRADED_BYTES_KEPT = 8 << 20  # older manifests kept upgraded, by size (a manifest file never changes)


def read_older_manifests(file_io) -> None:
    """Make `file_io` (a catalog's, which its tables share) hand pypaimon every manifest file as
    this pypaimon's manifest schema has it: the fields a file lacks, which an older Paimon wrote,
    with their defaults, as Paimon reads an older manifest (Avro schema resolution: an absent
    field takes its default).

    pypaimon 2.1 indexes fields that Java Paimon 0.9's manifests do not have (`_VALUE_STATS_COLS`,
    since Paimon 1.0; `_EXTERNAL_PATH`, `_FIRST_ROW_ID`, `_WRITE_COLS` later): once Java 0.9
    commits to a table, every read of its manifests fails KeyError '_VALUE_STATS_COLS' (scans,
    deltas, follows, commits, maintenance). A manifest whose writer schema lacks a field of
    `DATA_FILE_META_SCHEMA` is decoded and written again in memory with the field (null, its
    default, for all of them: `_VALUE_STATS_COLS` null means every column has stats, as Paimon
    1.x reads it); the upgraded bytes of the last few are kept. Manifests this pypaimon (or Paimon
    1.0 and later) wrote pass through as read; manifest lists, index manifests, manifest sidecars
    (`<manifest>.avro.sidecar`: Java 0.9 writes none, so a manifest it wrote is always read
    whole) and data files are not touched.

    Only this FileIO object changes (its own `new_input_stream`, or a caching FileIO's
    `_new_input_stream_with_known_size`); no class and no other FileIO.

    Read from pypaimon 2.1.0: `ManifestFileManager.read` opens `<table>/manifest/manifest-<uuid>-N`
    through `caching_file_io._open_input_stream_with_known_size(file_io, path, size)`, which calls
    a CachingFileIO's `_new_input_stream_with_known_size(path, size)` or else
    `file_io.new_input_stream(path)`, reads it whole and decodes it with its writer schema
    (fastavro); `pypaimon.manifest.schema.data_file_meta.DATA_FILE_META_SCHEMA` (fields with
    their defaults)."""
    from pypaimon.manifest.schema.data_file_meta import DATA_FILE_META_SCHEMA

    kept: OrderedDict[str, bytes] = OrderedDict()
    lock = threading.Lock()

    def upgraded(path: str, stream):
        name = path.rstrip("/").rsplit("/", 2)
        if len(name) < 2 or name[-2] != "manifest" or not name[-1].startswith("manifest-") \
                or name[-1].startswith("manifest-list-") or "." in name[-1]:  # a list, or a sidecar
            return stream
        with lock:
            data = kept.get(path)
            if data is not None:
                kept.move_to_end(path)
        if data is not None:
            stream.close()
            return BytesIO(data)
        with stream:
            data = stream.read()
        new = _with_absent_fields(data, DATA_FILE_META_SCHEMA["fields"], path)
        if new is None:
            return BytesIO(data)
        with lock:
            kept[path] = new
            while sum(map(len, kept.values())) > UPGRADED_BYTES_KEPT and len(kept) > 1:
                kept.popitem(last=False)
        return BytesIO(new)

    if hasattr(file_io, "_new_input_stream_with_known_size"):  # a CachingFileIO: new_input_stream calls it
        opened_known = file_io._new_input_stream_with_known_size

        def new_input_stream_with_known_size(path, file_size):
            return upgraded(path, opened_known(path, file_size))

        file_io._new_input_stream_with_known_size = new_input_stream_with_known_size
    else:
        opened = file_io.new_input_stream

        def new_input_stream(path):
            return upgraded(path, opened(path))

        file_io.new_input_stream = new_input_stream


def _with_absent_fields(data: bytes, fields: list, path: str) -> bytes | None:
    """A manifest's bytes again with the fields of `fields` its `_FILE` record lacks (each with
    its default), or None when it lacks none.

    Read from pypaimon 2.1.0: manifests are Avro files (fastavro) whose `_FILE` field is the
    DataFileMeta record; see `read_older_manifests`."""
    import fastavro

    reader = fastavro.reader(BytesIO(data))  # reads the header only, until iterated
    schema = json.loads(reader.metadata["avro.schema"])
    file_type = next((f["type"] for f in schema.get("fields", []) if f.get("name") == "_FILE"), None)
    if not isinstance(file_type, dict) or not isinstance(file_type.get("fields"), list):
        return None
    have = {f["name"] for f in file_type["fields"]}
    absent = [f for f in fields if f["name"] not in have]
    if not absent:
        return None
    for f in absent:
        if "default" not in f:
            raise ValueError(f"The manifest {path} lacks the field {f['name']}, which has no default to read it with.")
    file_type["fields"] += [copy.deepcopy(f) for f in absent]
    records = []
    for message in reader:
        record = cast(dict, message)  # a record schema's messages are dicts
        for f in absent:
            record["_FILE"][f["name"]] = f["default"]
        records.append(record)
    out = BytesIO()
    fastavro.writer(out, schema, records, codec="null")
    return out.getvalue()


# -- the manifest merge of a commit ---------------------------------------------------------


def merge_manifests_on_commit(table_commit, min_count: int = MANIFEST_MERGE_MIN_COUNT) -> None:
    """Make every snapshot `table_commit` writes carry merged manifests, as Java Paimon's commits do.

    pypaimon 2.1 leaves manifest compaction to "external maintenance": each commit's base
    manifest list is the previous one plus one new manifest, and each commit reads and rewrites
    it whole. A table fed by many small commits (durable ingest's group commits) then gets slower
    and bigger with every commit (docs/benchmarks_ingest.md, "A commit's cost as the table ages"),
    and a server's RSS climbs with the table's age (scripts/chaos.py's soak).

    So, like Java's ManifestFileMerger minor compaction: when the trailing run of manifests
    smaller than the target size (MERGED_MANIFEST_BYTES) has at least `min_count` of them, their
    entries (ADD and DELETE of one file cancel) are rewritten into files of the target size, and
    the snapshot's base list names those instead. Older snapshots keep their own lists and files.

    And each commit reads back the lists it wrote last from memory: the next commit's
    `read_all(latest)` reads the previous snapshot's base and delta lists, which are this
    commit's own when no other writer committed between (a list is never rewritten).

    Only this commit changes: its own ManifestListManager (each FileStoreCommit makes one) gets
    a `write` and a `read` of its own; no class and no other commit is touched.

    Read from pypaimon 2.1.0: `BatchTableCommit.file_store_commit` (FileStoreCommit) holds
    `manifest_list_manager`, `manifest_file_manager` and `manifest_target_size`; its private
    `_try_commit_once` writes a snapshot's base list through `manifest_list_manager.write(name,
    metas)` as manifest-list-<uuid>-0 (-1 the delta), and reads the latest snapshot's through
    `read_all`, which calls `self.read(name, size)`; `ManifestFileManager.read(name,
    drop_stats, file_size)` and `rolling_write(entries, target, base_name)`."""
    fsc = table_commit.file_store_commit
    lists, files = fsc.manifest_list_manager, fsc.manifest_file_manager
    target = min(fsc.manifest_target_size, MERGED_MANIFEST_BYTES)
    write_list, read_list = lists.write, lists.read
    written: dict[str, list] = {}  # the lists this commit wrote last: the next commit reads them back

    def write(file_name: str, metas: list):
        # `_try_commit_once` names a snapshot's lists manifest-list-<uuid>-0 (base) and -1 (delta).
        if file_name.startswith("manifest-list-") and file_name.endswith("-0"):
            metas = _merged_manifests(files, metas, target, min_count)
        size = write_list(file_name, metas)
        written[file_name] = list(metas)
        while len(written) > WRITTEN_LISTS_KEPT:
            del written[next(iter(written))]
        return size

    def read(file_name: str, file_size=None):
        # A commit reads the previous snapshot's two lists (`read_all`): when that snapshot is
        # this commit's own, they are what it wrote (a manifest list is never rewritten).
        kept = written.get(file_name)
        return list(kept) if kept is not None else read_list(file_name, file_size)

    lists.write, lists.read = write, read


def _merged_manifests(files, metas: list, target: int, min_count: int) -> list:
    """Read from pypaimon 2.1.0: see `merge_manifests_on_commit`."""
    from pypaimon.manifest.schema.file_entry import FileEntry

    start = len(metas)
    while start > 0 and metas[start - 1].file_size < target:
        start -= 1
    if len(metas) - start < min_count:
        return metas
    entries = FileEntry.merge_entries(
        entry for meta in metas[start:]
        for entry in files.read(meta.file_name, drop_stats=False, file_size=meta.file_size))
    return metas[:start] + files.rolling_write(entries, target, f"manifest-{uuid.uuid4()}")
