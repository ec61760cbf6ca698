"""What maintenance costs per byte ingested, and whether the table still reads fast (issue 37).

A server with its defaults (`flight_cli serve`, maintenance on) takes durable do_put into one
append table (bucket -1) for `--seconds`, from in-process producers:
- `small`: 2 producers of 250-row batches at 20/s each (40 batches/s, the 124x run of the issue);
- `full`: 1 producer of 1,000-row batches as fast as the server takes them;
- `big`: 1 producer of 64k-row batches as fast as the server takes them.
Every `--sample-s` it records the server's `stats` (ingested and compacted bytes, data files), its
RSS and its compaction worker's. At the end the producers stop, maintenance settles (`due` false: the rounds after the
last commit and the settling round), and the table's full read through Flight is timed against a
table holding the same rows in one commit (pypaimon's writer), `--reads` each, alternating.

Goals: compacted / ingested bytes <= 4 (`write_amplification`), the settled read <= 1.2x, RSS
after the first 5 minutes growing < 10%.

Usage: .venv/bin/python scripts/bench_amplification.py [--workload small|full|big|all] [--seconds 1800]
       [--sample-s 30] [--reads 7] [--json docs/bench-results/amplification.json]

`--busy` measures instead what a maintenance catch-up costs readers of the same server (goal: <=
1.3x): a burst of `--burst` 1,000-row batches at full speed into one table, then, while the server
compacts it (`due`), full reads of another table (1M rows in one commit) are timed; once it has
settled, as many again. Servers rewriting in a worker process (`--maintenance-workers 1`, the
default) and on the maintenance thread (0) take turns, `--runs` each.

       .venv/bin/python scripts/bench_amplification.py --busy [--runs 3] [--burst 3000] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import psutil  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.flight as flight  # noqa: E402
from bench_ingest import SCHEMA, make_batches  # noqa: E402

from flight_server.paimon import compat  # noqa: E402
from flight_server.wire import messages  # noqa: E402
from producers import Client  # noqa: E402
from tests.process import ServerProcess  # noqa: E402

WORKLOADS = {  # name: (producers, rows a batch, batches a second per producer; 0: as fast as acks come)
    "small": (2, 250, 20.0),
    "full": (1, 1000, 0.0),
    "big": (1, 65536, 0.0),
}
WINDOW = 64  # batches a full-speed producer keeps unacked


class Producer(threading.Thread):
    """Raw durable do_put of one workload's batches until `stop` is set; counts what was acked."""

    def __init__(self, uri: str, table: str, rows: int, rate: float, seed: int, stop: threading.Event):
        super().__init__(daemon=True)
        self.uri, self.table, self.rate, self.stop = uri, table, rate, stop
        self.batches = make_batches(rows, 16, seed=seed)
        self.sent = self.acked = self.rows = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.error = e

    def _run(self) -> None:
        client = flight.FlightClient(self.uri)
        writer, reader = client.do_put(flight.FlightDescriptor.for_path("paimon", self.table), SCHEMA)
        window = threading.Semaphore(WINDOW)

        def read_acks():
            while reader.read() is not None:
                self.acked += 1
                window.release()

        acks = threading.Thread(target=read_acks, daemon=True)
        acks.start()
        start = time.monotonic()
        while not self.stop.is_set():
            if self.rate:
                wait = start + self.sent / self.rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            elif not window.acquire(timeout=1):
                continue
            batch = self.batches[self.sent % len(self.batches)]
            writer.write_batch(batch)
            self.sent += 1
            self.rows += batch.num_rows
        writer.write_metadata(pa.py_buffer(messages.end(self.sent)))
        writer.done_writing()
        acks.join(300)
        writer.close()
        client.close()


def full_read_s(client: Client, table: str) -> tuple[float, int]:
    start = time.perf_counter()
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), client.options())
    rows = sum(client.flight.do_get(ep.ticket, client.options()).read_all().num_rows for ep in info.endpoints)
    return time.perf_counter() - start, rows


def baseline(warehouse: str, name: str, rows: int, batch_rows: int, seeds: list[int]) -> None:
    """The same rows as the ingested table, in one commit (pypaimon's writer)."""
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": warehouse})
    compat.create_table(catalog, name, SCHEMA, None, None, {"bucket": "-1"})
    table = compat.native_write_table(catalog.get_table(name))
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    pools = [make_batches(batch_rows, 16, seed=s) for s in seeds]
    done, i = 0, 0
    while done < rows:
        b = pools[i % len(pools)][(i // len(pools)) % 16]
        b = b.slice(0, min(b.num_rows, rows - done))
        write.write_arrow(pa.Table.from_batches([b]))
        done += b.num_rows
        i += 1
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def run(workload: str, seconds: float, sample_s: float, reads: int) -> dict:
    producers_n, rows, rate = WORKLOADS[workload]
    with tempfile.TemporaryDirectory(prefix=f"bench-amplification-{workload}-") as tmp:
        warehouse = os.path.join(tmp, "warehouse")
        server = ServerProcess(warehouse, log_level="warning", stderr=open(os.path.join(tmp, "server.log"), "w"))
        proc = psutil.Process(server.proc.pid)
        client = Client(server.uri, timeout=300)
        table = "bench.t"
        try:
            client.create_table(table, SCHEMA, options={"bucket": "-1"})
            stop = threading.Event()
            seeds = [11 + i for i in range(producers_n)]
            producers = [Producer(server.uri, table, rows, rate, s, stop) for s in seeds]
            start = time.monotonic()
            for p in producers:
                p.start()
            samples = []
            cpu0 = proc.cpu_times()
            while time.monotonic() - start < seconds:
                time.sleep(min(sample_s, max(0.0, seconds - (time.monotonic() - start))))
                state = client.stats(table).maintenance.get(table)
                cpu = proc.cpu_times()
                workers = sum(c.memory_info().rss for c in proc.children(recursive=True)) / 2**20
                samples.append({"t_s": round(time.monotonic() - start, 1), "rss_mib": proc.memory_info().rss / 2**20,
                                "worker_rss_mib": workers,
                                "cpu_s": cpu.user + cpu.system - cpu0.user - cpu0.system,
                                **{k: getattr(state, k, None) for k in ("ingested_bytes", "compacted_bytes", "write_amplification",
                                                             "data_files", "data_bytes", "snapshots")}})
                print(json.dumps({"workload": workload, **samples[-1]}), flush=True)
                if any(p.error for p in producers):
                    raise RuntimeError(f"a producer failed: {[p.error for p in producers if p.error]}")
            stop.set()
            for p in producers:
                p.join(600)
                assert p.error is None and p.acked == p.sent, (p.error, p.acked, p.sent)
            ingest_s = time.monotonic() - start
            settle_start = time.monotonic()
            while getattr(client.stats(table).maintenance.get(table), "due", True):
                if time.monotonic() - settle_start > 900:
                    raise RuntimeError("maintenance did not settle in 15 minutes")
                time.sleep(0.5)
            settle_s = time.monotonic() - settle_start
            state = client.stats(table).maintenance[table]
            total_rows = sum(p.rows for p in producers)
            baseline(warehouse, "bench.one_commit", total_rows, rows, seeds)
            kept_s, base_s = [], []
            for i in range(reads):
                for name, out in ((("bench.t", kept_s), ("bench.one_commit", base_s))[::1 if i % 2 == 0 else -1]):
                    elapsed, got = full_read_s(client, name)
                    assert got == total_rows, (name, got, total_rows)
                    out.append(elapsed)
            after5 = [s["rss_mib"] for s in samples if s["t_s"] >= min(300, seconds / 2)]
            return {"workload": workload, "producers": producers_n, "rows_per_batch": rows,
                    "rate_batches_s": rate * producers_n or "as fast as acked", "seconds": round(ingest_s, 1),
                    "rows": total_rows, "settle_s": round(settle_s, 1),
                    "ingested_bytes": state.ingested_bytes, "compacted_bytes": state.compacted_bytes,
                    "write_amplification": state.write_amplification, "data_files_settled": state.data_files,
                    "compactions": state.compactions,
                    "read_ms": round(statistics.median(kept_s) * 1000, 1),
                    "one_commit_read_ms": round(statistics.median(base_s) * 1000, 1),
                    "read_ratio": round(statistics.median(kept_s) / statistics.median(base_s), 3),
                    "rss_mib_first": round(after5[0], 1) if after5 else None,
                    "rss_mib_last": round(after5[-1], 1) if after5 else None,
                    "rss_growth_after_5min": round(after5[-1] / after5[0] - 1, 3) if after5 else None,
                    "server_cpu_s": round(samples[-1]["cpu_s"], 1) if samples else None,
                    "samples": samples}
        finally:
            client.close()
            server.stop()


def busy(workers: int, burst: int) -> dict:
    """One run of the busy-read figure (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="bench-amplification-busy-") as tmp:
        warehouse = os.path.join(tmp, "warehouse")
        baseline(warehouse, "bench.read", 1_000_000, 65536, [3])
        server = ServerProcess(warehouse, "--maintenance-workers", str(workers), log_level="warning",
                               stderr=open(os.path.join(tmp, "server.log"), "w"))
        client = Client(server.uri, timeout=300)
        try:
            client.create_table("bench.t", SCHEMA, options={"bucket": "-1"})
            for _ in range(3):
                full_read_s(client, "bench.read")  # warm
            stop = threading.Event()
            producer = Producer(server.uri, "bench.t", 1000, 0.0, 7, stop)
            producer.start()
            while producer.sent < burst and producer.error is None:
                time.sleep(0.05)
            stop.set()
            producer.join(600)
            assert producer.error is None and producer.acked == producer.sent, (producer.error, producer.acked)
            busy_s = []
            while getattr(client.stats("bench.t").maintenance.get("bench.t"), "due", True):
                busy_s.append(full_read_s(client, "bench.read")[0])
            state = client.stats("bench.t").maintenance["bench.t"]
            settled_s = [full_read_s(client, "bench.read")[0] for _ in range(max(5, len(busy_s)))]
        finally:
            client.close()
            server.stop()
    return {"workers": workers, "busy_reads": len(busy_s), "busy_ms": round(statistics.median(busy_s) * 1000, 1),
            "settled_ms": round(statistics.median(settled_s) * 1000, 1),
            "ratio": round(statistics.median(busy_s) / statistics.median(settled_s), 3),
            "compactions": state.compactions, "compacted_bytes": state.compacted_bytes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", action="store_true", help="measure reads during a maintenance catch-up instead")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--burst", type=int, default=3000)
    ap.add_argument("--workload", default="all", choices=[*WORKLOADS, "all"])
    ap.add_argument("--seconds", type=float, default=1800)
    ap.add_argument("--sample-s", type=float, default=30)
    ap.add_argument("--reads", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.busy:
        runs = []
        for i in range(args.runs):
            for workers in ((1, 0) if i % 2 == 0 else (0, 1)):
                runs.append(busy(workers, args.burst))
                print(json.dumps(runs[-1]), flush=True)
        summary = {w: {"ratio": statistics.median(r["ratio"] for r in runs if r["workers"] == w),
                       "busy_reads": sum(r["busy_reads"] for r in runs if r["workers"] == w)} for w in (1, 0)}
        print(json.dumps({"busy_read_ratio_worker": summary[1], "busy_read_ratio_in_process": summary[0]}), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"command": " ".join(["scripts/bench_amplification.py", *sys.argv[1:]]), "runs": runs,
                           "summary": summary}, f, indent=1)
        return 0
    results = [run(w, args.seconds, args.sample_s, args.reads)
               for w in (WORKLOADS if args.workload == "all" else [args.workload])]
    for r in results:
        print(json.dumps({k: v for k, v in r.items() if k != "samples"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["scripts/bench_amplification.py", *sys.argv[1:]]), "results": results},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
