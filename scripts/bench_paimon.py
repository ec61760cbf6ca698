"""Benchmark Paimon reads through flight-paimon against pypaimon itself, measured in the same run.

1. Append table, 4 buckets: one consumer process per endpoint in parallel through a
   `flight_cli serve` process vs pypaimon reading the same table in one process.
2. Primary-key table: merged read rows/s, pypaimon alone and through Flight.
3. Follow latency: commit returned -> first row at a consumer polling every 100 ms.

Usage: .venv/bin/python scripts/bench_paimon.py [--rows 2000000] [--pk-rows 200000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil
import pyarrow as pa
import pyarrow.flight as flight

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pypaimon import CatalogFactory, Schema  # noqa: E402

from flight_server.wire import messages  # noqa: E402
from tests.paimon_tables import commit_arrow  # noqa: E402
from tests.process import ServerProcess  # noqa: E402

CORES = os.cpu_count() or 1
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()),
                    ("region", pa.string()), ("ts", pa.int64())])


def make_rows(start: int, n: int) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table({"id": ids, "name": pa.array([f"customer-{i % 100000}" for i in range(start, start + n)]),
                     "amount": pa.array([i * 0.25 for i in range(start, start + n)], pa.float64()),
                     "region": pa.array([("eu", "us", "apac")[i % 3] for i in range(start, start + n)]),
                     "ts": ids}, schema=SCHEMA)


def write_table(catalog, name, rows, primary_keys=None, chunk=500_000, versions=1):
    """`versions` > 1 rewrites every key again, so a primary-key read has to merge."""
    opts = {"bucket": "4"} if primary_keys else {"bucket": "4", "bucket-key": "id"}
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=primary_keys, options=opts), False)
    t = catalog.get_table(name)
    for start in [s for _ in range(versions) for s in range(0, rows, chunk)]:
        commit_arrow(t, make_rows(start, min(chunk, rows - start)))


def pypaimon_read(catalog, name, options=None) -> tuple[float, int, float]:
    """(wall s, rows, CPU s of this process: every thread pypaimon and Arrow use)."""
    t = catalog.get_table(name).copy({"read.batch-size": "65536", **(options or {})})
    rb = t.new_read_builder()
    start, cpu = time.perf_counter(), time.process_time()
    n = sum(b.num_rows for b in rb.new_read().to_arrow_batch_reader(rb.new_scan().plan().splits()))
    return time.perf_counter() - start, n, time.process_time() - cpu


def _consumer(uri, ticket, ready, go, out):
    client = flight.FlightClient(uri)
    client.list_actions(options=flight.FlightCallOptions(timeout=30))  # connected before the clock starts
    ready.put(1)
    go.wait()
    n, cpu = 0, time.process_time()
    for chunk in client.do_get(flight.Ticket(ticket), options=flight.FlightCallOptions(timeout=300)):
        n += chunk.data.num_rows
    out.put((n, time.process_time() - cpu))


def flight_parallel(uri, table, server_pid: int | None = None) -> tuple[float, int, int, float]:
    """(wall s from go to the last consumer done, rows, endpoints, CPU s of the server and the
    consumers during the read); consumers are started (and connected) before go. `server_pid`:
    the server's process (None: a server in this process)."""
    client = flight.FlightClient(uri)
    fi = client.get_flight_info(flight.FlightDescriptor.for_path("paimon", table),
                                options=flight.FlightCallOptions(timeout=60))
    ctx = mp.get_context("spawn")
    go, ready, out = ctx.Event(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_consumer, args=(uri, ep.ticket.ticket, ready, go, out)) for ep in fi.endpoints]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    server_cpu = _cpu(server_pid)
    start = time.perf_counter()
    go.set()
    done = [out.get(timeout=300) for _ in procs]
    elapsed = time.perf_counter() - start
    cpu = _cpu(server_pid) - server_cpu + sum(c for _, c in done)
    for p in procs:
        p.join(30)
    return elapsed, sum(n for n, _ in done), len(fi.endpoints), cpu


def _cpu(pid: int | None) -> float:
    if pid is None:
        return time.process_time()
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


class MemoryServer(flight.FlightServerBase):
    """The baseline with no logic at all: the table's batches held in memory, dealt to 4 endpoints,
    each a RecordBatchStream: what Flight itself costs to serve these rows to 4 consumers here."""

    def __init__(self, table: pa.Table, endpoints: int = 4):
        super().__init__("grpc://127.0.0.1:0")
        batches = table.to_batches(max_chunksize=65536)
        self.parts = [pa.Table.from_batches(batches[i::endpoints], schema=table.schema) for i in range(endpoints)]

    def get_flight_info(self, context, descriptor):
        uri = f"grpc://127.0.0.1:{self.port}"
        endpoints = [flight.FlightEndpoint(str(i).encode(), [uri]) for i in range(len(self.parts))]
        return flight.FlightInfo(self.parts[0].schema, descriptor, endpoints, -1, -1)

    def list_actions(self, context):
        return []

    def do_get(self, context, ticket):
        return flight.RecordBatchStream(self.parts[int(ticket.ticket)])


def follow_latency(uri, catalog, name, commits) -> list[float]:
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, options={"bucket": "-1"}), False)
    t = catalog.get_table(name)
    client = flight.FlightClient(uri)
    cmd = {"table": name, "follow": True, "start": "latest", "poll_interval_ms": 100}
    fi = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)),
                                options=flight.FlightCallOptions(timeout=30))
    reader = client.do_get(fi.endpoints[0].ticket, options=flight.FlightCallOptions(timeout=120))
    seen: dict[int, float] = {}

    def pull():
        try:
            while True:
                chunk = reader.read_chunk()
                sid = messages.read_mark(chunk.app_metadata).snapshot
                if sid is not None:  # a data batch, not a follow's done mark
                    seen.setdefault(sid, time.perf_counter())
        except (StopIteration, flight.FlightError):
            pass

    threading.Thread(target=pull, daemon=True).start()
    time.sleep(0.5)
    committed: dict[int, float] = {}
    for i in range(commits):
        wb = t.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(make_rows(i * 100, 100))
        c.commit(w.prepare_commit())
        committed[t.snapshot_manager().get_latest_snapshot().id] = time.perf_counter()
        w.close()
        c.close()
        time.sleep(0.13)  # commits land at arbitrary points of the poll cycle
    deadline = time.time() + 10
    while len(seen) < len(committed) and time.time() < deadline:
        time.sleep(0.05)
    reader.cancel()
    return [(seen[s] - committed[s]) * 1000 for s in committed if s in seen]


def planning(uri, catalog, name, commits, runs) -> dict:
    """A 4-bucket table of `commits` small commits: get_flight_info (plans every endpoint once)
    and one endpoint's do_get (reads its pinned splits; before plan-once it re-planned), medians."""
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, options={"bucket": "4", "bucket-key": "id"}), False)
    t = catalog.get_table(name)
    for i in range(commits):
        commit_arrow(t, make_rows(i * 100, 100))
    client = flight.FlightClient(uri)
    options = flight.FlightCallOptions(timeout=120)
    plan_s, get_s = [], []
    for _ in range(runs):
        start = time.perf_counter()
        fi = client.get_flight_info(flight.FlightDescriptor.for_path("paimon", name), options=options)
        plan_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        client.do_get(fi.endpoints[0].ticket, options=options).read_all()
        get_s.append(time.perf_counter() - start)
    return {"commits": commits, "get_flight_info_ms": statistics.median(plan_s) * 1000,
            "per_endpoint_ms": statistics.median(plan_s) * 1000 / len(fi.endpoints),
            "do_get_one_endpoint_ms": statistics.median(get_s) * 1000}


def alternating(runs: int, rounds: dict) -> dict:
    """Each measurement of `rounds` once per run, the order rotated every run; their results."""
    out = {k: [] for k in rounds}
    names = list(rounds)
    for run in range(runs):
        k = run % len(names)
        for name in names[k:] + names[:k]:
            out[name].append(rounds[name]())
    return out


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--pk-rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--commits", type=int, default=60)
    ap.add_argument("--history-commits", type=int, default=200, help="commits of the many-commit append table")
    ap.add_argument("--planning-commits", default="10,100,400", help="table histories to time planning on")
    ap.add_argument("--native", action="store_true", help="also time read.native.enabled (pypaimon-rust)")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    wh = tempfile.mkdtemp(prefix="bench-paimon-")
    catalog = CatalogFactory.create({"warehouse": wh})
    catalog.create_database("bench", True)
    t0 = time.perf_counter()
    write_table(catalog, "bench.append", args.rows)
    write_table(catalog, "bench.history", args.rows, chunk=max(1, args.rows // args.history_commits))
    write_table(catalog, "bench.pk", args.pk_rows, primary_keys=["id"], versions=2)
    print(f"wrote tables in {time.perf_counter() - t0:.1f}s ({wh})", flush=True)
    running = ServerProcess(wh, log_level="warning", stderr=subprocess.DEVNULL)
    server, uri = running.proc, running.uri
    results = {}
    try:
        native = {"read.native.enabled": "true"}
        memory = MemoryServer(catalog.get_table("bench.append").new_read_builder().new_read().to_arrow(
            catalog.get_table("bench.append").new_read_builder().new_scan().plan().splits()))
        threading.Thread(target=memory.serve, daemon=True).start()
        memory_uri = f"grpc://127.0.0.1:{memory.port}"
        for key, table in (("append", "bench.append"), ("history", "bench.history")):
            pypaimon_read(catalog, table)  # warm-up: imports, first reads, page cache
            flight_parallel(uri, table)
            got = alternating(args.runs, {"pypaimon": lambda: pypaimon_read(catalog, table),
                                          "native": lambda: pypaimon_read(catalog, table, native),
                                          "flight": lambda: flight_parallel(uri, table, server.pid),
                                          "memory": lambda: flight_parallel(memory_uri, table)})
            assert all(r[1] == args.rows for rounds in got.values() for r in rounds)
            b, nb, f, m = (statistics.median(r[0] for r in got[k]) for k in ("pypaimon", "native", "flight", "memory"))
            cpu = {k: statistics.median(r[-1] for r in got[k]) for k in got}
            results[key] = dict(rows=args.rows, endpoints=got["flight"][0][2], runs=args.runs, pypaimon_s=b,
                                native_s=nb, flight_s=f, ratio=b / f, ratio_native=nb / f,
                                # Flight alone: the same rows served from memory by a server with no logic
                                memory_flight_s=m,
                                pypaimon_rows_s=args.rows / b, flight_rows_s=args.rows / f,
                                # CPU s of each read (the Flight reads: server + 4 consumers); on
                                # CORES cores no read takes less wall time than its CPU / CORES
                                cpu_s=cpu, ceiling_ratio=b / (cpu["flight"] / CORES))
            if key == "history":
                results[key]["commits"] = args.history_commits
            print(key, json.dumps(results[key]), flush=True)
        results["planning"] = [planning(uri, catalog, f"bench.plan_{n}", n, args.runs)
                               for n in map(int, args.planning_commits.split(","))]
        print("planning", json.dumps(results["planning"]), flush=True)
        pk = [pypaimon_read(catalog, "bench.pk") for _ in range(args.runs)]
        pkf = [flight_parallel(uri, "bench.pk", server.pid) for _ in range(args.runs)]
        pb, pf = statistics.median(r[0] for r in pk), statistics.median(r[0] for r in pkf)
        results["pk"] = dict(rows=args.pk_rows, pypaimon_rows_s=args.pk_rows / pb, flight_rows_s=args.pk_rows / pf)
        if args.native:
            try:
                nat = [pypaimon_read(catalog, "bench.pk", {"read.native.enabled": "true"}) for _ in range(args.runs)]
                results["pk"]["native_rows_s"] = args.pk_rows / statistics.median(r[0] for r in nat)
                results["pk"]["native_rows"] = nat[0][1]
            except Exception as e:  # noqa: BLE001 - a missing or incompatible pypaimon-rust: say so, do not fail the run
                results["pk"]["native_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        lat = follow_latency(uri, catalog, "bench.follow", args.commits)
        results["follow"] = dict(commits=args.commits, delivered=len(lat), p50_ms=pct(lat, 50), p99_ms=pct(lat, 99),
                                 max_ms=max(lat))
    finally:
        server.kill()
        server.wait(10)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
