"""Staged writes: an attempt of a job's task written to data files now and committed later, with
the job's other attempts, in one snapshot (Paimon's Spark writer: tasks write, the driver commits).

A stage is a job (a Spark write, or one epoch of a stream); an attempt is one try of one of its
tasks. `put` writes an attempt's stream with pypaimon's native writer and keeps the commit
messages it prepared, in this server's memory (a primary-key table's attempts wait as Arrow files
on this server instead, written at the commit by the table's own writer: its rows' sequence
numbers, and a dynamic-bucket table's key index, are one writer's); `commit` commits the attempts
it is given, through the table's committer, between its group commits, as one snapshot
(exactly-once when it names a producer and seq: a seq already committed commits nothing; a stage
committed here answers a retry the same), and discards the stage's other attempts (failed and
speculative ones); `abort` discards all of them. Discarding deletes the attempt's files, which no
snapshot names: only files of attempts never handed to a commit are ever deleted (one whose
commit failed may have landed: orphan removal decides later, and keeps staged files meanwhile).
A stage idle for STAGE_IDLE_S is discarded; a server restart forgets its stages (their files are
then orphans).

A commit's snapshot carries the stage id (STAGE_PROPERTY, with a digest of its attempts, its rows
and its principal), so a commit_staged of a stage this server does not hold (it restarted as the
commit landed) looks for it in the table's snapshots: found, it answers that snapshot; absent, it
says nothing was committed only when every snapshot since the job began is kept (the id says when,
`names.job_stage`; or the table never expired one), and else that the outcome is unknown. A stage
belongs to the principal that staged it: another's commit or abort is PERMISSION_DENIED.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from flight_server.ingest.conform import Conformer
from flight_server.paimon import compat
from flight_server.wire import messages, producer_stream
from flight_server.wire.actions import StagedStats
from flight_server.wire.errors import (
    InvalidRequest,
    NotFound,
    OutcomeUnknown,
    PermissionDenied,
    Unavailable,
    WrongState,
)
from flight_server.wire.requests import WriteTarget, stage_started_ms

log = structlog.get_logger(__name__)

STAGE_IDLE_S = 6 * 3600.0
STAGED, DONE = "staged", "done"
IN_FLIGHT_WAIT_S = 20.0  # how long a commit_staged or abort_staged waits for the stage's commit in flight
CLOCK_SKEW_MS = 10 * 60 * 1000  # how far a job's clock (its stage id's start) may be from the server's
# A staged job's snapshot properties: the stage id, a digest of its attempts, its rows, its principal.
STAGE_PROPERTY = "flight-paimon.stage"
STAGE_ATTEMPTS_PROPERTY = "flight-paimon.stage-attempts"
STAGE_ROWS_PROPERTY = "flight-paimon.stage-rows"
STAGE_PRINCIPAL_PROPERTY = "flight-paimon.stage-principal"


@dataclass
class _Attempt:
    messages: list  # commit messages of the files it wrote into the table (none when spilled)
    rows: int
    spill: str | None = None  # its rows in an Arrow IPC file of this server, to be written at the commit
    identity: str | None = None  # the table's (compat.table_identity) when it was staged
    columns: compat.Columns | None = None  # the table's schema version its rows were conformed to
    state: str = STAGED
    handed: bool = False  # given to a commit once: its table files are never deleted here


class _Spill:
    """An attempt's rows kept in a local Arrow IPC file (a table whose one writer owns its key
    index: they are written through that writer's table at the commit). A writer's surface."""

    def __init__(self, directory: str, schema):
        import pyarrow as pa

        fd, self.path = tempfile.mkstemp(dir=directory, suffix=".arrow")
        self._sink = pa.OSFile(self.path, "wb")
        os.close(fd)
        self._writer = pa.ipc.new_file(self._sink, schema)

    def write_arrow_batch(self, batch) -> None:
        self._writer.write_batch(batch)

    def prepare_commit(self) -> list:
        self._writer.close()
        self._sink.close()
        return []

    def abort(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)

    def close(self) -> None:
        if not self._sink.closed:
            with contextlib.suppress(Exception):  # noqa: BLE001 - a half-written spill is deleted by abort
                self._writer.close()
            self._sink.close()


def _read_spills(attempts: list[_Attempt]):
    """Each spilled batch with the schema version it was conformed to (the commit evolves it to the
    table's current one)."""
    import pyarrow as pa

    for attempt in attempts:
        with pa.memory_map(attempt.spill) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i), attempt.columns


def _committed_in(snap) -> Committed:
    """A staged job's commit as its snapshot records it."""
    rows = (snap.properties or {}).get(STAGE_ROWS_PROPERTY, "0")
    return Committed(snap.id, int(rows) if rows.isdigit() else 0, False)


def _again(name: str, stage_id: str, committed: str | None, result: Committed, wanted: str) -> Committed:
    """A retried commit's answer: the first one's, if it names the same attempts (in any order)."""
    if committed is not None and committed != wanted:
        raise WrongState(f"Paimon table {name!r}: stage {stage_id!r} was committed in snapshot {result.snapshot} with "
                         "another set of attempts than this commit names; nothing more was committed.", table=name)
    return result


def _unknown(name: str, stage_id: str) -> OutcomeUnknown:
    return OutcomeUnknown(
        f"Paimon table {name!r}: stage {stage_id!r} is not staged on this server (it restarted, or the stage was "
        "staged on another server) and the table no longer keeps every snapshot since the job began, so whether it "
        f"was committed is unknown; look for a snapshot whose property {STAGE_PROPERTY!r} is {stage_id!r} before "
        "running the job again.", table=name)


def _not_abortable(name: str, stage_id: str, snapshot: int | None) -> WrongState:
    return WrongState(f"Paimon table {name!r}: stage {stage_id!r} was committed in snapshot {snapshot}, so it cannot "
                      "be aborted; its rows are in the table.", table=name)


@dataclass
class _Stage:
    principal: str | None  # who staged it (--auth): only they may commit or abort it
    attempts: dict[str, _Attempt] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)
    committing: bool = False  # a commit_staged of it runs now
    failed_ms: int | None = None  # a commit of it failed (it may have landed): when that commit began


@dataclass(frozen=True)
class Committed:
    snapshot: int | None
    rows: int
    skipped: bool


@dataclass(frozen=True)
class _Done:
    """A stage this server committed: a retry's answer."""

    attempts: str  # attempts_digest of the attempts committed
    result: Committed
    principal: str | None
    at: float


@dataclass(frozen=True)
class _Found:
    """What the table's snapshots say of a stage: the snapshot that committed it, or none, and
    whether none is proof (every snapshot since the job began was looked at)."""

    snapshot: object | None
    proven: bool


def attempts_digest(attempts) -> str:
    """The attempts a commit names, as a set: what a retry's attempts are compared by."""
    return hashlib.sha256("\n".join(sorted(set(attempts))).encode()).hexdigest()[:32]


def _owned(name: str, stage_id: str, owner: str | None, principal: str | None, verb: str) -> None:
    """A stage is committed or aborted only by the principal that staged it (as tickets are read
    only by the one that planned them); without --auth there are no principals, and a snapshot
    committed without one names none."""
    if principal is not None and owner is not None and owner != principal:
        raise PermissionDenied(f"Principal {principal!r} may not {verb} stage {stage_id!r} of Paimon table {name!r}: "
                               "another principal staged it; only the principal that staged a stage may "
                               f"{verb} it.", table=name)


class Staging:
    """The stages of one server, by (table, stage); one lock."""

    def __init__(self, table: Callable, committer: Callable):
        """`table(name)`: the pypaimon table; `committer(name)`: its TableCommitter."""
        self._table, self._committer = table, committer
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a stage's commit ended (landed or failed)
        self._stages: dict[tuple[str, str], _Stage] = {}
        self._spills: str | None = None  # the local directory of spilled attempts, made on first use
        self._done: dict[tuple[str, str], _Done] = {}  # stages committed here: a retry's answer
        self.in_flight_wait_s = IN_FLIGHT_WAIT_S

    def put(self, target: WriteTarget, schema, chunks, send_ack, fields: dict, principal: str | None = None) -> None:
        """Write one attempt's stream to files; each batch is acked `{"seq": i}` once written (the
        attempt is staged, not committed, when the stream's end marker has been read). The stage
        belongs to `principal`, the one that staged its first attempt."""
        self._discard_idle()
        table = self._table(target.table)
        conform = Conformer(compat.arrow_schema(table), schema, target.label, row_kind=compat.row_kind_field(table),
                            then="nothing of the attempt was staged", no_retractions=compat.refuses_retractions(table))
        with self._lock:
            self._check_stageable(target, principal)
        if table.primary_keys:  # rows wait for the commit, written then by the table's own writer (see above)
            writer = _Spill(self._spill_dir(), conform.schema)
        else:
            writer = compat.native_write_table(table).new_batch_write_builder().new_write()
        rows, prepared = 0, None
        try:
            for event in producer_stream.read(chunks, named=False):
                if isinstance(event, producer_stream.Batch):
                    batch = conform(event.data, event.index)
                    if batch.num_rows:
                        writer.write_arrow_batch(batch)
                        rows += batch.num_rows
                    send_ack(messages.ack(event.index))
                elif isinstance(event, producer_stream.Ended):
                    prepared = writer.prepare_commit()
                    fields["batches"] = event.batches
                elif isinstance(event, producer_stream.ProducerFailed):
                    fields["producer_error"] = event.error
                    raise WrongState(f"The producer of {target.label} failed ({event.error}); nothing was staged.")
                elif isinstance(event, producer_stream.HalfClosed):
                    raise WrongState(f"The stream into {target.label} half-closed without its end marker; nothing "
                                     "was staged.")
        except producer_stream.StreamBroken as e:
            writer.abort()
            raise InvalidRequest(f"The stream into {target.label} {e.reason}; nothing was staged.") from None
        except BaseException:
            writer.abort()  # deletes what it wrote
            raise
        finally:
            writer.close()
        if prepared is None:
            raise WrongState(f"The stream into {target.label} ended without its end marker; nothing was staged.")
        attempt = _Attempt(prepared, rows, writer.path if isinstance(writer, _Spill) else None,
                           identity=compat.table_identity(table), columns=compat.columns_of(table))
        refused: BaseException | None = None
        with self._lock:
            try:  # staged meanwhile under the same id, or by another principal, or committed meanwhile
                self._check_stageable(target, principal)
            except (PermissionDenied, WrongState) as e:
                refused = e
            else:
                stage = self._stages.setdefault((target.table, target.stage), _Stage(principal))
                stage.used = time.monotonic()
                if stage.committing:  # its stage's commit began: this one never counts
                    refused = WrongState(f"{target.label}: the stage's commit began while this attempt was staged; "
                                         "nothing of this stream was staged.", table=target.table)
                else:
                    stage.attempts[target.attempt] = attempt
        if refused is not None:
            self._discard(target.table, [attempt], "staged too late")
            raise refused
        fields["staged_rows"] = rows

    def _check_stageable(self, target: WriteTarget, principal: str | None) -> None:
        """(Holding the lock.) An attempt joins a stage of its own principal, once. A stage committed
        already takes attempts again (a micro-batch Spark replays after a restart stages under the
        same id): its commit then commits none of them (`commit`)."""
        key = (target.table, target.stage)
        stage, done = self._stages.get(key), self._done.get(key)
        if stage is not None or done is not None:
            owner = stage.principal if stage is not None else done.principal
            _owned(target.table, target.stage, owner, principal, "stage an attempt into")
        if stage is not None and target.attempt in stage.attempts:
            raise WrongState(f"{target.label}: that attempt is staged already; stage each attempt under its own "
                             "id (Spark's writer uses the task attempt's id).", table=target.table)

    def commit(self, name: str, stage_id: str, attempts: list[str], producer: str | None, seq: int | None,
               principal: str | None = None) -> Committed:
        """The attempts' files as one snapshot (through the committer), whose properties name the
        stage; the stage's other attempts are discarded. With `producer`/`seq`: committed once (a
        replay finds the seq and adds nothing). A retry (the same attempts, as a set) answers the
        same: from memory, waiting for a commit in flight, or from the table's snapshots once this
        server no longer holds the stage (`_recover`). Only `principal`, who staged it, may commit it."""
        committer = self._committer(name)
        key = (name, stage_id)
        with self._lock:
            stage, done = self._settled(name, stage_id, principal, "commit")
            if stage is not None:
                stage.committing = True  # claimed: another commit or abort of it waits for this one
        if done is not None:  # attempts staged since (a replayed micro-batch) are never committed
            self._drop(name, stage_id)
            if attempts_digest(attempts) != done.attempts and producer is not None:
                last = committer.producers.last_seq(producer)
                if last is not None and seq <= last:  # the replay of an epoch the table holds
                    return Committed(committer.producers.snapshot_of(producer), 0, True)
            return _again(name, stage_id, done.attempts, done.result, attempts_digest(attempts))
        if stage is None:
            return self._recover(name, stage_id, attempts, producer, seq, principal)
        try:
            return self._commit_claimed(committer, key, stage, attempts, producer, seq, principal)
        finally:
            with self._lock:
                stage.committing = False
                self._changed.notify_all()

    def _commit_claimed(self, committer, key: tuple[str, str], stage: _Stage, attempts: list[str],
                        producer: str | None, seq: int | None, principal: str | None) -> Committed:
        name, stage_id = key
        if producer is not None:
            last = committer.producers.last_seq(producer)
            if last is not None and seq <= last:  # a commit that answered before (a replayed epoch)
                self._drop(name, stage_id)
                return Committed(committer.producers.snapshot_of(producer), 0, True)
        if stage.failed_ms is not None:  # a commit of it failed, and may have landed: the table says
            found = self._find(name, stage_id, stage.failed_ms - CLOCK_SKEW_MS)
            if found.snapshot is not None:
                result = _committed_in(found.snapshot)
                with self._lock:
                    leftover = self._forget(key, stage, result, found.snapshot.properties.get(STAGE_ATTEMPTS_PROPERTY))
                self._discard(name, leftover, "not committed (failed or speculative attempts)")
                return _again(name, stage_id, found.snapshot.properties.get(STAGE_ATTEMPTS_PROPERTY), result,
                              attempts_digest(attempts))
            if not found.proven:
                raise _unknown(name, stage_id)
        with self._lock:
            staged = stage.attempts
            missing = [a for a in attempts if a not in staged or staged[a].state == DONE]
            if missing:
                raise NotFound(
                    f"Paimon table {name!r}: attempt {missing[0]!r} of stage {stage_id!r} is not staged on this server "
                    "(it failed, or wrote to another server); this commit committed nothing: commit the attempts "
                    "the stage holds, or run the job again.", table=name)
            chosen = [staged[a] for a in attempts]
            stale = [a for a in chosen if a.identity != committer.identity]
            if not stale:
                for a in chosen:
                    a.handed = True  # from now on its files may be in a snapshot: never deleted here
        if stale:
            self._drop(name, stage_id)
            raise NotFound(f"Paimon table {name!r} was dropped and created again since stage {stage_id!r} was staged; "
                           "nothing of the stage was committed: run the job again.", table=name)
        rows = sum(a.rows for a in chosen)
        digest = attempts_digest(attempts)
        extra = {STAGE_PROPERTY: stage_id, STAGE_ATTEMPTS_PROPERTY: digest, STAGE_ROWS_PROPERTY: str(rows)}
        if principal is not None:
            extra[STAGE_PRINCIPAL_PROPERTY] = principal
        began_ms = int(time.time() * 1000)
        try:
            self._check_files(name, chosen, stage_id)
            spills = [a for a in chosen if a.spill is not None]
            if spills:
                snapshot, skipped = committer.commit_rows(lambda: _read_spills(spills), producer, seq, extra=extra)
            else:
                snapshot, skipped = committer.commit_messages([m for a in chosen for m in a.messages], producer, seq,
                                                              extra=extra)
        except BaseException:
            with self._lock:  # a commit again finds in the table whether it landed
                stage.failed_ms = began_ms if stage.failed_ms is None else stage.failed_ms
            raise
        result = Committed(snapshot, 0 if skipped else rows, skipped)
        with self._lock:
            leftover = self._forget(key, stage, result, digest)
        self._discard(name, leftover, "not committed (failed or speculative attempts)")
        return result

    def _forget(self, key: tuple[str, str], stage: _Stage, result: Committed, digest: str | None) -> list[_Attempt]:
        """(Holding the lock.) The stage was committed: a retry's answer from now on. Returns every
        attempt to discard: those never handed (failed or speculative) and the handed ones' spill
        files (their rows are written; their table files are never deleted here)."""
        self._stages.pop(key, None)
        self._done[key] = _Done(digest or "", result, stage.principal, time.monotonic())
        leftover = [a for a in stage.attempts.values() if a.state == STAGED]
        for a in leftover:
            a.state = DONE
        return leftover

    def _settled(self, name: str, stage_id: str, principal: str | None, verb: str) -> tuple[_Stage | None, _Done | None]:
        """(Holding the lock.) The stage, or what committed it here, once no commit of it is in
        flight (waited for at most `in_flight_wait_s`); refused to any principal but its own."""
        key = (name, stage_id)
        deadline = time.monotonic() + self.in_flight_wait_s
        while True:
            stage, done = self._stages.get(key), self._done.get(key)
            if done is not None:
                _owned(name, stage_id, done.principal, principal, verb)
                return None, done
            if stage is not None:
                _owned(name, stage_id, stage.principal, principal, verb)
            if stage is None or not stage.committing:
                return stage, None
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unavailable(f"Paimon table {name!r}: stage {stage_id!r} is being committed now and its commit did "
                                  f"not end within {self.in_flight_wait_s:.0f} s, so its outcome is not known yet; call "
                                  "commit_staged again with the same attempts to learn it.", table=name)
            self._changed.wait(left)

    def _recover(self, name: str, stage_id: str, attempts: list[str], producer: str | None, seq: int | None,
                 principal: str | None) -> Committed:
        """A commit of a stage this server does not hold (it restarted, perhaps as the commit
        landed): the table's snapshots say whether it was committed, and when they cannot, the
        error says the outcome is unknown (never "run again" unless nothing was committed)."""
        found = self._find(name, stage_id)
        if found.snapshot is not None:
            props = found.snapshot.properties
            _owned(name, stage_id, props.get(STAGE_PRINCIPAL_PROPERTY), principal, "commit")
            return _again(name, stage_id, props.get(STAGE_ATTEMPTS_PROPERTY), _committed_in(found.snapshot),
                          attempts_digest(attempts))
        if producer is not None:
            committer = self._committer(name)
            last = committer.producers.last_seq(producer)
            if last is not None and seq <= last:  # a replayed epoch whose snapshot is no longer kept
                return Committed(committer.producers.snapshot_of(producer), 0, True)
        if found.proven:
            raise NotFound(f"Paimon table {name!r}: stage {stage_id!r} is not staged on this server (it restarted, the "
                           "stage was aborted or idle too long, or it was staged on another server) and no snapshot "
                           "since the job began holds it, so nothing was committed: run the job again.", table=name)
        raise _unknown(name, stage_id)

    def _find(self, name: str, stage_id: str, since_ms: int | None = None) -> _Found:
        """The table's snapshot that committed the stage, latest first, looked for back to
        `since_ms` (default: when the stage id says its job began, less CLOCK_SKEW_MS) or the
        first snapshot; not finding it is proof only when every snapshot back to then is kept."""
        table = self._table(name)
        manager = table.snapshot_manager()
        snap = manager.get_latest_snapshot()
        if since_ms is None:
            started = stage_started_ms(stage_id)
            if started is not None and started <= time.time() * 1000 + CLOCK_SKEW_MS:  # a job clock far ahead: no
                since_ms = started - CLOCK_SKEW_MS
        while snap is not None:
            if (snap.properties or {}).get(STAGE_PROPERTY) == stage_id:
                return _Found(snap, True)
            if (since_ms is not None and snap.time_millis < since_ms) or snap.id <= 1:
                return _Found(None, True)
            snap = compat.snapshot(manager, snap.id - 1)
            if snap is None:  # expired: what it held is not known
                return _Found(None, False)
        return _Found(None, True)  # no snapshot at all

    def _check_files(self, name: str, chosen: list[_Attempt], stage_id: str) -> None:
        """The staged files are all still there (orphan removal by another tool may take files no
        snapshot names; this server's own skips them): else nothing is committed."""
        table = self._table(name)
        files = compat.TableFiles(table)
        for path in compat.written_paths(table, [m for a in chosen if a.spill is None for m in a.messages]):
            if not files.exists(path):
                raise NotFound(f"Paimon table {name!r}: a file stage {stage_id!r} wrote is gone ({path}: removed as an "
                               "orphan?); nothing of the stage was committed: run the job again.", table=name)

    def file_names(self, name: str) -> set[str]:
        """The names of the data files staged attempts of table `name` wrote: in use, though no
        snapshot names them yet (orphan removal keeps them)."""
        with self._lock:
            messages = [m for (table, _), st in self._stages.items() if table == name
                        for a in st.attempts.values() for m in a.messages]
        return {f.file_name for m in messages for f in [*m.new_files, *m.changelog_files]} | {
            extra for m in messages for f in m.new_files for extra in (f.extra_files or [])}

    def abort(self, name: str, stage_id: str, principal: str | None = None) -> tuple[int, int]:
        """Discard every attempt of the stage not handed to a commit: (attempts, files deleted). A
        commit of it in flight is waited for; a stage committed is refused, naming its snapshot."""
        key = (name, stage_id)
        with self._lock:
            stage, done = self._settled(name, stage_id, principal, "abort")
            gone = self._take(key) if stage is not None and stage.failed_ms is None else None
        if gone is not None:
            return len(gone), self._discard(name, gone, "aborted")
        if done is not None:
            raise _not_abortable(name, stage_id, done.result.snapshot)
        found = self._find(name, stage_id, None if stage is None else stage.failed_ms - CLOCK_SKEW_MS)
        if found.snapshot is not None:
            _owned(name, stage_id, found.snapshot.properties.get(STAGE_PRINCIPAL_PROPERTY), principal, "abort")
            raise _not_abortable(name, stage_id, found.snapshot.id)
        if stage is None:
            return 0, 0  # nothing staged here, and no kept snapshot holds it
        with self._lock:
            if self._stages.get(key) is not stage or stage.committing:
                raise WrongState(f"Paimon table {name!r}: stage {stage_id!r} is being committed again now; call "
                                 "commit_staged with the same attempts to learn its outcome.", table=name)
            gone = self._take(key)
        return len(gone), self._discard(name, gone, "aborted")

    def _take(self, key: tuple[str, str]) -> list[_Attempt]:
        """(Holding the lock.) The stage goes; its attempts not handed to a commit, to discard."""
        stage = self._stages.pop(key)
        gone = [a for a in stage.attempts.values() if a.state == STAGED]
        for a in gone:
            a.state = DONE
        self._changed.notify_all()
        return gone

    def _drop(self, name: str, stage_id: str) -> tuple[int, int]:
        """Discard the stage (idle, replayed, or of a table created again), its commit claim or not."""
        with self._lock:
            gone = self._take((name, stage_id)) if (name, stage_id) in self._stages else []
        return len(gone), self._discard(name, gone, "aborted")

    def stats(self) -> dict[str, dict[str, StagedStats]]:
        """Per table, per stage: its attempts staged, their rows and whether its commit runs (what
        `stats` shows as "staged")."""
        out: dict[str, dict[str, StagedStats]] = {}
        with self._lock:
            for (table, stage_id), st in self._stages.items():
                out.setdefault(table, {})[stage_id] = StagedStats(len(st.attempts),
                                                                  sum(a.rows for a in st.attempts.values()),
                                                                  st.committing)
        return out

    def _discard_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [key for key, st in self._stages.items() if now - st.used > STAGE_IDLE_S and not st.committing]
            self._done = {key: done for key, done in self._done.items() if now - done.at <= STAGE_IDLE_S}
        for name, stage_id in idle:
            log.info("stage_discarded", table=name, stage=stage_id, reason=f"idle over {STAGE_IDLE_S:.0f} s")
            self._drop(name, stage_id)

    def _spill_dir(self) -> str:
        with self._lock:
            if self._spills is None:
                self._spills = tempfile.mkdtemp(prefix="flight-paimon-staged-")
            return self._spills

    def _discard(self, name: str, attempts: list[_Attempt], why: str) -> int:
        """Delete what attempts staged: their spill files (on this server, never in the table), and
        the table files of attempts never handed to a commit (no snapshot names them)."""
        for a in attempts:
            if a.spill is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(a.spill)
        return self._delete(name, [m for a in attempts if a.spill is None and not a.handed for m in a.messages], why)

    def _delete(self, name: str, staged_messages: list, why: str) -> int:
        """Delete files staged attempts wrote that no snapshot names (never committed)."""
        if not staged_messages:
            return 0
        try:
            table = self._table(name)
        except NotFound:  # dropped: its directory went with it
            return 0
        files = compat.TableFiles(table)
        deleted = sum(files.delete(path) for path in compat.written_paths(table, staged_messages))
        log.info("staged_files_deleted", table=name, files=deleted, reason=why)
        return deleted
