"""/metrics at many tables: scrape time, bytes and series (issue 47 item 4).

For each configuration a server (`flight_cli serve --metrics-port 0`, its defaults otherwise) gets
`--tables` push tables registered (the fastest tables to create: memory only), `--written` of
them written one batch each (held: a push table holding batches stays active), and `--paimon`
Paimon tables created and written once each (durable do_put: group commits and maintenance give
them per-table series too). Then `--scrapes` scrapes of /metrics, one after another: wall time of
each (request to the last byte, from this process), bytes and samples.

Configurations: `totals` (--metrics-table-window 0: server-wide series only), `default`
(window 10 min, --metrics-max-tables 1000), `all` (--metrics-max-tables above the active tables:
every active table has its series, the cost without the cap).

Usage: .venv/bin/python scripts/bench_metrics.py [--tables 10000] [--written 2000] [--paimon 200]
       [--scrapes 5] [--configs totals,default,all] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONFIGS = {"totals": ["--metrics-table-window", "0"], "default": [],
           "all": ["--metrics-max-tables", "1000000"]}


def scrape(url: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url + "/metrics", timeout=300) as r:
        body = r.read()
    return time.perf_counter() - start, body


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return round(int(next(line for line in f if line.startswith("VmRSS:")).split()[1]) / 1024, 1)


def run(config: str, tables: int, written: int, paimon: int, scrapes: int) -> dict:
    import pyarrow as pa

    from producers import Client
    from producers.examples.counter import SCHEMA, make_batch
    from tests.process import ServerProcess

    schema = pa.schema([pa.field("id", pa.int64())])
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        limits = ["--max-tables", str(tables + 10), "--max-partitions", str(tables + 10)]
        server = ServerProcess(os.path.join(tmp, "warehouse"), "--metrics-port", "0", *limits, *CONFIGS[config],
                               log_level="warning", stderr=open(os.path.join(tmp, "server.log"), "w"))
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=120)
        try:
            start = time.monotonic()
            for i in range(tables):
                client.register(f"t{i:05d}", SCHEMA, capacity=4)
            created_s = time.monotonic() - start
            start = time.monotonic()
            for i in range(written):
                with client.sink(f"t{i:05d}") as sink:
                    sink.write(make_batch(i, 10))
            written_s = time.monotonic() - start
            start = time.monotonic()
            for i in range(paimon):
                name = f"db.p{i:04d}"
                client.create_table(name, schema)
                with client.paimon_sink(name, producer="bench") as sink:
                    sink.write(pa.record_batch([pa.array(range(10), pa.int64())], schema=schema))
            paimon_s = time.monotonic() - start
            times, sizes, samples = [], [], 0
            for _ in range(scrapes):
                seconds, body = scrape(url)
                times.append(seconds)
                sizes.append(len(body))
                text = body.decode()
                samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
                tabled = {m.group(1) for m in re.finditer(r'table="([^"]*)"', text)}
            omitted = re.search(r"^flight_paimon_metrics_omitted_tables (\S+)$", text, re.M)  # absent before 47
            rss = rss_mib(server.proc.pid)
            alive = server.proc.poll() is None and client.health().status == "serving"
        finally:
            client.close()
            server.stop()
    return {"config": config, "flags": " ".join(CONFIGS[config]) or "(defaults)", "push_tables": tables,
            "push_written": written, "paimon_written": paimon, "tables_with_series": len(tabled),
            "omitted": int(float(omitted.group(1))) if omitted else None, "samples": samples, "scrape_bytes": sizes[-1],
            "scrape_ms_median": round(statistics.median(times) * 1000, 1), "scrape_ms_max": round(max(times) * 1000, 1),
            "scrape_ms": [round(t * 1000, 1) for t in times], "server_rss_mib": rss, "server_up": alive,
            "setup_s": {"register": round(created_s, 1), "push_writes": round(written_s, 1),
                        "paimon_create_write": round(paimon_s, 1)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=10000, help="push tables registered")
    ap.add_argument("--written", type=int, default=2000, help="of them, written one batch each (held)")
    ap.add_argument("--paimon", type=int, default=200, help="Paimon tables created and written once each")
    ap.add_argument("--scrapes", type=int, default=5)
    ap.add_argument("--configs", default="totals,default,all", help=f"comma-separated of {', '.join(CONFIGS)}")
    ap.add_argument("--json")
    args = ap.parse_args()
    configs = args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        ap.error(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    results = []
    for config in configs:
        results.append(run(config, args.tables, args.written, args.paimon, args.scrapes))
        print(json.dumps(results[-1]), flush=True)
    out = {"command": " ".join(["scripts/bench_metrics.py", *sys.argv[1:]]), "cpus": os.cpu_count(),
           "uptime_at_start": load, "uptime_at_end": subprocess.run(["uptime"], capture_output=True,
                                                                    text=True).stdout.strip(),
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
