"""The pypaimon calls outside its documented API that serving needs, so an upgrade touches few modules.

Not every one: maintenance/store.py and maintenance/kv_files.py reach pypaimon's manifests,
commit and merge-tree writer themselves, and status.py patches `traceback.format_exception`.

Written against pypaimon 2.1.0. The public API has no snapshot-id range read and no way to
plan one snapshot's delta, and its streaming scan owns an event loop and prefetch thread we
cannot stop; the follow-up planner of `AsyncStreamingTableScan` is what we borrow instead.
"""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import tenacity
from pypaimon import CatalogFactory
from pypaimon.catalog.catalog_exception import (
    DatabaseNotExistException, TableAlreadyExistException, TableNotExistException,
)
from pypaimon.consumer.consumer import Consumer
from pypaimon.filesystem.local_file_io import LocalFileIO

from flight_server.wire.errors import WrongState

NOT_FOUND_ERRORS = (TableNotExistException, DatabaseNotExistException)
ALREADY_EXISTS = TableAlreadyExistException


# S3 credentials under the names pypaimon's Python FileIO reads and the ones its native (Rust)
# reader reads: whichever the user gave, both get it.
_S3_ALIASES = (("fs.s3.accessKeyId", "s3.access-key"), ("fs.s3.accessKeySecret", "s3.secret-key"),
               ("fs.s3.endpoint", "s3.endpoint"), ("fs.s3.region", "s3.region"),
               ("fs.s3.path-style-access", "s3.path-style-access"))


def catalog_options(warehouse: str, options: dict[str, str] | None = None) -> dict[str, str]:
    """The catalog's options: the warehouse, the user's filesystem options, and their S3 aliases."""
    out = {**(options or {}), "warehouse": warehouse}
    for a, b in _S3_ALIASES:
        if a in out and b not in out:
            out[b] = out[a]
        elif b in out and a not in out:
            out[a] = out[b]
    return out


def create_catalog(warehouse: str, options: dict[str, str] | None = None):
    return CatalogFactory.create(catalog_options(warehouse, options))


def list_tables(catalog) -> list[str]:
    names = []
    for db in catalog.list_databases():
        names += [f"{db}.{t}" for t in catalog.list_tables(db)]
    return sorted(names)


def create_table(catalog, name: str, schema: pa.Schema, primary_keys, partition_keys, options) -> None:
    """Create the table (and its database when missing); raises ALREADY_EXISTS if it exists."""
    from pypaimon import Schema

    catalog.create_database(name.split(".", 1)[0], True)
    paimon_schema = Schema.from_pyarrow_schema(schema, partition_keys=partition_keys or None,
                                               primary_keys=primary_keys or None, options=options)
    catalog.create_table(name, paimon_schema, False)


def pin_splits(splits: list) -> list[str]:
    """Splits as text for a ticket: pypaimon's cross-language SplitSerializer v1 (what it hands
    the native reader), base64."""
    import base64

    from pypaimon.read.split_serializer import serialize_split_v1

    return [base64.b64encode(serialize_split_v1(s, include_scores=False)).decode("ascii") for s in splits]


def unpin_splits(table, pinned: list[str]) -> list:
    """The splits `pin_splits` wrote, for this table (its partition and trimmed key fields)."""
    import base64

    from pypaimon.read.split_serializer import deserialize_split_v1

    schema = table.table_schema
    by_name = {f.name: f for f in schema.fields}
    partition_fields = [by_name[name] for name in schema.partition_keys]
    key_fields = table.trimmed_primary_keys_fields if table.primary_keys else None
    return [deserialize_split_v1(base64.b64decode(s), partition_fields, key_fields) for s in pinned]


def fixed_buckets(table) -> int | None:
    """The bucket count of a fixed-bucket table; None for bucket=-1 (unaware or dynamic) or -2."""
    n = table.options.bucket()
    return n if n and n > 0 else None


def new_delta_planner(table, predicate, columns):
    """A streaming scan used only as a per-snapshot delta planner (no stream loop is started)."""
    builder = table.new_stream_read_builder()
    if predicate is not None:
        builder = builder.with_filter(predicate)
    if columns is not None:
        builder = builder.with_projection(list(columns))
    return builder.new_streaming_scan()


def should_scan(planner, snapshot) -> bool:
    """Whether the snapshot carries data for this table's follow-up mode (APPEND, or changelog)."""
    return planner.follow_up_scanner.should_scan(snapshot)


COMPACTION_CHANGELOG = ("lookup", "full-compaction")  # changelog-producers whose changelog compaction writes
RECENT_SNAPSHOTS = 100  # how far back a follow looks for a changelog before saying none is made


def compaction_changelog_producer(table) -> str | None:
    """The table's changelog-producer when its changelog is written only by compaction, else None."""
    producer = table.options.changelog_producer()
    value = getattr(producer, "value", producer)
    return value if value in COMPACTION_CHANGELOG else None


def is_data_commit(snapshot) -> bool:
    return snapshot.commit_kind == "APPEND"


def recent_changelog(manager) -> bool:
    """Whether one of the last RECENT_SNAPSHOTS snapshots carries a changelog."""
    latest = manager.get_latest_snapshot()
    if latest is None:
        return False
    for sid in range(latest.id, max(0, latest.id - RECENT_SNAPSHOTS), -1):
        snap = latest if sid == latest.id else snapshot(manager, sid)
        if snap is not None and snap.changelog_manifest_list:
            return True
    return False


def delta_splits(planner, snapshot) -> list:
    """Splits of the data one snapshot committed (its delta, or its changelog)."""
    return planner._create_follow_up_plan(snapshot).splits()


def close_planner(planner) -> None:
    """Stop the prefetch pool the streaming scan creates in its constructor."""
    executor = getattr(planner, "_prefetch_executor", None)
    if executor is not None:
        executor.shutdown(wait=False, cancel_futures=True)


def latest_snapshot_id(table) -> int | None:
    """The table's latest snapshot id, None while it has none."""
    latest = table.snapshot_manager().get_latest_snapshot()
    return None if latest is None else latest.id


def snapshot(manager, snapshot_id: int):
    """The snapshot, None when there is none: also when expiry deleted it between pypaimon's
    existence check and its read (which raises)."""
    try:
        return manager.get_snapshot_by_id(snapshot_id)
    except FileNotFoundError:
        return None


def snapshots_around(manager, millis: int) -> tuple[int | None, int | None]:
    """(last snapshot with time_millis <= millis, first with time_millis >= millis), ids or None."""
    before = manager.earlier_or_equal_time_mills(millis)
    latest = manager.get_latest_snapshot()
    if latest is None:
        return None, None
    if before is not None and before.time_millis == millis:
        return before.id, before.id
    if before is None:
        earliest = earliest_snapshot_id(manager)
        return None, earliest
    nxt = snapshot(manager, before.id + 1) if before.id < latest.id else None
    return before.id, (None if nxt is None else nxt.id)


def tag_snapshot(table, tag: str) -> int | None:
    found = table.tag_manager().get(tag)
    return None if found is None else found.id


def tag_names(table) -> list[str]:
    manager = table.tag_manager()
    if not manager.file_io.exists(manager.tag_directory()):
        return []
    return sorted(str(name) for name in manager.list_tags())


def create_tag(table, tag: str, snapshot_id: int, time_retained_ms: int | None) -> None:
    """Paimon's create_tag: a tag file holding the snapshot (and, with a retention, its create
    time and TTL), written by pypaimon's TagManager as Java's writes it. The caller has checked
    that the tag is new and the snapshot kept."""
    table.create_tag(tag, snapshot_id, ignore_if_exists=False,
                     time_retained=None if time_retained_ms is None else f"{time_retained_ms} ms")


def delete_tag(table, tag: str) -> bool:
    """Paimon's delete_tag: the tag file only (no data file); False when there was none."""
    return bool(table.delete_tag(tag))


def read_consumer(table, consumer_id: str) -> int | None:
    """The consumer's next snapshot, or None if it has no progress yet."""
    manager = table.consumer_manager()
    try:
        consumer = manager.consumer(consumer_id)  # pypaimon retries a torn read for 2 s
    except RuntimeError as e:
        raise WrongState(
            f"The progress file of consumer {consumer_id!r} ({manager._consumer_path(consumer_id)}) cannot be "
            f"read ({e}); delete it to start that consumer over from its start position, or use another "
            "consumer id.") from None
    return None if consumer is None else consumer.next_snapshot


def write_consumer(table, consumer_id: str, next_snapshot: int) -> None:
    """Record the consumer's progress whole or not at all. pypaimon overwrites the file in place
    (truncate, then write), so a server killed in between left an empty file that every later
    read of the consumer failed on; on a local warehouse the file is written beside and renamed
    over (an object store's PUT is already atomic)."""
    manager = table.consumer_manager()
    consumer = Consumer(next_snapshot=next_snapshot)
    if not isinstance(manager._file_io, LocalFileIO):
        manager.reset_consumer(consumer_id, consumer)
        return
    path = manager._file_io._to_file(manager._consumer_path(consumer_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # not `consumer-*`: never listed as one
    temp.write_text(consumer.to_json())
    os.replace(temp, path)


def restore_consumer(table, consumer_id: str, next_snapshot: int | None) -> None:
    """Put a consumer back as it was: its earlier progress, or no file when it had none."""
    if next_snapshot is not None:
        write_consumer(table, consumer_id, next_snapshot)
        return
    manager = table.consumer_manager()
    path = manager._consumer_path(consumer_id)
    try:
        manager._file_io.delete(path, False)
    except FileNotFoundError:
        pass


def write_whole(file_io, path: str, content: str) -> None:
    """Write a small file whole or not at all: on a local warehouse beside it, then renamed over
    (pypaimon overwrites in place, and a kill in between leaves an empty file); an object store's
    PUT is already atomic."""
    if not isinstance(file_io, LocalFileIO):
        file_io.write_file(path, content, overwrite=True)
        return
    target = file_io._to_file(path)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    temp.write_text(content)
    os.replace(temp, target)


def native_write_table(table):
    """The table with pypaimon's native (Rust) writer switched on: 15-40x faster than its Python
    writer for fixed buckets and primary keys (docs/benchmarks.md); pypaimon falls back to Python
    by itself for what the native writer does not support."""
    return table.copy({"write.native.enabled": "true"})


def shares_buckets(table) -> bool:
    """Whether several writers may write the table at once, each its own files (an append table
    with bucket -1, as Spark's tasks write it). A table that routes rows to buckets (primary keys,
    fixed or dynamic buckets) is written one bucket per writer, and only pypaimon-rust's writer
    knows a row's bucket: such a table gets one writer."""
    from pypaimon.table.bucket_mode import BucketMode

    return not table.primary_keys and table.bucket_mode() == BucketMode.BUCKET_UNAWARE


def find_commit(table, commit_user: str, identifier: int) -> int:
    """The id of the snapshot a commit by `commit_user` with `identifier` made (the latest, unless
    another writer committed right after)."""
    manager = table.snapshot_manager()
    snap = manager.get_latest_snapshot()
    while snap is not None:
        if snap.commit_user == commit_user and snap.commit_identifier == identifier:
            return snap.id
        snap = snapshot(manager, snap.id - 1) if snap.id > 1 else None
    raise RuntimeError(f"commit {identifier} of {commit_user} made no snapshot")


def table_identity(table) -> str | None:
    """When the table was created (its first schema's time), read afresh; None once it is gone.

    Tells a table from a later one created under the same name: a reader planned on the first
    must never read the second's snapshots.
    """
    from pypaimon.schema.schema_manager import SchemaManager

    manager = SchemaManager(table.file_io, table.table_path)
    try:
        schema = manager.get_schema(0)
    except (FileNotFoundError, RuntimeError):  # pypaimon wraps a file that vanished mid-read
        if table.file_io.exists(manager._to_schema_path(0)):
            raise
        return None  # dropped between the existence check and the read
    return None if schema is None else str(schema.time_millis)


def output_schema(table_read) -> pa.Schema:
    """The exact schema a TableRead produces (projection, row kind, nullability included)."""
    reader = table_read.to_arrow_batch_reader([])
    schema = reader.schema
    close = getattr(reader, "close", None)
    if close is not None:
        close()
    return schema


def merged_row_count(split) -> int | None:
    """Rows a split yields after merging, where pypaimon knows it (raw-convertible splits)."""
    fn = getattr(split, "merged_row_count", None)
    return fn() if fn is not None else None


def split_sort_key(split) -> tuple:
    """A stable order of splits, so servers re-planning one snapshot agree on split groups."""
    partition = tuple(str(v) for v in (split.partition.values if split.partition is not None else ()))
    first = min((f.file_name for f in split.files), default="")
    return partition, split.bucket, first


@tenacity.retry(retry=tenacity.retry_if_exception_type(FileNotFoundError), stop=tenacity.stop_after_attempt(100),
                reraise=True)
def _hinted_earliest(snapshot_manager):
    """pypaimon's earliest snapshot by its EARLIEST hint, read again (at once) while it names a
    snapshot that expired between pypaimon's existence check and its read."""
    return snapshot_manager.try_get_earliest_snapshot()


def earliest_snapshot_id(snapshot_manager) -> int | None:
    """The earliest snapshot id, None when there is none (pypaimon raises on an empty table). Where
    pypaimon's EARLIEST hint fails it (torn, or over 300 snapshots behind), the snapshot directory
    is listed, as Java Paimon's findEarliest does."""
    if snapshot_manager.get_latest_snapshot() is None:
        return None
    try:
        snap = _hinted_earliest(snapshot_manager)
    except (FileNotFoundError, RuntimeError, ValueError):  # still expiring under us; or the hint is torn or far behind
        snap = None
    if snap is not None:
        return snap.id
    listed = listed_snapshot_ids(snapshot_manager)
    return listed[0] if listed else None


def listed_snapshot_ids(snapshot_manager) -> list[int]:
    """The ids of the snapshot files in the snapshot directory, in order."""
    ids = []
    for name in list_names(snapshot_manager.file_io, snapshot_manager.snapshot_dir):
        if name.startswith("snapshot-") and name[len("snapshot-"):].isdigit():
            ids.append(int(name[len("snapshot-"):]))
    return sorted(ids)


def list_names(file_io, directory: str) -> list[str]:
    """The names of the entries of `directory` (none when it does not exist)."""
    if not file_io.exists(directory):
        return []
    return [str(getattr(status, "original_path", None) or status.path).rstrip("/").rsplit("/", 1)[-1]
            for status in file_io.list_status(directory)]


def arrow_schema(table) -> pa.Schema:
    """The table's columns as Arrow types, for checking filter values."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.fields)


MANIFEST_MERGE_MIN_COUNT = 30  # Paimon's `manifest.merge-min-count` default
# Merged manifests are cut at this size, not at `manifest.target-file-size` (8 MiB): a merge holds
# its entries as pypaimon objects, some 50 times their size on disk (docs/benchmarks_ingest.md).
MERGED_MANIFEST_BYTES = 64 << 10


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
    """
    fsc = table_commit.file_store_commit
    lists, files = fsc.manifest_list_manager, fsc.manifest_file_manager
    target = min(fsc.manifest_target_size, MERGED_MANIFEST_BYTES)
    write_list = lists.write

    def write(file_name: str, metas: list):
        # `_try_commit_once` names a snapshot's lists manifest-list-<uuid>-0 (base) and -1 (delta).
        if file_name.startswith("manifest-list-") and file_name.endswith("-0"):
            metas = _merged_manifests(files, metas, target, min_count)
        return write_list(file_name, metas)

    lists.write = write


def _merged_manifests(files, metas: list, target: int, min_count: int) -> list:
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


def written_paths(table, messages: list) -> list[str]:
    """Where the files that uncommitted commit messages name were written (data, their extra
    files, changelog files): what discarding them deletes."""
    from pypaimon.utils.file_store_path_factory import canonical_data_file_path

    paths = []
    for message in messages:
        for f in [*message.new_files, *message.changelog_files]:
            main = f.external_path or canonical_data_file_path(table, tuple(message.partition), message.bucket,
                                                               f.file_name)
            parent = main.rsplit("/", 1)[0]
            paths += [main, *(f"{parent}/{extra}" for extra in (f.extra_files or []))]
    return paths

