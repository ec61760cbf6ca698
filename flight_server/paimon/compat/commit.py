"""Rewrite and commit: a split over files a compaction chose, the commit messages of its output,
and its COMPACT commit (Paimon's optimistic commit: a concurrent one that removed the same files
makes ours fail, never both land).

pypaimon 2.1 has no compaction and no public commit of a compaction's result (a commit that
deletes files and adds others without adding rows); its FileStoreCommit's retrying commit with
conflict detection is what we borrow.
"""

from __future__ import annotations

import dataclasses

COMPACT_SOURCE = 1  # DataFileMeta.file_source of a compaction's output (Java's FileSource.COMPACT)


def data_split(entries: list, data_path, partition, bucket: int, total_buckets, raw_convertible: bool):
    """A split over the files of `entries` (manifest entries of one partition and bucket, in the
    order they are read), each file's path set from `data_path(entry)`.

    Read from pypaimon 2.1.0: `pypaimon.read.split.DataSplit(files, partition, bucket,
    raw_convertible=, total_buckets=)`; its readers open `DataFileMeta.file_path`, which the
    planner's entries leave unset."""
    from pypaimon.read.split import DataSplit

    metas = []
    for entry in entries:
        entry.file.file_path = data_path(entry)
        metas.append(entry.file)
    return DataSplit(metas, partition, bucket, raw_convertible=raw_convertible, total_buckets=total_buckets)


def mark_compacted(messages: list) -> list:
    """`messages` with each file they add marked as a compaction's output, as Java's append
    compaction marks it.

    Read from pypaimon 2.1.0: `CommitMessage.new_files`, `DataFileMeta.file_source`."""
    for message in messages:
        for meta in message.new_files:
            meta.file_source = COMPACT_SOURCE
    return messages


def commit_message(partition_values: tuple, bucket: int, new_files: list, total_buckets):
    """A commit message adding `new_files` to a bucket.

    Read from pypaimon 2.1.0: `pypaimon.write.commit_message.CommitMessage(partition, bucket,
    new_files, total_buckets=)`."""
    from pypaimon.write.commit_message import CommitMessage

    return CommitMessage(partition_values, bucket, new_files, total_buckets=total_buckets)


def at_level(meta, level: int):
    """The same data file at another level (Paimon's upgrade: the file is not rewritten).

    Read from pypaimon 2.1.0: `DataFileMeta` is a dataclass with a `level` field."""
    return dataclasses.replace(meta, level=level)


class CompactCommit:
    """One COMPACT commit: the files `messages` add in place of the files of `replaced` (manifest
    entries), as one snapshot that adds no rows, by `commit_user`. Its base manifest list merges
    every small manifest (a replaced file's ADD and DELETE cancel), so a planner reads about as
    few manifests as for a table written in one commit.

    Read from pypaimon 2.1.0: `new_batch_write_builder().new_commit()` (a BatchTableCommit) holds
    its `file_store_commit` (FileStoreCommit), whose `commit_user` names the snapshot's committer
    and whose private `_collect_manifest_entries(messages)` turns messages into ADD entries;
    `pypaimon.manifest.schema.manifest_entry.ManifestEntry(kind, partition, bucket,
    total_buckets, file)`; the private `_try_commit(commit_kind, commit_identifier,
    commit_entries_plan, detect_conflicts)` calls `commit_entries_plan(latest_snapshot)` at each
    attempt and retries a conflict or a lost race until `commit.max-retries`, raising when it
    gives up."""

    def __init__(self, table, commit_user: str, messages: list, replaced: list):
        from pypaimon.manifest.schema.manifest_entry import ManifestEntry

        from flight_server.paimon.compat.manifests import merge_manifests_on_commit

        self._commit = table.new_batch_write_builder().new_commit()
        merge_manifests_on_commit(self._commit, min_count=1)
        self._fsc = self._commit.file_store_commit
        self._commit_user = commit_user
        self.adds = self._fsc._collect_manifest_entries(messages)
        self.deletes = [ManifestEntry(kind=1, partition=e.partition, bucket=e.bucket, total_buckets=e.total_buckets,
                                      file=e.file) for e in replaced]

    def run(self, identifier: int, seen: list) -> None:
        """Commit with `identifier`; `seen` gets the latest snapshot (or None) at each attempt.
        Raises when the commit conflicts (another writer removed a replaced file meanwhile), and
        when pypaimon calls its outcome uncertain (it may have landed)."""
        def plan(latest):
            seen.append(latest)
            return self.adds + self.deletes

        self._fsc.commit_user = self._commit_user
        self._fsc._try_commit(commit_kind="COMPACT", commit_identifier=identifier, commit_entries_plan=plan,
                              detect_conflicts=True)

    def close(self) -> None:
        self._commit.close()


def guard_commits(table_commit, check) -> None:
    """Run `check(latest_snapshot, snapshot_properties)` before each attempt of `table_commit`'s
    commits, with the latest snapshot that attempt builds on: an exception it raises ends the
    commit with nothing of that attempt written. A snapshot is only ever made as the next one after
    the snapshot the check saw (another writer's snapshot in between fails the attempt, and the next
    attempt is checked again), so what the check read is what the commit lands on. It may update
    `snapshot_properties` in place. An attempt that finds an earlier attempt of the same commit
    landed (a retry after an uncertain outcome) is not checked: it commits nothing.

    Read from pypaimon 2.1.0: `TableCommit.file_store_commit` (FileStoreCommit); its private
    `_try_commit` calls `self._try_commit_once(retry_result=, commit_kind=, commit_entries=, ...,
    commit_identifier=, latest_snapshot=, ..., snapshot_properties=)` with keywords at each
    attempt, and the private `_is_duplicate_commit(retry_result, latest_snapshot,
    commit_identifier, commit_kind)` says whether an earlier attempt landed."""
    fsc = table_commit.file_store_commit
    attempt = fsc._try_commit_once

    def guarded(**kw):
        if not fsc._is_duplicate_commit(kw["retry_result"], kw["latest_snapshot"], kw["commit_identifier"],
                                        kw["commit_kind"]):
            check(kw["latest_snapshot"], kw["snapshot_properties"])
        return attempt(**kw)

    fsc._try_commit_once = guarded


class GroupCommit:
    """A table's commit object for commit after commit of new files, as `commit_user` (the writers'
    builder's, so that `find_commit` finds its commits): `check(latest, properties)` runs before
    each attempt (`guard_commits`), the manifests merge as Java's do (`merge_manifests_on_commit`),
    and `commit` returns the snapshot it made from pypaimon's callback (`landed_snapshots`).

    Read from pypaimon 2.1.0: `WriteBuilder._with_commit_user(commit_user)` (private) sets the
    commit user its `new_commit()` commits as; `TableCommit.commit(messages, identifier,
    snapshot_properties=)`."""

    def __init__(self, table, commit_user: str, check):
        from flight_server.paimon.compat.manifests import merge_manifests_on_commit
        from flight_server.paimon.compat.snapshots import landed_snapshots

        builder = table.new_stream_write_builder()
        builder._with_commit_user(commit_user)
        self._commit = builder.new_commit()
        merge_manifests_on_commit(self._commit)  # else every commit costs more than the last
        guard_commits(self._commit, check)
        self._landed = landed_snapshots(self._commit)

    def commit(self, messages: list, identifier: int, properties: dict[str, str]) -> int | None:
        """The snapshot the commit made, or None when pypaimon said none (read it back then)."""
        self._landed.clear()
        self._commit.commit(messages, identifier, snapshot_properties=properties)
        return self._landed.get(identifier)

    def close(self) -> None:
        self._commit.close()


def makes_snapshot(messages: list) -> bool:
    """Whether committing `messages` makes a snapshot: not when they add and delete no file and no
    index (a first-row table's writer drops rows whose key the table holds, so a batch of those
    writes nothing). Such a commit is skipped: there is nothing in it to hold.

    Read from pypaimon 2.1.0: `FileStoreCommit._try_commit` makes no snapshot for a commit without
    manifest entries (`CommitMessage.new_files`, `deleted_files`) or index changes (`index_adds`,
    `index_deletes`) unless `snapshot.ignore-empty-commit` is false; the server never sets it."""
    return any(m.new_files or m.deleted_files or m.index_adds or m.index_deletes for m in messages)
