"""Publishing a table's snapshots: the one part of a committer that commits into Paimon.

Group commits (ingest/committer.py) and staged jobs' commits (ingest/staging.py, through the
committer's exclusive chores) both land through `Publisher.commit`, run by the committer's step
on a commit pool thread, one step at a time. The publisher owns what a commit needs: the table as
written (its schema version and identity), the writers' builder (whose commit user names this
server's snapshots; its writers are made here or, with commit workers, in the table's worker
process), the commit object (`compat.GroupCommit`, here or in that worker), the commit identifiers, and the producer map (`ProducerSeqs`) that each commit's
snapshot carries and that its exactly-once check (`_guard`) reads.
"""

from __future__ import annotations

import threading

import structlog

from flight_server.ingest.commit_workers import (
    CommitRequest,
    CommitWorkers,
    RemoteWriter,
    WriterSpec,
)
from flight_server.ingest.lanes import close_quietly
from flight_server.ingest.seqs import ProducerSeqs
from flight_server.paimon import compat
from flight_server.wire.errors import CommitRaced, TableReplaced

log = structlog.get_logger(__name__)

__all__ = ["Publisher"]


class Publisher:
    """A table's commits into Paimon, with the producer map they carry."""

    def __init__(self, name: str, table, commit_workers: CommitWorkers | None = None):
        self.name = name
        self.table, self.identity = table, compat.table_identity(table)
        self.columns = compat.columns_of(table)  # the schema it writes with (`adopt`: a newer one)
        self.native = compat.native_write_table(table)  # the table its writers and commits use
        self.producers = ProducerSeqs(table)
        self.ident = 0  # the last commit identifier handed out
        self._lock = threading.Lock()  # the builder: writer lanes make their writers from it
        self._builder = None
        self._commit = None  # the commit object (compat.GroupCommit) in this process
        self._worker = commit_workers.pick() if commit_workers is not None else None  # or the process it is in
        self._generation = 0  # the commit object's: a new one after a failure or a new schema
        self._attempt: tuple[dict[str, int], dict[str, int]] = ({}, {})  # the commit in flight's updates, firsts

    # -- writers (any thread) ----------------------------------------------------------------

    def new_writer(self):
        """A new pypaimon writer of the table (its commit user is this publisher's): in the table's
        commit worker process when it has one (a `RemoteWriter`), else here."""
        builder = self._builder_now()
        if self._worker is not None:
            return RemoteWriter(self._worker, WriterSpec(self.name, self.columns.schema_id, builder.commit_user))
        return builder.new_write()

    def drop_builder(self) -> None:
        """Writers are made anew from a new builder (after a failure dropped them)."""
        with self._lock:
            self._builder = None

    def _builder_now(self):
        with self._lock:
            if self._builder is None:
                self._builder = self.native.new_stream_write_builder()
            return self._builder

    # -- commits (the committer's step) -------------------------------------------------------

    def next_identifier(self) -> int:
        """The identifier of the next commit (its writers prepare their files with it)."""
        self.ident += 1
        return self.ident

    def holds(self, producer: str | None, seq: int | None) -> bool:
        """Whether the table (as of its latest snapshot) holds the producer's `seq`."""
        if producer is None:
            return False
        self.producers.refresh()
        last = self.producers.last_seq(producer)
        return last is not None and seq <= last

    def commit(self, messages: list, updates: dict[str, int], firsts: dict[str, int],
               extra: dict[str, str] | None = None) -> int | None:
        """Commit `messages` (prepared with identifier `ident`) as one snapshot whose properties
        carry the producer map with `updates` (and `extra`: a staged job's own properties);
        returns the snapshot. `firsts`: each named producer's first seq in it, which the table
        must not hold yet (`_guard`). After a failure the commit object is dropped (its state is
        unknown) and the producer map read back from the table (the commit may have landed),
        unless the table was replaced."""
        self._attempt = (updates, firsts)
        properties = {**self.producers.properties(updates), **(extra or {})}
        user = self._builder_now().commit_user
        try:
            if self._worker is not None:  # its Paimon work in a worker process; `_guard` still runs here
                key = (self.identity, self.columns.schema_id, user, self._generation)
                landed = self._worker.commit(CommitRequest(self.name, key, user, self.ident, messages, properties),
                                             self._guard)
            else:
                if self._commit is None:
                    self._commit = compat.GroupCommit(self.native, user, self._guard)
                landed = self._commit.commit(messages, self.ident, properties)
            # the snapshot pypaimon says it made (read back only if it said none)
            snapshot = landed if landed is not None else compat.find_commit(self.native, user, self.ident)
        except BaseException as e:
            self.failed(e)
            raise
        self.producers.committed(updates, snapshot)
        return snapshot

    def failed(self, e: BaseException) -> None:
        """A write or commit failed: drop the commit object and read the producer map back (a
        failed commit may still have landed), unless the table was replaced."""
        self.drop_commit()
        if not isinstance(e, TableReplaced):
            self._reload_producers()

    def adopt(self, table) -> None:
        """Write and commit with `table` (a newer schema of it) from now on."""
        with self._lock:
            self.table, self.native, self.columns = table, compat.native_write_table(table), compat.columns_of(table)
            self._builder = None
        self.drop_commit()

    def drop_commit(self) -> None:
        """The commit object's state is unknown (a failure) or stale (a new schema): the next
        commit makes a new one, here or in its worker."""
        commit, self._commit = self._commit, None
        self._generation += 1
        close_quietly(commit, self.name)

    def _guard(self, latest, properties: dict) -> None:
        """(In the commit, before each attempt, with the latest snapshot the attempt lands on.) The
        table is still the one the streams opened, and holds none of the commit's named batches:
        whichever server (or which of this server's streams) committed them first, they are never
        written twice. The producer map is merged to `latest`, so the check is exact, and the
        snapshot's map is the whole map as of it."""
        identity = compat.table_identity(self.table)
        if identity != self.identity:
            raise TableReplaced(
                f"Paimon table {self.name!r} was dropped{'' if identity is None else ' and created again'} since "
                "this stream opened (by another server or tool); its unacked batches were not committed. "
                "Open a new stream to write into the table as it is now.", table=self.name)
        self.producers.refresh(latest)  # other writers' commits since ours; a rollback reloads the map
        updates, firsts = self._attempt
        for producer, first in sorted(firsts.items()):
            last = self.producers.last_seq(producer)
            if last is not None and first <= last:
                raise CommitRaced(
                    f"Producer {producer!r}'s batches from seq {first} are already in Paimon table {self.name!r} "
                    f"(up to seq {last}, committed by another stream or server as of snapshot "
                    f"{self.producers.snapshot_of(producer)}); this commit was refused so that nothing is written "
                    "twice. Resume from producer_state (PaimonSink does).", table=self.name, producer=producer)
        properties.update(self.producers.properties(updates))

    def _reload_producers(self) -> None:
        try:
            fresh = ProducerSeqs(self.native)
        except Exception:  # noqa: BLE001 - keep the old map; the next commit refreshes it
            log.warning("producer_state_reload_failed", table=self.name, exc_info=True)
            return
        self.producers = fresh
