"""The catalog and its tables: creating, listing and naming them, their columns as Arrow, and the
options this server reads them or writes them with."""

from __future__ import annotations

import errno
import os

import pyarrow as pa
from pypaimon import CatalogFactory
from pypaimon.catalog.catalog_exception import (
    DatabaseNotExistException,
    TableAlreadyExistException,
    TableNotExistException,
)

NOT_FOUND_ERRORS = (TableNotExistException, DatabaseNotExistException)
ALREADY_EXISTS = TableAlreadyExistException


# S3 credentials under the names pypaimon's Python FileIO reads and the ones its native (Rust)
# reader reads: whichever the user gave, both get it.
_S3_ALIASES = (("fs.s3.accessKeyId", "s3.access-key"), ("fs.s3.accessKeySecret", "s3.secret-key"),
               ("fs.s3.endpoint", "s3.endpoint"), ("fs.s3.region", "s3.region"),
               ("fs.s3.path-style-access", "s3.path-style-access"))


def catalog_options(warehouse: str, options: dict[str, str] | None = None) -> dict[str, str]:
    """The catalog's options: the warehouse, the user's filesystem options, and their S3 aliases.

    Read from pypaimon 2.1.0: its Python FileIO reads `fs.s3.*`, its native reader `s3.*`."""
    out = {**(options or {}), "warehouse": warehouse}
    for a, b in _S3_ALIASES:
        if a in out and b not in out:
            out[b] = out[a]
        elif b in out and a not in out:
            out[a] = out[b]
    return out


SERVED_METASTORES = ("filesystem", "jdbc")  # the catalogs whose tables' files this server reads and commits itself
JDBC_URIS = ("jdbc:sqlite:", "jdbc:postgresql:", "jdbc:mysql:")


def unservable(options: dict[str, str] | None) -> str | None:
    """Why this server cannot serve the catalog `options` name (their `metastore`), in a sentence
    naming it and what to use instead; None when it can.

    The server commits, keeps its exactly-once producer records and expires snapshots by reading
    and writing each table's files itself (compat.layout). A catalog whose tables it reaches so
    is served: the file-system catalog, and the JDBC one (names in a database, files under the
    warehouse). The REST catalog is not: its tables' commits go through the REST server.

    Read from pypaimon 2.1.0: `CatalogFactory.CATALOG_REGISTRY` ("filesystem", "jdbc", "rest"),
    chosen by the `metastore` option (default "filesystem"); `JdbcCatalog` connects by its `uri`
    option (jdbc:sqlite:, jdbc:postgresql:, jdbc:mysql:)."""
    options = options or {}
    metastore = options.get("metastore", "filesystem")
    if metastore == "rest":
        return ("metastore 'rest' (Paimon's REST catalog) cannot be served: its commits go through the REST "
                "server, while this server's exactly-once writes, expiry and orphan removal read and write the "
                "tables' files themselves; use metastore=filesystem (the default) or metastore=jdbc")
    if metastore not in SERVED_METASTORES:
        known = ", ".join(repr(m) for m in CatalogFactory.CATALOG_REGISTRY)
        return (f"metastore {metastore!r} is not a catalog pypaimon {_pypaimon_version()} knows ({known}); this "
                "server serves 'filesystem' (the default) and 'jdbc'")
    uri = options.get("uri", "")
    if metastore == "jdbc" and not uri.startswith(JDBC_URIS):
        given = f"{uri!r} is not one" if uri else "'uri' is missing"
        return (f"metastore 'jdbc' needs option 'uri', a JDBC URL ({given}): uri=jdbc:sqlite:PATH, "
                "uri=jdbc:postgresql://HOST:PORT/DB or uri=jdbc:mysql://HOST:PORT/DB")
    return None


def _pypaimon_version() -> str:
    """Read from pypaimon 2.1.0: the distribution's version."""
    from importlib.metadata import version

    return version("pypaimon")


def create_catalog(warehouse: str, options: dict[str, str] | None = None):
    """The catalog; on a local warehouse its renames never replace a file (see `_no_clobber`),
    and its tables read the manifests older Paimon versions wrote (`manifests.read_older_manifests`).
    A catalog the server cannot serve (`unservable`) is a ValueError saying why.

    Read from pypaimon 2.1.0: `CatalogFactory.create` (public); a filesystem or JDBC catalog's
    `file_io` is the one its tables get."""
    from flight_server.paimon.compat.manifests import read_older_manifests

    reason = unservable(options)
    if reason is not None:
        raise ValueError(f"{reason}.")
    catalog = CatalogFactory.create(catalog_options(warehouse, options))
    file_io = getattr(catalog, "file_io", None)
    _no_clobber(file_io)
    if file_io is not None:
        read_older_manifests(file_io)
    _latest_from_files(catalog)
    return catalog


def _latest_from_files(catalog) -> None:
    """Make a JDBC catalog's tables read their latest snapshot from their files straight away.

    pypaimon gives each such table a snapshot loader that, at every `get_latest_snapshot`, makes
    a new JdbcCatalog (a new database connection, and its three CREATE TABLE IF NOT EXISTS) only
    for its `load_snapshot` to raise NotImplementedError and the files to be read after all: on a
    local PostgreSQL 19 ms a call instead of 0.3, and a commit twice as long
    (scripts/bench_catalog.py). Only the tables' own environments change.

    Read from pypaimon 2.1.0: `JdbcCatalog.get_table` builds a FileStoreTable with a
    CatalogEnvironment whose `snapshot_loader()` FileStoreTable.snapshot_manager passes to
    SnapshotManager (None: the files only); `JdbcCatalog.load_snapshot` always raises
    NotImplementedError; `table.copy` keeps the environment."""
    from pypaimon.catalog.jdbc_catalog import JdbcCatalog

    if not isinstance(catalog, JdbcCatalog):
        return
    get_table = catalog.get_table

    def get_table_reading_files(identifier):
        table = get_table(identifier)
        table.catalog_environment.snapshot_loader = lambda: None
        return table

    catalog.get_table = get_table_reading_files


def _no_clobber(file_io) -> None:
    """Make a local FileIO's rename of a file fail when the target exists, across processes.

    A snapshot is committed by renaming a temporary file to `snapshot-N` only if no other writer
    made snapshot N first. pypaimon's LocalFileIO checks that the target is absent and renames under
    a lock of its own process: two servers (processes) committing the same N at once could both
    pass the check, and the second rename would replace the first server's snapshot, losing its
    commit. A hard link fails atomically when the target exists (POSIX `link`), so the first one
    wins and the other commit retries on top of it, as Paimon's commit expects.

    Read from pypaimon 2.1.0: `pypaimon.filesystem.local_file_io.LocalFileIO.rename(src, dst) ->
    bool` (False when the target exists) and its private `_to_file(path) -> pathlib.Path`."""
    from pypaimon.filesystem.local_file_io import LocalFileIO

    if not isinstance(file_io, LocalFileIO):
        return
    rename = file_io.rename

    def link_then_unlink(src: str, dst: str) -> bool:
        source, target = file_io._to_file(src), file_io._to_file(dst)
        if not source.is_file() or target.is_dir():
            return rename(src, dst)  # directories (a table renamed), and a directory as the target
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except FileExistsError:
            return False
        source.unlink()
        return True

    file_io.rename = link_then_unlink


def list_tables(catalog) -> list[str]:
    """Every `DB.TABLE` of the catalog, sorted. Read from pypaimon 2.1.0: `list_databases`,
    `list_tables` (public)."""
    names = []
    for db in catalog.list_databases():
        names += [f"{db}.{t}" for t in catalog.list_tables(db)]
    return sorted(names)


def create_table(catalog, name: str, schema: pa.Schema, primary_keys, partition_keys, options) -> None:
    """Create the table (and its database when missing); raises ALREADY_EXISTS if it exists.

    Read from pypaimon 2.1.0: `Schema.from_pyarrow_schema`, `create_database`, `create_table`
    (public); the exception classes of `pypaimon.catalog.catalog_exception`."""
    from pypaimon import Schema

    catalog.create_database(name.split(".", 1)[0], True)
    paimon_schema = Schema.from_pyarrow_schema(schema, partition_keys=partition_keys or None,
                                               primary_keys=primary_keys or None, options=options)
    catalog.create_table(name, paimon_schema, False)


DROP_ATTEMPTS = 5


def drop_table(catalog, name: str) -> bool:
    """Drop the table: True once it is gone, False when another writer kept adding files to its
    directory while it was deleted (a server or job still writing into it), attempt after attempt.
    Raises NOT_FOUND_ERRORS when there is no such table.

    A delete that failed may have removed the schema already, so the attempts after the first
    delete the table's directory itself: through `catalog.drop_table` again, a table whose schema
    is gone is "not found", and the drop answered NOT_FOUND with its directory left behind. The
    JDBC catalog removes the table's name, then deletes its directory without a word when that
    fails: a directory left behind that is still this table's (its identity, or no schema) is
    deleted the same way, or a table created again under the name would find its snapshots.

    Read from pypaimon 2.1.0: `catalog.drop_table(identifier)` (public) checks that the table exists
    (`get_table`), then deletes its directory recursively (`table.file_io.delete(table.table_path,
    True)`, False when the path is gone; JdbcCatalog through `file_io.delete_directory_quietly`,
    which logs a failure and returns); a file created in it meanwhile fails the delete with
    ENOTEMPTY."""
    from flight_server.paimon.compat.layout import table_identity

    table = catalog.get_table(name)
    identity = table_identity(table)
    for attempt in range(DROP_ATTEMPTS):
        try:
            if attempt == 0:
                catalog.drop_table(name)
            else:
                table.file_io.delete(table.table_path, True)
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise
            continue
        if not table.file_io.exists(table.table_path) or table_identity(table) not in (identity, None):
            return True  # gone, or another table's now (created again meanwhile)
    return False


def fixed_buckets(table) -> int | None:
    """The bucket count of a fixed-bucket table; None for bucket=-1 (unaware or dynamic) or -2.

    Read from pypaimon 2.1.0: `table.options.bucket()` (CoreOptions)."""
    n = table.options.bucket()
    return n if n and n > 0 else None


def row_kind_field(table) -> str | None:
    """The column a primary-key table takes each row's kind from (`rowkind.field`), else None
    (an append table's writer ignores the option).

    Read from pypaimon 2.1.0: `table.options.options.to_map()` (CoreOptions over Options) and
    `table.primary_keys`; pypaimon.write.row_kind reads the option the same way."""
    if not table.primary_keys:
        return None
    return table.options.options.to_map().get("rowkind.field") or None


def refuses_retractions(table) -> str | None:
    """The merge engine of a primary-key table whose rows may not be retractions (-U, -D), else
    None: pypaimon's partial-update and aggregation merges fail on any such row (ignore-delete and
    retract handling are not implemented for them), its first-row merge unless `ignore-delete`.
    Such a row would fail the group commit it joined, or every later read of its key.

    Read from pypaimon 2.1.0: `table.options.merge_engine()` (a MergeEngine), `table.options
    .ignore_delete()`; `PartialUpdateMergeFunction.add`, `AggregateMergeFunction.add` and
    `FirstRowMergeFunction.add` raise on a row that is not an add."""
    from pypaimon.common.options.core_options import MergeEngine

    if not table.primary_keys:
        return None
    engine = table.options.merge_engine()
    if engine in (MergeEngine.PARTIAL_UPDATE, MergeEngine.AGGREGATE) or (
            engine == MergeEngine.FIRST_ROW and not table.options.ignore_delete()):
        return getattr(engine, "value", str(engine))
    return None


COMPACTION_CHANGELOG = ("lookup", "full-compaction")  # changelog-producers whose changelog compaction writes


def compaction_changelog_producer(table) -> str | None:
    """The table's changelog-producer when its changelog is written only by compaction, else None.

    Read from pypaimon 2.1.0: `table.options.changelog_producer()`, an enum whose `value` is the
    option's text."""
    producer = table.options.changelog_producer()
    value = getattr(producer, "value", producer)
    return value if value in COMPACTION_CHANGELOG else None


def native_write_table(table):
    """The table with pypaimon's native (Rust) writer switched on: 15-40x faster than its Python
    writer for fixed buckets and primary keys (docs/benchmarks.md); pypaimon falls back to Python
    by itself for what the native writer does not support.

    A primary-key table's writers (of either builder) give the files they wrote the key columns
    before their commit messages are handed out (`merge_tree.add_key_columns`): the native writer
    leaves them out, and Paimon before 1.0 cannot read such files. And they follow other writers'
    commits (`_follow_other_writers`). Only this copy of the table, its builders and their writers
    change (their own methods); no class.

    Read from pypaimon 2.1.0: the `write.native.enabled` option, `table.copy(options)`;
    `new_stream_write_builder()` and `new_batch_write_builder()`, their `new_write()`, and its
    `prepare_commit(...)` returning CommitMessages."""
    native = table.copy({"write.native.enabled": "true"})
    if table.primary_keys:
        _wrap_primary_key_writers(native)
    return native


def stream_write_builder(table, commit_user: str | None = None):
    """A stream write builder of `table` (a `native_write_table`), whose commit user is
    `commit_user` when given: a commit worker's writers are of the serving process's builder,
    whose commit user names the server's snapshots.

    Read from pypaimon 2.1.0: `new_stream_write_builder()` and the builder's private
    `_with_commit_user(user)` (its `commit_user` is what its writers and commits use)."""
    builder = table.new_stream_write_builder()
    if commit_user is not None:
        builder._with_commit_user(commit_user)
    return builder


def _wrap_primary_key_writers(table) -> None:
    """See `native_write_table`. Read from pypaimon 2.1.0: see `native_write_table`."""
    from flight_server.paimon.compat.merge_tree import add_key_columns

    def wrap_builder(make):
        def new_builder(*args, **kwargs):
            builder = make(*args, **kwargs)
            new_write = builder.new_write

            def wrapped_new_write(*a, **k):
                writer = new_write(*a, **k)
                prepare = writer.prepare_commit
                committed = _follow_other_writers(table, writer, lambda: new_write(*a, **k))

                def prepare_commit(*pa_, **pk):
                    messages = prepare(*pa_, **pk)
                    add_key_columns(table, messages)
                    committed()
                    return messages

                writer.prepare_commit = prepare_commit
                return writer

            builder.new_write = wrapped_new_write
            return builder

        return new_builder

    table.new_stream_write_builder = wrap_builder(table.new_stream_write_builder)
    table.new_batch_write_builder = wrap_builder(table.new_batch_write_builder)


FOLLOWED_SNAPSHOTS = 16  # more snapshots than this since a writer's last look: it is made anew unread


def _follow_other_writers(table, writer, fresh):
    """Make a primary-key table's native `writer` follow what other writers commit; returns the
    hook its `prepare_commit` calls.

    A writer numbers a bucket's rows on from the highest sequence number it restored, when it
    first wrote the bucket, and Paimon orders a key's rows by it; a dynamic-bucket writer also
    keeps the key index it loaded then. A writer that lives across commits (the server's table
    writers) would, after another writer's commit into the bucket (Java Paimon, another server,
    a staged job), number its rows below that commit's, so its updates and deletes of those keys
    were lost, and put a key another writer added to the index into a second bucket. So at the
    first write after each `prepare_commit`, when a snapshot that is not a compaction was
    committed since the writer's last look by another commit user, the native writer under it is
    replaced by a fresh one (`fresh()`, the builder's own `new_write`), which restores the
    buckets and the index from the latest snapshot. Rows another writer commits while this one
    holds uncommitted rows are ordered as Paimon orders two concurrent writers: undefined (use
    `sequence.field`).

    Read from pypaimon 2.1.0: NativeTableWrite's `write_arrow_batch(data, bucket=None)` (its
    `write_arrow` calls it), `commit_user`, and its private `_native_writer` (the Rust writer,
    `close()`d; prepared commit messages' files are not its own) and `_python_writer` (None while
    native); `table.snapshot_manager()`'s `get_latest_snapshot()` and `get_snapshot_by_id(id)`,
    a Snapshot's `id`, `commit_user` and `commit_kind`."""
    if getattr(writer, "_python_writer", False) is not None or getattr(writer, "_native_writer", None) is None:
        return lambda: None  # pypaimon's Python writer: not followed
    # looked: the latest snapshot id at the last look; clean: nothing written since the last commit
    state: dict[str, int | bool | None] = {"looked": None, "clean": True}
    manager = table.snapshot_manager()
    write_batch = writer.write_arrow_batch

    def others_committed(since: int, latest) -> bool:
        if latest.id - since > FOLLOWED_SNAPSHOTS:
            return True
        for sid in range(since + 1, latest.id + 1):
            snapshot = latest if sid == latest.id else manager.get_snapshot_by_id(sid)
            if snapshot is None or (snapshot.commit_user != writer.commit_user and snapshot.commit_kind != "COMPACT"):
                return True  # gone (expired): it may have been another writer's
        return False

    def write_arrow_batch(data, bucket=None):
        if state["clean"] and writer._python_writer is None:
            state["clean"] = False
            latest = manager.get_latest_snapshot()
            looked, state["looked"] = state["looked"], latest.id if latest is not None else 0
            if looked is not None and latest is not None and latest.id > looked and others_committed(looked, latest):
                shell = fresh()
                old, writer._native_writer, shell._native_writer = writer._native_writer, shell._native_writer, None
                old.close()
        return write_batch(data, bucket)

    def committed():
        state["clean"] = True

    writer.write_arrow_batch = write_arrow_batch
    return committed


def shares_buckets(table) -> bool:
    """Whether several writers may write the table at once, each its own files (an append table
    with bucket -1, as Spark's tasks write it). A table that routes rows to buckets (primary keys,
    fixed or dynamic buckets) is written one bucket per writer, and only pypaimon-rust's writer
    knows a row's bucket: such a table gets one writer.

    Read from pypaimon 2.1.0: `table.bucket_mode()` and `pypaimon.table.bucket_mode.BucketMode`."""
    from pypaimon.table.bucket_mode import BucketMode

    return not table.primary_keys and table.bucket_mode() == BucketMode.BUCKET_UNAWARE


def arrow_schema(table) -> pa.Schema:
    """The table's columns as Arrow types (nullability included).

    Read from pypaimon 2.1.0: `pypaimon.schema.data_types.PyarrowFieldParser.from_paimon_schema`."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.fields)
