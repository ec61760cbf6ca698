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
then orphans), and a commit of them fails NOT_FOUND: the job wrote nothing.
"""

from __future__ import annotations

import contextlib
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
from flight_server.wire.errors import InvalidRequest, NotFound, WrongState
from flight_server.wire.requests import WriteTarget

log = structlog.get_logger(__name__)

STAGE_IDLE_S = 6 * 3600.0
STAGED, DONE = "staged", "done"


@dataclass
class _Attempt:
    messages: list  # commit messages of the files it wrote into the table (none when spilled)
    rows: int
    spill: str | None = None  # its rows in an Arrow IPC file of this server, to be written at the commit
    identity: str | None = None  # the table's (compat.table_identity) when it was staged
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


def _read_spills(paths: list[str]):
    import pyarrow as pa

    for path in paths:
        with pa.memory_map(path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


@dataclass
class _Stage:
    attempts: dict[str, _Attempt] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)
    committing: bool = False  # a commit_staged of it runs now


@dataclass(frozen=True)
class Committed:
    snapshot: int | None
    rows: int
    skipped: bool


class Staging:
    """The stages of one server, by (table, stage); one lock."""

    def __init__(self, table: Callable, committer: Callable):
        """`table(name)`: the pypaimon table; `committer(name)`: its TableCommitter."""
        self._table, self._committer = table, committer
        self._lock = threading.Lock()
        self._stages: dict[tuple[str, str], _Stage] = {}
        self._spills: str | None = None  # the local directory of spilled attempts, made on first use
        self._done: dict[tuple[str, str], tuple[tuple, Committed, float]] = {}  # committed stages: a retry's answer

    def put(self, target: WriteTarget, schema, chunks, send_ack, fields: dict) -> None:
        """Write one attempt's stream to files; each batch is acked `{"seq": i}` once written (the
        attempt is staged, not committed, when the stream's end marker has been read)."""
        self._discard_idle()
        table = self._table(target.table)
        conform = Conformer(compat.arrow_schema(table), schema, target.label)
        with self._lock:
            stage = self._stages.get((target.table, target.stage))
            if stage is not None and target.attempt in stage.attempts:
                raise WrongState(f"{target.label}: that attempt is staged already; stage each attempt under its own "
                                 "id (Spark's writer uses the task attempt's id).", table=target.table)
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
                           identity=compat.table_identity(table))
        with self._lock:
            stage = self._stages.setdefault((target.table, target.stage), _Stage())
            stage.used = time.monotonic()
            taken = target.attempt in stage.attempts or stage.committing
            if not taken:
                stage.attempts[target.attempt] = attempt
        if taken:  # staged meanwhile under the same id, or its stage's commit began: this one never counts
            self._discard(target.table, [attempt], "staged too late")
            raise WrongState(f"{target.label}: the attempt was staged meanwhile, or its stage's commit began; "
                             "nothing of this stream was staged.", table=target.table)
        fields["staged_rows"] = rows

    def commit(self, name: str, stage_id: str, attempts: list[str], producer: str | None, seq: int | None) -> Committed:
        """The attempts' files as one snapshot (through the committer); the stage's other attempts
        are discarded. With `producer`/`seq`: committed once (a replay finds the seq and adds nothing);
        a stage committed here answers the same again (a retried commit_staged)."""
        committer = self._committer(name)
        with self._lock:
            done = self._done.get((name, stage_id))
        if done is not None and done[0] == tuple(attempts):
            return done[1]
        if producer is not None:
            last = committer.producers.last_seq(producer)
            if last is not None and seq <= last:  # a commit that answered before (a replayed epoch)
                self.abort(name, stage_id)
                return Committed(committer.producers.snapshot_of(producer), 0, True)
        with self._lock:
            stage = self._stages.get((name, stage_id))
            staged = {} if stage is None else stage.attempts
            missing = [a for a in attempts if a not in staged or staged[a].state == DONE]
            if missing:
                raise NotFound(
                    f"Paimon table {name!r}: attempt {missing[0]!r} of stage {stage_id!r} is not staged on this server "
                    "(it restarted, the stage was aborted or idle too long, or the attempt wrote to another server); "
                    "nothing of the stage was committed: run the job again.", table=name)
            if stage.committing:
                raise WrongState(f"Paimon table {name!r}: stage {stage_id!r} is being committed now.", table=name)
            chosen = [staged[a] for a in attempts]
            stale = [a for a in chosen if a.identity != committer.identity]
            others = [a for a in staged.values() if a.state == STAGED and a not in chosen]
            if not stale:
                stage.committing = True
                for a in chosen:
                    a.handed = True  # from now on its files may be in a snapshot: never deleted here
        if stale:
            self.abort(name, stage_id)
            raise NotFound(f"Paimon table {name!r} was dropped and created again since stage {stage_id!r} was staged; "
                           "nothing of the stage was committed: run the job again.", table=name)
        rows = sum(a.rows for a in chosen)
        try:
            self._check_files(name, chosen, stage_id)
            spills = [a.spill for a in chosen if a.spill is not None]
            if spills:
                snapshot, skipped = committer.commit_rows(lambda: _read_spills(spills), producer, seq)
            else:
                snapshot, skipped = committer.commit_messages([m for a in chosen for m in a.messages], producer, seq)
        except BaseException:
            with self._lock:
                stage.committing = False  # a commit again (the same producer and seq) finds whether it landed
            raise
        result = Committed(snapshot, 0 if skipped else rows, skipped)
        with self._lock:
            self._stages.pop((name, stage_id), None)
            self._done[(name, stage_id)] = (tuple(attempts), result, time.monotonic())
            for a in chosen:
                a.state = DONE
        self._discard(name, others, "not committed (failed or speculative attempts)")
        self._discard(name, chosen, "spilled rows written")  # only spill files: the chosen were handed
        return result

    def _check_files(self, name: str, chosen: list[_Attempt], stage_id: str) -> None:
        """The staged files are all still there (orphan removal by another tool may take files no
        snapshot names; this server's own skips them): else nothing is committed."""
        table = self._table(name)
        for path in compat.written_paths(table, [m for a in chosen if a.spill is None for m in a.messages]):
            if not table.file_io.exists(path):
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

    def abort(self, name: str, stage_id: str) -> tuple[int, int]:
        """Discard every attempt of the stage not handed to a commit: (attempts, files deleted)."""
        with self._lock:
            stage = self._stages.get((name, stage_id))
            if stage is None:
                return 0, 0
            if stage.committing:
                return 0, 0  # its commit decides; the attempts it leaves out are discarded then
            gone = [a for a in stage.attempts.values() if a.state == STAGED]
            for a in gone:
                a.state = DONE
            del self._stages[(name, stage_id)]
        return len(gone), self._discard(name, gone, "aborted")

    def stats(self) -> dict:
        """Per table, per stage: its attempts staged and their rows (what `stats` shows as "staged")."""
        out: dict = {}
        with self._lock:
            for (table, stage_id), st in self._stages.items():
                out.setdefault(table, {})[stage_id] = {"attempts": len(st.attempts),
                                                       "rows": sum(a.rows for a in st.attempts.values())}
        return out

    def _discard_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [key for key, st in self._stages.items() if now - st.used > STAGE_IDLE_S and not st.committing]
            self._done = {key: done for key, done in self._done.items() if now - done[2] <= STAGE_IDLE_S}
        for name, stage_id in idle:
            log.info("stage_discarded", table=name, stage=stage_id, reason=f"idle over {STAGE_IDLE_S:.0f} s")
            self.abort(name, stage_id)

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
        deleted = 0
        for path in compat.written_paths(table, staged_messages):
            try:
                deleted += bool(table.file_io.delete(path, False))
            except FileNotFoundError:
                pass
        log.info("staged_files_deleted", table=name, files=deleted, reason=why)
        return deleted
