"""A Flight ingest server with no logic at all: the baseline of `bench_tables.py --compare`.

do_put of `paimon/<table>` puts each batch on its table's pending list; committers take every
batch a table has pending, write it with pypaimon's native writer, prepare and commit, and then
the stream gets one metadata message per batch (what the bench's producers count as acks). No
exactly-once check, no producer map, no maintenance, no metrics, no limits, no conforming: what
an expert would write to commit pushed batches into many Paimon tables as often as pypaimon can.

`--procs 0` commits on one thread of this process; `--procs N` in N worker processes, each owning
the tables that hash to it (the batches go to them as Arrow IPC over a pipe), so commits use N
cores while this process reads the gRPC streams. Tables must exist (the bench creates them).

Usage: .venv/bin/python scripts/bare_ingest_server.py WAREHOUSE [--procs N]
Prints `grpc://127.0.0.1:PORT` when it listens; `do_action("commits")` returns the commits made.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import sys
import threading
import zlib

import pyarrow as pa
import pyarrow.flight as flight

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Committer:
    """A table's writer and commit, made on first use on the thread that commits (pypaimon-rust's
    writers stay on the thread that made them)."""

    def __init__(self, warehouse: str):
        from pypaimon import CatalogFactory

        self.catalog = CatalogFactory.create({"warehouse": warehouse})
        self.tables: dict[str, tuple] = {}
        self.ids: dict[str, int] = {}

    def commit(self, name: str, data: pa.Table) -> None:
        from flight_server.paimon import compat

        if name not in self.tables:
            builder = compat.native_write_table(self.catalog.get_table(name)).new_stream_write_builder()
            self.tables[name] = (builder.new_write(), builder.new_commit())
        write, commit = self.tables[name]
        n = self.ids[name] = self.ids.get(name, 0) + 1
        write.write_arrow(data)
        commit.commit(write.prepare_commit(n), n)


def worker(conn, warehouse: str) -> None:
    """A commit process: receives [(table, IPC stream bytes)], commits each, answers with the count."""
    committer = Committer(warehouse)
    while True:
        try:
            jobs = conn.recv()
        except EOFError:
            return
        for name, payload in jobs:
            committer.commit(name, pa.ipc.open_stream(payload).read_all())
        conn.send(len(jobs))


class Pending:
    """One shard's tables: their pending batches and the events that ack them."""

    def __init__(self):
        self.cond = threading.Condition()
        self.tables: dict[str, list] = {}

    def put(self, name: str, batch: pa.RecordBatch, done: threading.Event) -> None:
        with self.cond:
            self.tables.setdefault(name, []).append((batch, done))
            self.cond.notify()

    def take(self) -> dict[str, list]:
        with self.cond:
            self.cond.wait_for(lambda: self.tables)
            out, self.tables = self.tables, {}
            return out


def ipc(batches: list[pa.RecordBatch]) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


class BareServer(flight.FlightServerBase):
    def __init__(self, warehouse: str, procs: int):
        super().__init__("grpc://127.0.0.1:0")
        self.commits = 0
        self.lock = threading.Lock()
        self.shards = [Pending() for _ in range(max(1, procs))]
        for i, shard in enumerate(self.shards):
            if procs:
                parent, child = mp.Pipe()
                mp.get_context("spawn").Process(target=worker, args=(child, warehouse), daemon=True).start()
                target = self._remote(parent)
            else:
                target = self._local(Committer(warehouse)) if i == 0 else None
            threading.Thread(target=self._loop, args=(shard, target), daemon=True).start()

    def _local(self, committer: Committer):
        def run(groups: dict[str, list]) -> None:
            for name, items in groups.items():
                committer.commit(name, pa.Table.from_batches([b for b, _ in items]))
        return run

    def _remote(self, conn):
        def run(groups: dict[str, list]) -> None:
            conn.send([(name, ipc([b for b, _ in items])) for name, items in groups.items()])
            conn.recv()
        return run

    def _loop(self, shard: Pending, run) -> None:
        while True:
            groups = shard.take()
            run(groups)
            with self.lock:
                self.commits += len(groups)
            for items in groups.values():
                for _, done in items:
                    done.set()

    def do_put(self, context, descriptor, reader, writer):
        name = descriptor.path[1].decode()
        shard = self.shards[zlib.crc32(name.encode()) % len(self.shards)]
        acks: queue.SimpleQueue = queue.SimpleQueue()

        def ack_in_order():
            while (done := acks.get()) is not None:
                done.wait()
                writer.write(pa.py_buffer(b"a"))

        acker = threading.Thread(target=ack_in_order, daemon=True)
        acker.start()
        for chunk in reader:
            if chunk.data is not None:
                done = threading.Event()
                acks.put(done)
                shard.put(name, chunk.data, done)
        acks.put(None)
        acker.join()

    def do_action(self, context, action):
        if action.type == "commits":
            with self.lock:
                yield flight.Result(pa.py_buffer(str(self.commits).encode()))
        else:
            raise flight.FlightServerError(f"unknown action {action.type!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("warehouse")
    ap.add_argument("--procs", type=int, default=0)
    args = ap.parse_args()
    server = BareServer(args.warehouse, args.procs)
    print(f"grpc://127.0.0.1:{server.port}", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
