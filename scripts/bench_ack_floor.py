"""The floor of durable ingest's per-batch path: a Flight server with no logic that reads each
batch with its app_metadata and writes one ack per batch, as the durable-write contract asks.

    .venv/bin/python scripts/bench_ack_floor.py [--rows 1000] [--batches 10000] [--runs 3]
    .venv/bin/python scripts/bench_ack_floor.py --producers 16 [--tick-ms 100] [--gib 0.5] [--runs 3]

Prints the server's CPU seconds per GiB received (its process, the producer is another): what
any server keeping the contract in pyarrow's Flight spends before it does anything with the
batches (docs/benchmarks_ingest.md, "Where the ingest path's CPU goes").

`--producers N`: the ack latency floor instead. N PaimonSink producers (bench_ingest's
named-producer role: separate processes, the sink's defaults, each batch timed from its hand-off
to gRPC to its ack) push `--gib` at full speed into a server that writes nothing and acks each
stream's batches together every `--tick-ms` (a commit interval with free commits). The ack p50 /
p99 it prints is what this machine gives N producers with no work behind the acks at all.

`--producers N --write`: durable ingest with no logic of its own. The server's one writer thread
writes each batch with pypaimon's native writer as it arrives and commits every `--tick-ms`; each
batch is acked after the commit that holds it. Alternating with each run, pypaimon alone writes
the same batches in one process (bench_ingest's baseline): the ratio, and both CPU s/GiB, are
what any server in pyarrow's Flight pays here before logic of its own (docs/benchmarks_ingest.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.flight as flight

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_ingest  # noqa: E402 - the benchmark's schema and batches


class AckingServer(flight.FlightServerBase):
    """Reads each batch and its metadata; acks it with `{"seq", "snapshot"}`; keeps nothing."""

    def list_actions(self, context):
        return []

    def do_put(self, context, descriptor, reader, writer):
        seq = 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                return
            if chunk.data is not None:
                if chunk.app_metadata is not None:
                    json.loads(chunk.app_metadata.to_pybytes())
                writer.write(pa.py_buffer(json.dumps({"seq": seq, "snapshot": 1}).encode()))
                seq += 1


class TickServer(flight.FlightServerBase):
    """Takes what PaimonSink sends (its schema lookup, `producer_state`, a write stream) and acks
    every batch received before a tick once that tick passed: a commit every `tick_s` that costs
    nothing. With `warehouse`, one thread writes every batch with pypaimon's native writer as it
    arrives (`write_arrow_batch` per batch, as bench_ingest's pypaimon baseline; the writer belongs
    to the thread that made it) and the tick is its commit: durable ingest with no logic of its own."""

    def __init__(self, location: str, tick_s: float, warehouse: str | None = None):
        import queue

        super().__init__(location)
        self.tick_s = tick_s
        self.snapshot = 0
        self.cond = threading.Condition()
        self.written: list[list] = []  # [seq, snapshot or None] of batches the next tick commits
        self.batches: queue.SimpleQueue | None = None
        if warehouse is not None:
            self.batches = queue.SimpleQueue()
        threading.Thread(target=self._run, args=(warehouse,), daemon=True).start()

    def _run(self, warehouse: str | None):
        try:
            self._commit_loop(warehouse)
        except BaseException as e:  # noqa: BLE001 - a floor that cannot write must not leave its producers waiting
            print(f"tick-server: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            os._exit(1)

    def _commit_loop(self, warehouse: str | None):
        import queue

        writer = commit = None
        if warehouse is not None:
            builder = bench_ingest._native_table(warehouse, f"{bench_ingest.DB}.floor").new_stream_write_builder()
            writer, commit = builder.new_write(), builder.new_commit()
        ident, due = 0, time.monotonic() + self.tick_s
        while True:
            if writer is None:
                time.sleep(max(0.0, due - time.monotonic()))
            else:
                try:
                    data, entry = self.batches.get(timeout=max(0.0, due - time.monotonic()))
                    writer.write_arrow_batch(data)
                    with self.cond:
                        self.written.append(entry)
                except queue.Empty:
                    pass
            if time.monotonic() < due:
                continue
            with self.cond:
                done, self.written = self.written, []
            if writer is not None and done:
                ident += 1
                commit.commit(writer.prepare_commit(ident), ident)
            with self.cond:
                self.snapshot += 1
                for entry in done:
                    entry[1] = self.snapshot
                self.cond.notify_all()
            due = time.monotonic() + self.tick_s

    def get_schema(self, context, descriptor):
        return flight.SchemaResult(bench_ingest.SCHEMA)

    def list_actions(self, context):
        return []

    def do_action(self, context, action):
        yield flight.Result(json.dumps({"last_seq": None}).encode())  # producer_state: a new producer

    def do_put(self, context, descriptor, reader, writer):
        received: list[list] = []
        done = [False]

        def ack():
            sent = 0
            while True:
                with self.cond:
                    self.cond.wait_for(lambda: done[0] or (sent < len(received) and received[sent][1] is not None))
                    due = []
                    while sent + len(due) < len(received) and received[sent + len(due)][1] is not None:
                        due.append(received[sent + len(due)])
                    if not due and done[0]:
                        return
                for seq, snapshot in due:
                    writer.write(pa.py_buffer(json.dumps({"seq": seq, "snapshot": snapshot}).encode()))
                sent += len(due)

        acker = threading.Thread(target=ack)
        acker.start()
        try:
            for chunk in reader:
                if chunk.data is None or chunk.app_metadata is None:
                    continue
                seq = json.loads(chunk.app_metadata.to_pybytes()).get("seq")
                entry = [seq, None]
                with self.cond:
                    received.append(entry)
                    if self.batches is None:
                        self.written.append(entry)
                if self.batches is not None:
                    self.batches.put((chunk.data, entry))
        finally:
            with self.cond:
                self.cond.wait_for(lambda: all(e[1] is not None for e in received[-1:]), timeout=10)
                done[0] = True
                self.cond.notify_all()
            acker.join()


def latency_floor(producers: int, gib: float, rows: int, tick_ms: int, runs: int, write: bool) -> None:
    import tempfile

    warehouse = tempfile.mkdtemp(prefix="ack-floor-")
    proc = subprocess.Popen([sys.executable, __file__, "tick-server", str(tick_ms), *([warehouse] if write else [])],
                            stdout=subprocess.PIPE, text=True)
    base = []
    try:
        uri = f"grpc://127.0.0.1:{int(proc.stdout.readline())}"
        per = int(gib * 2**30 / bench_ingest.make_batches(rows, 1)[0].nbytes) // producers
        results = []
        for run in range(-1, runs):  # run -1: warm-up, not counted
            roles = [bench_ingest.Role("named-producer", uri, "floor.t", str(rows), str(per if run >= 0 else 64),
                                       f"p{i}") for i in range(producers)]
            for r in roles:
                r.ready()
            cpu0 = sum(psutil.Process(proc.pid).cpu_times()[:2])
            for r in roles:
                r.go()
            outs = [r.result(timeout=1800) for r in roles]
            cpu = sum(psutil.Process(proc.pid).cpu_times()[:2]) - cpu0
            if run < 0:
                continue
            lat = [x for o in outs for x in o["lat_ms"]]
            mib = producers * per * bench_ingest.make_batches(rows, 1)[0].nbytes / 2**20
            results.append({"mib_s": mib / (max(o["end"] for o in outs) - min(o["start"] for o in outs)),
                            "p50_ms": bench_ingest.pct(lat, 50), "p99_ms": bench_ingest.pct(lat, 99),
                            "cpu_s_per_gib": cpu / (mib / 1024)})
            line = (f"  {results[-1]['mib_s']:.0f} MiB/s, server {results[-1]['cpu_s_per_gib']:.2f} CPU s/GiB, "
                    f"ack p50 {results[-1]['p50_ms']:.0f} ms, p99 {results[-1]['p99_ms']:.0f} ms")
            if write:  # pypaimon's own writer on the same batches, alternating with the floor's runs
                r = bench_ingest.run_role("pypaimon-stream", warehouse, f"{bench_ingest.DB}.base{run}", str(rows),
                                          str(per * producers), str(tick_ms))
                base.append(mib / (r["end"] - r["start"]))
                line += (f"; pypaimon alone {base[-1]:.0f} MiB/s, {r['cpu_s'] / (mib / 1024):.2f} CPU s/GiB: "
                         f"{results[-1]['mib_s'] / base[-1]:.2f}x")
            print(line, flush=True)
        what = "each batch written by pypaimon's native writer, a commit" if write else "nothing written, acks"
        print(f"median: {producers} producers of {rows}-row batches, {what} every {tick_ms} ms: "
              f"{statistics.median(r['mib_s'] for r in results):.0f} MiB/s"
              + (f" ({statistics.median(r['mib_s'] / b for r, b in zip(results, base)):.2f}x pypaimon alone)"
                 if write else "")
              + f", server {statistics.median(r['cpu_s_per_gib'] for r in results):.2f} CPU s/GiB"
              + f", ack p50 {statistics.median(r['p50_ms'] for r in results):.0f} ms, "
              f"p99 {statistics.median(r['p99_ms'] for r in results):.0f} ms")
    finally:
        proc.kill()
        proc.wait(10)
        import shutil

        shutil.rmtree(warehouse, ignore_errors=True)


def one_run(client: flight.FlightClient, pid: int, batches: list[pa.RecordBatch], n: int) -> dict:
    server = psutil.Process(pid)
    cpu0, start = sum(server.cpu_times()[:2]), time.monotonic()
    writer, reader = client.do_put(flight.FlightDescriptor.for_path("floor"), bench_ingest.SCHEMA)
    acks = [0]

    def read_acks():
        while reader.read() is not None:
            acks[0] += 1

    acker = threading.Thread(target=read_acks)
    acker.start()
    for i in range(n):
        writer.write_with_metadata(batches[i % len(batches)], pa.py_buffer(json.dumps({"seq": i}).encode()))
    writer.done_writing()
    acker.join()
    writer.close()
    gib = n * batches[0].nbytes / 2**30
    if acks[0] != n:
        raise SystemExit(f"the server acked {acks[0]} of {n} batches")
    return {"mib_s": gib * 1024 / (time.monotonic() - start), "cpu_s_per_gib": (sum(server.cpu_times()[:2]) - cpu0) / gib}


def main() -> None:
    if sys.argv[1:] == ["server"] or sys.argv[1:2] == ["tick-server"]:
        server = (AckingServer("grpc://127.0.0.1:0") if sys.argv[1] == "server"
                  else TickServer("grpc://127.0.0.1:0", int(sys.argv[2]) / 1000, *sys.argv[3:4]))
        print(server.port, flush=True)
        server.serve()
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--batches", type=int, default=10000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--producers", type=int, help="measure the ack latency floor of this many PaimonSink producers")
    p.add_argument("--tick-ms", type=int, default=100, help="--producers: acks go out this often")
    p.add_argument("--gib", type=float, default=0.5, help="--producers: GiB pushed a run, among them")
    p.add_argument("--write", action="store_true",
                   help="--producers: the server writes each batch with pypaimon's native writer and commits each "
                        "tick (no logic of its own), against pypaimon alone on the same batches")
    args = p.parse_args()
    if args.producers:
        latency_floor(args.producers, args.gib, args.rows, args.tick_ms, args.runs, args.write)
        return
    proc = subprocess.Popen([sys.executable, __file__, "server"], stdout=subprocess.PIPE, text=True)
    try:
        client = flight.FlightClient(f"grpc://127.0.0.1:{int(proc.stdout.readline())}")
        client.list_actions()  # connected before the clock
        batches = bench_ingest.make_batches(args.rows, 8)
        one_run(client, proc.pid, batches, min(1000, args.batches))  # warm-up, not counted
        runs = [one_run(client, proc.pid, batches, args.batches) for _ in range(args.runs)]
        for r in runs:
            print(f"  {r['mib_s']:.0f} MiB/s, server {r['cpu_s_per_gib']:.2f} CPU s/GiB")
        print(f"median: server {statistics.median(r['cpu_s_per_gib'] for r in runs):.2f} CPU s/GiB "
              f"({args.rows}-row batches, one ack each)")
    finally:
        proc.kill()
        proc.wait(10)


if __name__ == "__main__":
    main()
