"""Where a server's memory goes when tables are written once and then evicted (issue 47 item 1).

An in-process server (as `flight_cli serve`: one glibc arena, a compaction worker process) gets N
append tables, one of them written and evicted first (the code the first write runs, faulted in
once), then every table written once (one 1,000-row batch by raw do_put, 32 at a time), then left
until every committer is evicted (`--table-idle-timeout-ms`). At each point it reads, in MiB:

- `rss`, `rss_anon`, `rss_file`: /proc/self/status (file pages are the libraries' code);
- `heap`, `heap_in_use`, `heap_free`, `mmapped`: glibc's mallinfo2 (what malloc holds, what of it
  is allocated, what is free, and the large blocks mapped apart);
- `pymalloc_arenas`, `pymalloc_allocated`, `pymalloc_free`: Python's small-object allocator
  (sys._debugmallocstats: arenas of 1 MiB, bytes in live objects, bytes free in used pools);
- `mimalloc_rss`: the RSS of Arrow's mimalloc segments (anonymous mappings in its 2-8 TiB hint area).

`--rounds 2` writes every table again after the eviction: what is kept is the allocators' free
memory at its high mark, reused by the next writes, not memory a table holds.

       .venv/bin/python scripts/idle_memory.py [--tables 1000] [--table-idle-timeout-ms 40000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import re
import sys
import tempfile
import threading
import time

sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(os.path.abspath(__file__))]

from flight_server.wire import allocator  # noqa: E402 - before pyarrow, as flight_cli does

allocator.one_malloc_arena()

import structlog  # noqa: E402

MIMALLOC_HINT = (0x20000000000, 0x80000000000)  # where mimalloc asks the kernel to map its segments


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mib(n: float) -> float:
    return round(n / 2**20, 1)


def _pymalloc() -> dict:
    """sys._debugmallocstats' totals (it writes to the C stderr: read back through a file)."""
    with tempfile.TemporaryFile("w+") as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()

    def field(name: str) -> int:
        m = re.search(rf"# {name}\s*=\s*([\d,]+)", text)
        return int(m.group(1).replace(",", "")) if m else 0

    return {"pymalloc_arenas": field("arenas allocated current"),
            "pymalloc_allocated": _mib(field("bytes in allocated blocks")),
            "pymalloc_free": _mib(field("bytes in available blocks"))}


def _mimalloc_rss() -> float:
    kib, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                lo = int(first.split("-")[0], 16)
                inside = len(line.split()) < 6 and MIMALLOC_HINT[0] <= lo < MIMALLOC_HINT[1]
            elif inside and first == "Rss:":
                kib += int(line.split()[1])
    return round(kib / 1024, 1)


def measure(label: str) -> dict:
    gc.collect()
    allocator.release_free_memory()
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    info = ctypes.CDLL("libc.so.6")
    info.mallinfo2.restype = _Mallinfo2
    m = info.mallinfo2()
    point = {"at": label, **{k: _mib(int(status[f].split()[0]) * 1024) for k, f in
                             (("rss", "VmRSS"), ("rss_anon", "RssAnon"), ("rss_file", "RssFile"))},
             "heap": _mib(m.arena), "heap_in_use": _mib(m.uordblks), "heap_free": _mib(m.fordblks),
             "mmapped": _mib(m.hblkhd), **_pymalloc(), "mimalloc_rss": _mimalloc_rss()}
    print(json.dumps(point), file=sys.stderr, flush=True)
    return point


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--table-idle-timeout-ms", type=int, default=40000,
                    help="the server's table idle timeout: long enough that the tables' committers are open together")
    ap.add_argument("--rounds", type=int, default=1, help="write every table this many times, evicted in between")
    ap.add_argument("--json", help="write the points here")
    args = ap.parse_args()

    import logging

    from bench_ingest import SCHEMA, make_batches
    from bench_tables import put_once

    from flight_server.server import FlightPaimonServer
    from producers import Client
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    from concurrent.futures import ThreadPoolExecutor

    points = []
    with tempfile.TemporaryDirectory(prefix="idle-memory-") as tmp:
        server = FlightPaimonServer("grpc://127.0.0.1:0", warehouse=os.path.join(tmp, "warehouse"),
                                    table_idle_ms=args.table_idle_timeout_ms)
        thread = threading.Thread(target=server.serve, name="server", daemon=True)
        thread.start()
        client = Client(server.uri, timeout=120)
        ingest = server.ingest

        def evicted(timeout_s: float) -> None:
            deadline = time.monotonic() + timeout_s
            while ingest.stats() and time.monotonic() < deadline:
                time.sleep(0.5)
            if ingest.stats():
                raise RuntimeError(f"{len(ingest.stats())} committers still open after {timeout_s:.0f} s")
            time.sleep(1)  # the janitor's release after the last eviction

        try:
            batch = make_batches(1000, 1, seed=5)[0]
            names = [f"bench.t{i:05d}" for i in range(args.tables)]
            for name in names:
                client.create_table(name, SCHEMA, options={"bucket": "-1"})
            points.append(measure("tables created"))
            put_once(server.uri, names[0], batch)
            evicted(args.table_idle_timeout_ms / 1000 + 120)
            points.append(measure("one table written and evicted"))
            for round_ in range(1, args.rounds + 1):
                with ThreadPoolExecutor(32) as pool:
                    list(pool.map(lambda name: put_once(server.uri, name, batch), names))
                points.append(measure(f"round {round_}: {args.tables} tables written, committers open"))
                evicted(args.table_idle_timeout_ms / 1000 + 120)
                points.append(measure(f"round {round_}: every committer evicted"))
        finally:
            client.close()
            server.close("done", 30)
    result = {"tables": args.tables, "table_idle_timeout_ms": args.table_idle_timeout_ms, "rounds": args.rounds,
              "load": os.getloadavg(), "points": points}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
