"""What grows in the server's memory under steady small-rate durable ingest (issue 37 item 5).

An in-process server (FlightPaimonServer with `flight_cli serve`'s defaults: one malloc arena,
`--maintenance-workers 1`) takes durable do_put into one append table (bucket -1) from
scripts/bench_amplification.py's producers (`--producers` x `--rate` batches/s x `--rows` rows;
the defaults are that script's `small` workload). Every `--sample-s` it prints one JSON line: RSS,
the compaction worker's (the server's child processes: the worker and multiprocessing's ~13 MiB
resource tracker), what Python allocated (tracemalloc's traced total and its own overhead),
Arrow's pool, glibc's mallinfo2 (heap in use / free), gc object count and group commits so far.
With tracemalloc (the default) it takes a snapshot at `--snap-at` and at the end and prints the largest growths
between them grouped by traceback (`--frames` deep), so a leak in Python is named by the line
that allocates it. RSS growing while traced memory is flat points at native memory (Arrow,
gRPC, malloc fragmentation). --no-tracemalloc measures RSS alone (tracemalloc costs CPU and
holds a record per live block, so RSS figures are taken without it). --process runs the server
as `flight_cli serve` does in scripts/bench_amplification.py (a child process: RSS only). The
last line: RSS from `--snap-at` to the end (the worker's: first, last, highest).

What it found (issue 37 item 5): pypaimon's process-wide cache of data file footers
(`file-format.metadata-cache.max-size`, up to 4,096 files, ~40 KiB of RSS a file) held every file
a compaction read; the worker now reads with it off (maintenance/workers.py).

Usage: .venv/bin/python scripts/bench_memory.py [--seconds 300] [--snap-at 60] [--sample-s 15]
       [--producers 2] [--rows 250] [--rate 20] [--frames 25] [--top 15] [--no-tracemalloc]
       [--maintenance-workers 1] [--process]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import tempfile
import threading
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from flight_server.wire import allocator  # noqa: E402

allocator.one_malloc_arena()  # as flight_cli's main does, before pyarrow is imported

import psutil  # noqa: E402
import pyarrow as pa  # noqa: E402
from bench_amplification import Producer  # noqa: E402
from bench_ingest import SCHEMA  # noqa: E402

from flight_cli import logs  # noqa: E402
from flight_server.server import FlightPaimonServer  # noqa: E402
from producers import Client  # noqa: E402
from tests.process import ServerProcess  # noqa: E402


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def mallinfo() -> dict:
    """glibc's heap: `in_use` (uordblks + mmapped hblkhd) and `free` (fordblks) MiB; {} elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        m = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {"malloc_in_use_mib": round((m.uordblks + m.hblkhd) / 2**20, 1),
            "malloc_free_mib": round(m.fordblks / 2**20, 1)}


def _rss(p: psutil.Process) -> int:
    try:
        return p.memory_info().rss
    except psutil.Error:
        return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--snap-at", type=float, default=60, help="the first snapshot (s); the second at the end")
    ap.add_argument("--sample-s", type=float, default=15)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=250)
    ap.add_argument("--rate", type=float, default=20.0, help="batches a second per producer")
    ap.add_argument("--frames", type=int, default=25)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--maintenance-workers", type=int, default=1)
    ap.add_argument("--no-tracemalloc", dest="trace", action="store_false")
    ap.add_argument("--process", action="store_true",
                    help="the server as a `flight_cli serve` child (as bench_amplification.py): RSS only")
    args = ap.parse_args()
    args.trace = args.trace and not args.process
    logs.configure("warning")
    if args.trace:
        tracemalloc.start(args.frames)
    proc = psutil.Process()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        warehouse = os.path.join(tmp, "warehouse")
        if args.process:  # `flight_cli serve` as bench_amplification.py runs it: RSS only
            child = ServerProcess(warehouse, "--maintenance-workers", str(args.maintenance_workers),
                                  log_level="warning", stderr=open(os.path.join(tmp, "server.log"), "w"))
            uri, proc = child.uri, psutil.Process(child.proc.pid)
        else:
            server = FlightPaimonServer("grpc://127.0.0.1:0", warehouse=warehouse,
                                        maintenance_workers=args.maintenance_workers)
            thread = threading.Thread(target=server.serve, name="bench-server", daemon=True)
            thread.start()
            uri = server.uri
        client = Client(uri, timeout=300)
        table = "bench.t"
        client.create_table(table, SCHEMA, options={"bucket": "-1"})
        stop = threading.Event()
        producers = [Producer(uri, table, args.rows, args.rate, 11 + i, stop) for i in range(args.producers)]
        start = time.monotonic()
        for p in producers:
            p.start()
        first = None
        samples = []
        try:
            while (t := time.monotonic() - start) < args.seconds:
                time.sleep(min(args.sample_s, max(0.0, args.seconds - t)))
                t = time.monotonic() - start
                if args.trace and first is None and t >= args.snap_at:
                    first = tracemalloc.take_snapshot()
                stats = client.stats(table)
                state, writes = stats.maintenance.get(table), stats.paimon_writes.get(table)
                sample = {"t_s": round(t, 1), "rss_mib": round(proc.memory_info().rss / 2**20, 1),
                          "worker_rss_mib": round(sum(_rss(c) for c in proc.children(recursive=True)) / 2**20, 1)}
                if not args.process:
                    sample.update({"arrow_pool_mib": round(pa.total_allocated_bytes() / 2**20, 1), **mallinfo(),
                                   "gc_objects": len(gc.get_objects())})
                sample.update({
                          "acked": sum(p.acked for p in producers),
                          "commits": getattr(writes, "commits", None),
                          "snapshots": getattr(state, "snapshots", None),
                          "compactions": getattr(state, "compactions", None)})
                if args.trace:
                    sample["traced_mib"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
                    sample["tracemalloc_overhead_mib"] = round(tracemalloc.get_tracemalloc_memory() / 2**20, 1)
                samples.append(sample)
                print(json.dumps(sample), flush=True)
                if any(p.error for p in producers):
                    raise RuntimeError(f"a producer failed: {[p.error for p in producers if p.error]}")
            if args.trace and first is not None:
                second = tracemalloc.take_snapshot()
                filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
                diff = second.filter_traces(filters).compare_to(first.filter_traces(filters), "traceback")
                print(f"# largest growths between {args.snap_at:.0f} s and the end (grouped by traceback)")
                for stat in diff[:args.top]:
                    print(f"+{stat.size_diff / 2**20:.2f} MiB (+{stat.count_diff} blocks), now "
                          f"{stat.size / 2**20:.2f} MiB in {stat.count} blocks")
                    for line in stat.traceback.format(limit=args.frames, most_recent_first=True)[:2 * args.frames]:
                        print("    " + line)
                by_line = second.filter_traces(filters).compare_to(first.filter_traces(filters), "lineno")
                print("# by line")
                for stat in by_line[:args.top]:
                    print(f"+{stat.size_diff / 2**20:.2f} MiB (+{stat.count_diff}) {stat.traceback[0]}")
        finally:
            stop.set()
            for p in producers:
                p.join(60)
            client.close()
            if args.process:
                child.stop()
            else:
                server.close("the benchmark is done", 10)
                thread.join(10)
        after = [s for s in samples if s["t_s"] >= min(args.snap_at, args.seconds / 2)]
        if len(after) >= 2:
            a, b = after[0], after[-1]
            minutes = (b["t_s"] - a["t_s"]) / 60
            print(json.dumps({"from_s": a["t_s"], "to_s": b["t_s"],
                              "rss_mib": [a["rss_mib"], b["rss_mib"]],
                              "rss_growth": round(b["rss_mib"] / a["rss_mib"] - 1, 3),
                              "rss_mib_per_min": round((b["rss_mib"] - a["rss_mib"]) / minutes, 1),
                              "worker_rss_mib": [a["worker_rss_mib"], b["worker_rss_mib"],
                                                 max(s["worker_rss_mib"] for s in after)],
                              **({"traced_mib_per_min": round((b["traced_mib"] - a["traced_mib"]) / minutes, 1)}
                                 if args.trace else {})}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
