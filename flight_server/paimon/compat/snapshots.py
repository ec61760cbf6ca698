"""Snapshots, tags and consumers: reading them as Java Paimon does where pypaimon's reads fail
under a concurrent expiry, and writing consumer progress whole or not at all."""

from __future__ import annotations

import errno
import functools
import os
import uuid

import tenacity
from pypaimon.consumer.consumer import Consumer
from pypaimon.consumer.consumer_manager import ConsumerManager
from pypaimon.filesystem.local_file_io import LocalFileIO

from flight_server.paimon.compat.layout import list_names
from flight_server.wire.errors import WrongState

RECENT_SNAPSHOTS = 100  # how far back a follow looks for a changelog before saying none is made


# -- snapshots ------------------------------------------------------------------------------


def latest_snapshot_id(table) -> int | None:
    """The table's latest snapshot id, None while it has none.

    Read from pypaimon 2.1.0: `SnapshotManager.get_latest_snapshot`."""
    latest = table.snapshot_manager().get_latest_snapshot()
    return None if latest is None else latest.id


def snapshot(manager, snapshot_id: int):
    """The snapshot, None when there is none: also when expiry deleted it between pypaimon's
    existence check and its read (which raises).

    Read from pypaimon 2.1.0: `SnapshotManager.get_snapshot_by_id` checks, then reads, and raises
    FileNotFoundError when the file went in between."""
    try:
        return manager.get_snapshot_by_id(snapshot_id)
    except FileNotFoundError:
        return None


def is_data_commit(snapshot) -> bool:
    """Read from pypaimon 2.1.0: `Snapshot.commit_kind` is the text "APPEND" for a data commit."""
    return snapshot.commit_kind == "APPEND"


def recent_changelog(manager) -> bool:
    """Whether one of the last RECENT_SNAPSHOTS snapshots carries a changelog.

    Read from pypaimon 2.1.0: `Snapshot.changelog_manifest_list` (None without one)."""
    latest = manager.get_latest_snapshot()
    if latest is None:
        return False
    for sid in range(latest.id, max(0, latest.id - RECENT_SNAPSHOTS), -1):
        snap = latest if sid == latest.id else snapshot(manager, sid)
        if snap is not None and snap.changelog_manifest_list:
            return True
    return False


def snapshots_around(manager, millis: int) -> tuple[int | None, int | None]:
    """(last snapshot with time_millis <= millis, first with time_millis >= millis), ids or None.

    Read from pypaimon 2.1.0: `SnapshotManager.earlier_or_equal_time_mills`."""
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


def find_commit(table, commit_user: str, identifier: int) -> int:
    """The id of the snapshot a commit by `commit_user` with `identifier` made (the latest, unless
    another writer committed right after).

    Read from pypaimon 2.1.0: `Snapshot.commit_user` and `commit_identifier`."""
    manager = table.snapshot_manager()
    snap = manager.get_latest_snapshot()
    while snap is not None:
        if snap.commit_user == commit_user and snap.commit_identifier == identifier:
            return snap.id
        snap = snapshot(manager, snap.id - 1) if snap.id > 1 else None
    raise RuntimeError(f"commit {identifier} of {commit_user} made no snapshot")


@tenacity.retry(retry=tenacity.retry_if_exception_type(FileNotFoundError), stop=tenacity.stop_after_attempt(100),
                reraise=True)
def _hinted_earliest(snapshot_manager):
    """pypaimon's earliest snapshot by its EARLIEST hint, read again (at once) while it names a
    snapshot that expired between pypaimon's existence check and its read.

    Read from pypaimon 2.1.0: `SnapshotManager.try_get_earliest_snapshot`."""
    return snapshot_manager.try_get_earliest_snapshot()


def earliest_snapshot_id(snapshot_manager) -> int | None:
    """The earliest snapshot id, None when there is none (pypaimon raises on an empty table). Where
    pypaimon's EARLIEST hint fails it (torn, or over 300 snapshots behind), the snapshot directory
    is listed, as Java Paimon's findEarliest does.

    Read from pypaimon 2.1.0: `try_get_earliest_snapshot` raises FileNotFoundError, RuntimeError
    or ValueError on a hint it cannot follow."""
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
    """The ids of the snapshot files in the snapshot directory, in order.

    Read from pypaimon 2.1.0: `SnapshotManager.snapshot_dir` and `file_io`."""
    ids = []
    for name in list_names(snapshot_manager.file_io, snapshot_manager.snapshot_dir):
        if name.startswith("snapshot-") and name[len("snapshot-"):].isdigit():
            ids.append(int(name[len("snapshot-"):]))
    return sorted(ids)


# What refused a write, by errno (a local warehouse), in the operator's words.
_STORAGE_ERRNOS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied: operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for the file system",
    errno.ENOTDIR: "a file stands where a directory should be",
    errno.EEXIST: "a file stands where a directory should be",
}
# The same in the words of pyarrow's and pypaimon's object-store file systems, whose OSErrors
# carry no errno.
_STORAGE_WORDS = (
    ("no space left", "no space left on device"),
    ("quota", "disk quota exceeded"),
    ("read-only file system", "read-only file system"),
    ("access denied", "permission denied"),
    ("accessdenied", "permission denied"),
    ("permission denied", "permission denied"),
    ("forbidden", "permission denied"),
)


def storage_failure(e: BaseException) -> str | None:
    """Why the warehouse refused a write, in a few words without any path ("permission denied",
    "no space left on device"); None when `e` is not a refusal by storage (a bug, say).

    By errno where the error has one (LocalFileIO raises the OS's errors); else (the object-store
    file systems, pyarrow's, whose OSErrors carry none) by its words.

    Read from pypaimon 2.1.0: `LocalFileIO` writes through pathlib (the OS's OSError subclasses,
    with their errno); `PyArrowFileIO` passes pyarrow's OSErrors on."""
    if not isinstance(e, OSError):
        return None
    if isinstance(e, PermissionError) and e.errno not in _STORAGE_ERRNOS:
        return "permission denied"
    if e.errno in _STORAGE_ERRNOS:
        return _STORAGE_ERRNOS[e.errno]
    text = str(e).lower()
    for words, reason in _STORAGE_WORDS:
        if words in text:
            return reason
    return os.strerror(e.errno).lower() if e.errno else "an I/O error"


def table_name(table) -> str:
    """The table's `DB.TABLE` name.

    Read from pypaimon 2.1.0: `FileStoreTable.identifier.get_full_name()`."""
    return table.identifier.get_full_name()


# -- tags -----------------------------------------------------------------------------------


def tag_snapshot(table, tag: str) -> int | None:
    """Read from pypaimon 2.1.0: `table.tag_manager().get(name)` (None when there is none)."""
    found = table.tag_manager().get(tag)
    return None if found is None else found.id


def tag_names(table) -> list[str]:
    """Read from pypaimon 2.1.0: `TagManager.list_tags` (which fails when the tag directory is missing)."""
    manager = table.tag_manager()
    if not manager.file_io.exists(manager.tag_directory()):
        return []
    return sorted(str(name) for name in manager.list_tags())


def tagged_snapshots(file_io, table_path: str) -> list:
    """The snapshots the table's tags keep, by id.

    Read from pypaimon 2.1.0: `pypaimon.TagManager(file_io, path)`; a tag is a Snapshot with
    `trim_to_snapshot()` (older versions: the Snapshot itself)."""
    from pypaimon.tag.tag_manager import TagManager

    tags = TagManager(file_io, table_path)
    out = []
    for name in tags.list_tags() if file_io.exists(tags.tag_directory()) else []:
        tag = tags.get(name)
        if tag is not None:
            out.append(tag.trim_to_snapshot() if hasattr(tag, "trim_to_snapshot") else tag)
    return sorted(out, key=lambda s: s.id)


def create_tag(table, tag: str, snapshot_id: int, time_retained_ms: int | None) -> None:
    """Paimon's create_tag: a tag file holding the snapshot (and, with a retention, its create
    time and TTL), written by pypaimon's TagManager as Java's writes it. The caller has checked
    that the tag is new and the snapshot kept.

    Read from pypaimon 2.1.0: `table.create_tag(name, snapshot_id, ignore_if_exists, time_retained)`."""
    table.create_tag(tag, snapshot_id, ignore_if_exists=False,
                     time_retained=None if time_retained_ms is None else f"{time_retained_ms} ms")


def delete_tag(table, tag: str) -> bool:
    """Paimon's delete_tag: the tag file only (no data file); False when there was none.

    Read from pypaimon 2.1.0: `table.delete_tag(name)`."""
    return bool(table.delete_tag(tag))


# -- consumers ------------------------------------------------------------------------------

CONSUMER_PREFIX = ConsumerManager.CONSUMER_PREFIX  # a consumer's progress file: consumer/<prefix><id>


def read_consumer(table, consumer_id: str) -> int | None:
    """The consumer's next snapshot, or None if it has no progress yet.

    Read from pypaimon 2.1.0: `ConsumerManager.consumer(id)` retries a torn read for 2 s, then
    raises RuntimeError; its private `_consumer_path(id)`."""
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
    over (an object store's PUT is already atomic).

    Read from pypaimon 2.1.0: `ConsumerManager.reset_consumer`, its private `_file_io` and
    `_consumer_path(id)`; `LocalFileIO._to_file`; `Consumer(next_snapshot=...).to_json()`."""
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
    """Put a consumer back as it was: its earlier progress, or no file when it had none.

    Read from pypaimon 2.1.0: `ConsumerManager`'s private `_file_io` and `_consumer_path(id)`."""
    if next_snapshot is not None:
        write_consumer(table, consumer_id, next_snapshot)
        return
    manager = table.consumer_manager()
    path = manager._consumer_path(consumer_id)
    try:
        manager._file_io.delete(path, False)
    except FileNotFoundError:
        pass


def consumers(file_io, table_path: str) -> dict[str, int]:
    """Consumer id -> its next snapshot, for every consumer of the table.

    Read from pypaimon 2.1.0: `pypaimon.consumer.consumer_manager.ConsumerManager(file_io, path).consumers()`."""
    return ConsumerManager(file_io, table_path).consumers()


def landed_snapshots(table_commit) -> dict[int, int]:
    """A dict that `table_commit` fills, after each commit that landed, with its commit identifier
    -> the id of the snapshot it made (also when a retried commit finds its first attempt had
    landed): what `find_commit` would read back, without reading the snapshots again.

    Read from pypaimon 2.1.0: `TableCommit.add_commit_callback(CommitCallback)`, called with a
    `CommitCallbackContext(snapshot, commit_entries, identifier)` once the snapshot is written."""
    landed: dict[int, int] = {}
    table_commit.add_commit_callback(_landed_callback()(landed))
    return landed


@functools.cache
def _landed_callback():
    """The callback class, made once (a class per commit object cost each open committer ~3.6 KiB).

    Read from pypaimon 2.1.0: `pypaimon.write.commit_callback.CommitCallback`, an ABC with `call(context)`."""
    from pypaimon.write.commit_callback import CommitCallback

    class _Landed(CommitCallback):
        def __init__(self, landed: dict[int, int]):
            self.landed = landed

        def call(self, context) -> None:
            self.landed[context.identifier] = context.snapshot.id

    return _Landed
