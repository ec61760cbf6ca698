"""Where a table's files are and how they are listed, read, written and deleted by path: Paimon's
layout under the table's directory (snapshot/, manifest/, statistics/, consumer/, schema/, the
bucket and partition directories) and the server's own directory beside it (`flight-paimon/`).

The one module that joins a table's paths or touches its files by path; maintenance (which files
expiry and orphan removal delete) and ingest (the producer records, staged files) ask it. A
catalog or file system that places or reaches the files otherwise is a change here."""

from __future__ import annotations

import contextlib
import errno
import os
import uuid

from pypaimon.filesystem.local_file_io import LocalFileIO

PRODUCER_RECORDS = "flight-paimon/producers"  # the server's own: Paimon's procedures never touch it
UNKNOWN_MTIME_MS = 1 << 62  # a listed file whose status has no mtime: never older than any threshold
# The table's top-level directories whose files Paimon's OrphanFilesClean may delete: manifest/,
# index/, statistics/, and the data files' bucket-N and key=value (partition) directories.
_ORPHAN_DIRS = ("manifest", "index", "statistics")


def orphan_candidate_dir(name: str) -> bool:
    """Whether a top-level directory of a table holds files orphan removal may delete (anything
    else: snapshot/, schema/, tag/, consumer/, the server's own, Iceberg metadata, is left alone).

    Read from pypaimon 2.1.0 (and Java Paimon's OrphanFilesClean): data files live under
    `bucket-N` directories, inside one `key=value` directory per partition column."""
    return name in _ORPHAN_DIRS or name.startswith("bucket-") or ("=" in name and not name.startswith("."))


class TableFiles:
    """One table's files by path.

    Read from pypaimon 2.1.0: a table's `file_io` (LocalFileIO or an object store's FileIO:
    `exists`, `list_status`, `read_file_utf8`, `write_file`, `delete`, `check_or_mkdirs`) and
    `table_path`; its `snapshot_manager().get_snapshot_path(id)`."""

    def __init__(self, table):
        self._table = table
        self.file_io = table.file_io
        self.root = str(table.table_path).rstrip("/")

    def path(self, *parts: str) -> str:
        """The path of `parts` under the table's directory."""
        return "/".join((self.root, *parts))

    # -- Paimon's files -----------------------------------------------------------------------

    def snapshot_path(self, snapshot_id: int) -> str:
        return self._table.snapshot_manager().get_snapshot_path(snapshot_id)

    def manifest_path(self, name: str) -> str:
        """A manifest, manifest list or index manifest."""
        return self.path("manifest", name)

    def statistics_path(self, name: str) -> str:
        return self.path("statistics", name)

    def write_earliest_hint(self, snapshot_id: int) -> None:
        """Paimon's EARLIEST hint (snapshot/EARLIEST), written whole."""
        write_whole(self.file_io, self.path("snapshot", "EARLIEST"), str(snapshot_id))

    def consumer_files(self):
        """(path, name, size, mtime in epoch ms) of each consumer progress file (none without any)."""
        directory = self.path("consumer")
        if not self.file_io.exists(directory):
            return
        yield from self.files_in(directory)

    # -- listing ------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return bool(self.file_io.exists(path))

    def has_entries(self, directory: str) -> bool:
        """Whether the table's top-level `directory` (branch, changelog, ...) holds anything."""
        path = self.path(directory)
        return self.file_io.exists(path) and any(True for _ in self.entries(path))

    def list_files(self, top_dirs):
        """(path, name, size, mtime in epoch ms) of every file in the table's top-level directories
        `top_dirs(name)` accepts, and in the directories under them."""
        import pyarrow.fs as pafs

        pending = [self.path(name) for name, status in self.entries(self.root)
                   if status.type == pafs.FileType.Directory and top_dirs(name)]
        while pending:
            directory = pending.pop()
            yield from self.files_in(directory, pending)

    def files_in(self, directory: str, subdirectories: list | None = None):
        """(path, name, size, mtime in epoch ms) of each file in `directory` (mtime a datetime on
        object stores, epoch seconds locally); its subdirectories are appended to `subdirectories`."""
        import pyarrow.fs as pafs

        for name, status in self.entries(directory):
            if status.type == pafs.FileType.Directory:
                if subdirectories is not None:
                    subdirectories.append(f"{directory}/{name}")
                continue
            mtime = status.mtime
            if mtime is None:  # unknown: never old enough to delete
                mtime_ms = UNKNOWN_MTIME_MS
            else:
                mtime_ms = int(mtime.timestamp() * 1000) if hasattr(mtime, "timestamp") else int(mtime * 1000)
            yield f"{directory}/{name}", name, status.size or 0, mtime_ms

    def entries(self, directory: str):
        """(name, status) of each entry of `directory`."""
        for status in self.file_io.list_status(directory):
            path = str(getattr(status, "original_path", None) or status.path)
            yield path.rstrip("/").rsplit("/", 1)[-1], status

    def names(self, directory: str) -> list[str]:
        """The names of the entries of the table's `directory` (none when it does not exist)."""
        return list_names(self.file_io, self.path(directory))

    # -- reading, writing, deleting -----------------------------------------------------------

    def read_text(self, directory: str, name: str) -> str:
        """A small file of the table's `directory`; FileNotFoundError when it is gone."""
        return self.file_io.read_file_utf8(self.path(directory, name))

    def write_whole(self, directory: str, name: str, content: str) -> None:
        """A small file in the table's `directory` (made when missing), written whole or not at all."""
        make_dirs(self.file_io, self.path(directory))
        write_whole(self.file_io, self.path(directory, name), content)

    def delete(self, path: str) -> bool:
        """Delete one file; True if this call removed it (False: it was gone already). Any other
        failure (permission denied) raises."""
        try:
            return bool(self.file_io.delete(path, False))
        except FileNotFoundError:
            return False


def list_names(file_io, directory: str) -> list[str]:
    """The names of the entries of `directory` (none when it does not exist).

    Read from pypaimon 2.1.0: `FileIO.list_status` gives pyarrow FileInfos (local) or statuses
    with an `original_path` (object stores)."""
    if not file_io.exists(directory):
        return []
    return [str(getattr(status, "original_path", None) or status.path).rstrip("/").rsplit("/", 1)[-1]
            for status in file_io.list_status(directory)]


def write_whole(file_io, path: str, content: str) -> None:
    """Write a small file whole or not at all: on a local warehouse beside it, then renamed over
    (pypaimon overwrites in place, and a kill in between leaves an empty file); an object store's
    PUT is already atomic.

    Read from pypaimon 2.1.0: `LocalFileIO` and its private `_to_file(path)` (the local Path)."""
    if not isinstance(file_io, LocalFileIO):
        file_io.write_file(path, content, overwrite=True)
        return
    target = file_io._to_file(path)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        temp.write_text(content)
        os.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk leaves the empty temporary file behind
            temp.unlink(missing_ok=True)
        raise


def make_dirs(file_io, directory: str) -> None:
    """Create `directory` (and its parents) unless it is one already; a file in its place is
    NotADirectoryError, as the OS says it.

    Read from pypaimon 2.1.0: `FileIO.check_or_mkdirs` raises ValueError for a file in the way."""
    try:
        file_io.check_or_mkdirs(directory)
    except ValueError as e:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)) from e


def table_identity(table) -> str | None:
    """When the table was created (its first schema's time), read afresh; None once it is gone.

    Tells a table from a later one created under the same name: a reader planned on the first
    must never read the second's snapshots.

    Read from pypaimon 2.1.0: `pypaimon.schema.schema_manager.SchemaManager(file_io, path)`, its
    `get_schema(0)` (which wraps a file that vanished mid-read in a RuntimeError) and its private
    `_to_schema_path`."""
    from pypaimon.schema.schema_manager import SchemaManager

    manager = SchemaManager(table.file_io, table.table_path)
    try:
        schema = manager.get_schema(0)
    except (FileNotFoundError, RuntimeError):  # pypaimon wraps a file that vanished mid-read
        if table.file_io.exists(manager._to_schema_path(0)):
            raise
        return None  # dropped between the existence check and the read
    return None if schema is None else str(schema.time_millis)
