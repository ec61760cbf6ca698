"""A table's Paimon writes and commits in worker processes (`--commit-processes`; 0, the default:
in the serving process), so that a server's ingest can use more than one core.

A pypaimon commit is milliseconds of Python (manifests in Avro, the manifest list, the snapshot)
and a writer's prepare holds the interpreter too, so one interpreter caps a server's commits a
second however many cores it has (what the workers gained: docs/benchmarks_ingest.md, "Many
tables on one server"). Here a table's writers and commits live in one of `processes` worker
processes (a table stays on one, which keeps its writers, its commit object and the manifests it
wrote last); the serving process keeps everything that decides what is committed. Its writer
lanes hold a `RemoteWriter` each: a write sends the Arrow batch (pickled: its buffers) and waits
until the worker's writer took it; a prepare returns the worker's commit messages; a close
closes it there. Each is one request and its answer:

    server -> worker   ("write", WriterSpec, id, batch) | ("prepare", WriterSpec, id, identifier)
                       | ("close", WriterSpec, id)
    worker -> server   ("ok", result) | ("failed", error)

A writer the worker does not hold (the worker was restarted: it died or idled) is made anew at a
write when nothing was written to it since its last prepare, and is an error otherwise (the rows
written to it are gone with the process): the group fails, as after any failed write. A commit is
one conversation on the worker's pipe:

    server -> worker   ("commit", CommitRequest)     the files, the identifier, the properties
    worker -> server   ("check", latest, properties)  before each attempt (compat.guard_commits)
    server -> worker   ("ok", properties) | ("refused",)   the committer's own `_guard`, run here
    worker -> server   ("done", snapshot) | ("failed", error)

So the exactly-once check runs, as in one process, against the very snapshot the attempt lands
on, with the producer map of the serving process; a refusal ends the attempt with nothing
written. A worker that dies mid-commit fails the commit (its outcome unknown: the committer
reads the producer map back, as after any failed commit); the next commit starts another.
Orphaned by a killed server, a worker ends at the closed pipe, and its check fails before any
attempt can land.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from dataclasses import dataclass

import structlog

from flight_server import processes
from flight_server.wire.errors import Unavailable

log = structlog.get_logger(__name__)

POLL_S = 0.2  # a commit waiting for its worker checks this often whether the worker lives
KEPT_COMMITS = 128  # commit objects a worker keeps (the tables it committed last); another is made anew


class WorkerDied(RuntimeError):
    """The worker process ended while it committed: whether the commit landed is not known."""


class WorkerFailed(Exception):
    """A commit's error in the worker, as text (its type and message; an OSError's errno)."""

    def __init__(self, kind: str, message: str, errno: int | None):
        super().__init__(message or kind)
        self.kind, self.errno = kind, errno


@dataclass(frozen=True)
class WriterSpec:
    """What a worker makes a table's writer of: the table, the schema its batches were conformed
    to, and the commit user of the serving process's builder (its snapshots' name)."""

    table: str
    schema_id: int
    commit_user: str


@dataclass(frozen=True)
class CommitRequest:
    table: str
    key: tuple  # (identity, schema id, commit user, generation): another key makes another commit object
    commit_user: str
    identifier: int
    messages: list
    properties: dict[str, str]


class CommitWorkers:
    """`processes` worker processes over one warehouse (each started on first use, again after it
    died); a committer takes one with `pick` and commits through it."""

    def __init__(self, warehouse: str | None, options: dict[str, str] | None, processes: int):
        if processes < 1:
            raise ValueError(f"commit workers need at least one process, got {processes}")
        self._workers = [_Worker(i, warehouse, dict(options or {})) for i in range(processes)]
        self._turn = itertools.count()

    def pick(self) -> _Worker:
        """A worker for a table's commits, in turn."""
        return self._workers[next(self._turn) % len(self._workers)]

    def pids(self) -> list[int]:
        return [w.pid for w in self._workers if w.pid is not None]

    def started(self) -> int:
        """Worker processes started so far (a restart after one died or idled counts)."""
        return sum(w.started for w in self._workers)

    def stop_idle(self, idle_s: float, now: float | None = None) -> int:
        """Stop the workers that committed nothing for `idle_s` (their memory goes back; the next
        commit starts one again); returns how many."""
        now = time.monotonic() if now is None else now
        return sum(w.stop_if_idle(idle_s, now) for w in self._workers)

    def close(self) -> None:
        for w in self._workers:
            w.close()


class _Worker:
    def __init__(self, index: int, warehouse: str | None, options: dict[str, str]):
        self.index, self._warehouse, self._options = index, warehouse, options
        self._lock = threading.Lock()  # one request or commit at a time on its pipe
        self._proc = self._conn = None
        self._closed = False
        self.started = 0
        self._last_used = time.monotonic()

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.is_alive() else None

    def call(self, request: tuple, expect: int | None = None, start: bool = True):
        """One request and its answer (a writer's write, prepare or close) and the worker start
        that answered it. `expect`: the start the request's writer is in; when another is running
        (the worker died or idled since), WorkerDied is raised before anything is sent, or with
        `start` False nothing is done. Raises WorkerFailed with the worker's error, or WorkerDied."""
        table = request[1].table
        with self._lock:
            if not start and (self._closed or self.pid is None or self.started != expect):
                return None, None  # a close: the writer went with its process, or goes with it now
            self._begin("write")
            if expect is not None and self.started != expect:
                raise WorkerDied(f"the commit worker process of {table!r} was restarted: the rows written to its "
                                 "writer since the last commit are gone")
            try:
                self._conn.send(request)
                message = self._receive(table)
            except (EOFError, OSError) as e:
                raise self._lost(f"while it wrote into {table!r}: what it was writing is gone") from e
            if message[0] == "failed":
                raise WorkerFailed(*message[1])
            return message[1], self.started

    def commit(self, request: CommitRequest, check) -> int | None:
        """Commit in the worker, running `check(latest, properties)` here before each attempt;
        returns the snapshot pypaimon said it made (None: read it back). Raises what `check`
        raised, WorkerFailed with the commit's error, or WorkerDied."""
        with self._lock:
            self._begin("commit")
            refused: BaseException | None = None
            try:
                self._conn.send(("commit", request))
                while True:
                    message = self._receive(request.table)
                    if message[0] == "check":
                        try:
                            properties = message[2]
                            check(message[1], properties)
                            self._conn.send(("ok", properties))
                        except BaseException as e:  # noqa: BLE001 - the attempt is refused, then this is raised
                            refused = e
                            self._conn.send(("refused",))
                    elif message[0] == "done":
                        return message[1]
                    else:
                        if refused is not None:
                            raise refused
                        raise WorkerFailed(*message[1])
            except (EOFError, OSError) as e:
                raise self._lost(f"while it committed into {request.table!r}: whether the commit landed is not "
                                 "known") from e

    def _begin(self, what: str) -> None:
        """(Holding the lock.) A request may go: the worker is running (started if need be)."""
        if self._closed:
            raise Unavailable(f"The server is stopping: no {what} is started.")
        self._last_used = time.monotonic()
        self._start()

    def _lost(self, when: str) -> WorkerDied:
        """(Holding the lock.) The worker's pipe broke `when`: stop what is left of it."""
        code = self._proc.exitcode if self._proc is not None else None
        self._stop()
        return WorkerDied(f"the commit worker process ended (exit code {code}) {when}")

    def _receive(self, table: str):
        while not self._conn.poll(POLL_S):
            if not self._proc.is_alive():
                raise EOFError(f"the commit worker of {table!r} is gone")
        return self._conn.recv()

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._stop()

    def stop_if_idle(self, idle_s: float, now: float) -> bool:
        if not self._lock.acquire(blocking=False):
            return False  # writing or committing now
        try:
            if self._proc is None or now - self._last_used < idle_s:
                return False
            self._stop()
            log.info("commit_worker_stopped", worker=self.index, reason=f"idle over {idle_s:.0f} s")
            return True
        finally:
            self._lock.release()

    def _start(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        self._stop()
        try:
            proc, parent = processes.start(_serve, (self._warehouse, self._options),
                                           f"flight-paimon-commit-{self.index}", lambda: self._closed)
        except processes.NotStarted as e:
            raise Unavailable(f"The commit worker process did not start ({e}); the commit was not made, "
                              "resend.") from None
        self._proc, self._conn = proc, parent
        self.started += 1
        log.info("commit_worker_started", pid=proc.pid, worker=self.index)

    def _stop(self) -> None:
        proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        processes.stop(proc, conn)


class RemoteWriter:
    """A table's writer in its commit worker (the writer a lane holds when commits run in
    workers): the methods of pypaimon's writer the lanes call, each a request to the worker."""

    _ids = itertools.count(1)

    def __init__(self, worker: _Worker, spec: WriterSpec):
        self.worker, self.spec = worker, spec
        self.id = next(self._ids)
        self._incarnation: int | None = None  # the worker start that holds its writer
        self._dirty = False  # written since its last prepare: its writer must still be there

    def write_arrow_batch(self, batch) -> float:
        """Returns the CPU seconds the write took in the worker (the lane counts them as its own)."""
        cpu_s, self._incarnation = self.worker.call(("write", self.spec, self.id, batch),
                                                    expect=self._incarnation if self._dirty else None)
        self._dirty = True
        return cpu_s

    def prepare_commit(self, identifier: int) -> list:
        messages, _ = self.worker.call(("prepare", self.spec, self.id, identifier), expect=self._incarnation)
        self._dirty = False
        return messages

    def close(self) -> None:
        if self._incarnation is not None:  # else it never wrote: the worker holds nothing of it
            self.worker.call(("close", self.spec, self.id), expect=self._incarnation, start=False)
        self._incarnation = None


class _Refused(Exception):
    """The server's check refused the attempt."""


class _Writers:
    """(In the worker.) The tables' writers the serving process's RemoteWriters stand for."""

    def __init__(self, catalog):
        self.catalog = catalog
        self.writers: dict[int, object] = {}

    def write(self, spec: WriterSpec, writer_id: int, batch) -> float:
        """Write `batch` with the writer; returns the CPU seconds it took."""
        from flight_server.paimon import compat

        cpu0 = time.thread_time()
        writer = self.writers.get(writer_id)
        if writer is None:
            table = compat.table_at_schema(self.catalog.get_table(spec.table), spec.schema_id)
            writer = compat.stream_write_builder(compat.native_write_table(table), spec.commit_user).new_write()
            self.writers[writer_id] = writer
        try:
            writer.write_arrow_batch(batch)
        except BaseException:
            self.close(writer_id, spec.table)  # its state is unknown; the serving process drops it too
            raise
        return time.thread_time() - cpu0

    def prepare(self, spec: WriterSpec, writer_id: int, identifier: int) -> list:
        writer = self.writers.get(writer_id)
        if writer is None:
            raise LookupError(f"the commit worker holds no writer {writer_id} of {spec.table!r}: what was written "
                              "to it is gone")
        return writer.prepare_commit(identifier)

    def close(self, writer_id: int, table: str) -> None:
        from flight_server.ingest.lanes import close_quietly

        close_quietly(self.writers.pop(writer_id, None), table)


def _serve(conn, warehouse: str, options: dict[str, str]) -> None:
    """The worker: one commit at a time, each table's commit object kept between commits."""
    import signal
    from collections import OrderedDict

    from flight_server.ingest.lanes import close_quietly
    from flight_server.paimon import compat
    from flight_server.wire import allocator

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which stops this
    sys.stdout = sys.stderr  # the server's stdout says where it listens: nothing else goes there
    catalog = compat.create_catalog(warehouse, options)
    commits: OrderedDict[str, tuple[tuple, compat.GroupCommit]] = OrderedDict()  # least recently used first

    def check(latest, properties: dict) -> None:
        conn.send(("check", latest, dict(properties)))
        answer = conn.recv()
        if answer[0] != "ok":
            raise _Refused()
        properties.clear()
        properties.update(answer[1])

    writers = _Writers(catalog)
    conn.send("ready")
    served = 0
    while True:
        try:
            kind, request, *args = conn.recv()
        except EOFError:
            return
        if kind != "commit":
            try:
                if kind == "write":
                    answer = ("ok", writers.write(request, *args))
                elif kind == "prepare":
                    answer = ("ok", writers.prepare(request, *args))
                else:
                    answer = ("ok", writers.close(args[0], request.table))
            except BaseException as e:  # noqa: BLE001 - pyo3's PanicException too: the lane fails the group with it
                answer = ("failed", (type(e).__name__, str(e), getattr(e, "errno", None)))
            try:
                conn.send(answer)
            except (BrokenPipeError, EOFError):
                return
            continue
        try:
            key, group = commits.pop(request.table, (None, None))
            if key != request.key:
                close_quietly(group, request.table)
                group = compat.GroupCommit(catalog.get_table(request.table), request.commit_user, check)
            commits[request.table] = (request.key, group)
            while len(commits) > KEPT_COMMITS:  # bounded however many tables the server writes
                name, (_, oldest) = commits.popitem(last=False)
                close_quietly(oldest, name)
            answer = ("done", group.commit(request.messages, request.identifier, request.properties))
        except (EOFError, BrokenPipeError):
            return  # the server is gone: its check could not run, so the attempt did not land
        except _Refused:
            answer = ("failed", ("refused", "", None))
        except Exception as e:  # noqa: BLE001 - sent to the committer, which fails the group with it
            commits.pop(request.table, None)  # its state is unknown: the next commit makes a new one
            answer = ("failed", (type(e).__name__, str(e), getattr(e, "errno", None)))
        try:
            conn.send(answer)
        except (BrokenPipeError, EOFError):
            return
        served += 1
        if served % 256 == 0:
            allocator.release_free_memory()
