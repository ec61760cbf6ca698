"""Compaction's rewrites in a worker process, off the interpreter that serves RPCs and commits.

A rewrite reads a bucket's files and writes them again: seconds of pypaimon's Python per batch
that, in the serving process, hold the GIL that do_put, do_get and the group commits need (what
reads cost meanwhile: docs/benchmarks_maintenance.md). The maintainer thread still picks the
files, and the table's commit step commits the result between group commits; only
`TableStore.rewrite` and `merge` run here, on the same Paimon table loaded by the worker from the same warehouse. Files a worker wrote
before it died, or before a commit that failed, are named by no snapshot: orphan removal deletes
them (once older than its `older_than`), as it does a killed writer's.

`RewriteWorker(..., processes=0)` runs them in this process (the tests' in-process servers).
"""

from __future__ import annotations

import sys
import threading

import structlog

from flight_server import processes
from flight_server.wire.errors import Unavailable

log = structlog.get_logger(__name__)

POLL_S = 0.2  # a call waiting for the worker checks this often whether the server is closing
FOOTER_CACHE = "file-format.metadata-cache.max-size"  # pypaimon's catalog option; 0: off


class SchemaChanged(Exception):
    """The worker loaded the table with another schema than the maintainer planned with."""


class WorkerDied(RuntimeError):
    """The worker process ended while it rewrote (killed, out of memory): the next call starts another."""


class RewriteWorker:
    """One worker process (spawned on first use, again after it died) that runs rewrites for the
    tables of one warehouse, one at a time; with processes=0, they run in the calling thread."""

    def __init__(self, warehouse: str | None, options: dict[str, str] | None, processes: int = 1):
        self._warehouse, self._options = warehouse, dict(options or {})
        self.in_process = processes == 0
        self._lock = threading.Lock()  # one call at a time: the maintainer has one thread anyway
        self._proc = None
        self._conn = None
        self._closed = False
        self.started = 0  # worker processes started (a restart after one died counts)

    def rewrite(self, store, files: list) -> list:
        """`store.rewrite(files)`, in the worker."""
        if self.in_process:
            return store.rewrite(files)
        return self._call("rewrite", store.name, store.table.table_schema.id, files)

    def merge(self, store, group: list, level: int, drop_delete: bool, rewriter) -> object:
        """`store.merge(group, level, drop_delete, rewriter)`, in the worker (with its own rewriter)."""
        if self.in_process:
            return store.merge(group, level, drop_delete, rewriter)
        return self._call("merge", store.name, store.table.table_schema.id, group, level, drop_delete)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.is_alive() else None

    def close(self) -> None:
        """Stop the worker (a rewrite in flight is cut off: its files are orphans)."""
        self._closed = True
        with self._lock:
            self._stop()

    def _call(self, fn: str, *args):
        with self._lock:
            if self._closed:
                raise Unavailable("The server is stopping: maintenance is not run.")
            self._start()
            try:
                self._conn.send((fn, args))
                while not self._conn.poll(POLL_S):
                    if self._closed:
                        raise Unavailable("The server is stopping: a rewrite in flight was cut off.")
                    if not self._proc.is_alive():
                        raise EOFError
                ok, value = self._conn.recv()
            except (EOFError, OSError) as e:  # the worker died (killed, out of memory)
                code = self._proc.exitcode if self._proc is not None else None
                self._stop()
                raise WorkerDied(f"The compaction worker process ended (exit code {code}) while it rewrote "
                                 f"files of {args[0]!r}; the next round starts another.") from e
            if ok:
                return value
            raise value

    def _start(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        self._stop()
        try:
            proc, parent = processes.start(_serve, (self._warehouse, self._options), "flight-paimon-compaction",
                                           lambda: self._closed)
        except processes.NotStarted as e:
            if self._closed:
                raise Unavailable("The server is stopping: maintenance is not run.") from None
            raise WorkerDied(f"The compaction worker process did not start: {e}.") from None
        self._proc, self._conn = proc, parent
        self.started += 1
        log.info("compaction_worker_started", pid=proc.pid)

    def _stop(self) -> None:
        proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        processes.stop(proc, conn)


def _serve(conn, warehouse: str, options: dict[str, str]) -> None:
    """The worker: answer (fn, args) with (True, result) or (False, the exception) until the pipe
    closes."""
    import signal

    from flight_server.wire import allocator

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server, which stops this
    sys.stdout = sys.stderr  # the server's stdout says where it listens: nothing else goes there
    catalog = worker_catalog(warehouse, options)
    if not _send(conn, "ready"):  # the server died while this started: nothing to answer
        return
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            result = (True, _FUNCTIONS[fn](catalog, *args))
        except Exception as e:  # noqa: BLE001 - sent to the maintainer, which reports it
            result = (False, _sendable(e))
        result_sent = _send(conn, result)
        allocator.release_free_memory()  # a rewrite's batches are freed: give their pages back
        if not result_sent:
            return


def worker_catalog(warehouse: str, options: dict[str, str]):
    """The worker's catalog, with pypaimon's footer cache off: it keeps each data file read (its
    Parquet footer, ~40 KiB of RSS a file) process-wide, up to 4,096 files, and a rewrite reads
    each file once before it is replaced, so the cache only grew (docs/benchmarks_maintenance.md,
    "What maintenance costs per byte")."""
    from flight_server.paimon import compat

    return compat.create_catalog(warehouse, {**options, FOOTER_CACHE: "0"})


def _send(conn, result) -> bool:
    """Answer the server; False when it is gone (it died mid-rewrite: what this wrote is an orphan)."""
    try:
        conn.send(result)
        return True
    except (BrokenPipeError, EOFError):
        return False


def _store(catalog, name: str, schema_id: int):
    from flight_server.maintenance.store import TableStore

    table = catalog.get_table(name)
    if table.table_schema.id != schema_id:
        raise SchemaChanged(f"Paimon table {name!r}: schema {table.table_schema.id} since the round planned with "
                            f"{schema_id}; the next round compacts it.")
    return TableStore(table, name)


def _rewrite(catalog, name: str, schema_id: int, files: list) -> list:
    return _store(catalog, name, schema_id).rewrite(files)


def _merge(catalog, name: str, schema_id: int, group: list, level: int, drop_delete: bool) -> object:
    from flight_server.maintenance.kv_files import KvRewriter

    store = _store(catalog, name, schema_id)
    return store.merge(group, level, drop_delete, KvRewriter(store.table, name))


_FUNCTIONS = {"rewrite": _rewrite, "merge": _merge}


def _sendable(e: Exception) -> Exception:
    """`e` if it pickles both ways, else a RuntimeError with its type and message."""
    import pickle

    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001 - whatever fails to pickle is described instead
        return RuntimeError(f"{type(e).__name__}: {e}")
