"""300 tables from the CLI (issue 48 item 9): what creating, writing, listing and reading the stats
of many tables costs a user of flight_cli, on a fresh server (`flight_cli serve`, its defaults,
a temporary warehouse).

  one-by-one   for --sample tables: `flight_cli create` and a Python writer process per table, as
               the issue measured it (296 s for 300); seconds a table
  create       one `flight_cli create --file` of --tables tables
  write        one Python process writes a batch into each table (a paimon_sink per table, 50 open
               at a time, closed once their batch is committed)
  list         `flight_cli list` of every table, of a pattern, and a page (--limit 50)
  stats        `flight_cli stats --format json` of every table, of a pattern, and a page
  start-up     CPU seconds (user + system) of client commands: `--version`, `list --help`, and
               `list`, `stats`, `tail -e` of a server with one push table; median and min of
               --repeat runs

Every flight_cli runs as a child of --python (default: this interpreter; a venv with the client
alone, `pip install flight-paimon`, measures what a producer's machine runs); CPU seconds are the
child's own (getrusage of children).

Usage: .venv/bin/python scripts/bench_cli_tables.py [--tables 300] [--sample 10] [--repeat 5]
       [--python PY] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SCHEMA = "id:int64!,name:string,amount:double"
WRITER = """
import sys
import pyarrow as pa
from producers import Client

uri, tables = sys.argv[1], sys.argv[2:]
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.float64())])
batch = pa.record_batch([pa.array(range(100), pa.int64()), pa.array(["x"] * 100), pa.array([1.5] * 100)],
                        schema=schema)
client = Client(uri, timeout=60)
for start in range(0, len(tables), 50):
    sinks = [client.paimon_sink(t) for t in tables[start:start + 50]]
    for sink in sinks:
        sink.write(batch)
    for sink in sinks:
        sink.close()
client.close()
"""


def child(python: str, argv: list[str], stdin: str | None = None) -> dict:
    """Run a child; its wall and CPU seconds and its output's size."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([python, *argv], capture_output=True, text=True, input=stdin, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({out.returncode}): {out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "bytes": len(out.stdout.encode()),
            "lines": len(out.stdout.splitlines())}


def cli(python: str, *args: str, stdin: str | None = None) -> dict:
    return child(python, ["-m", "flight_cli", *args], stdin)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", type=int, default=300)
    p.add_argument("--sample", type=int, default=10, help="tables made one by one (0: skip)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each start-up measurement")
    p.add_argument("--python", default=sys.executable, help="the interpreter flight_cli and the writer run in")
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args()

    from tests.process import ServerProcess

    py, report = args.python, {"tables": args.tables, "python": args.python}
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(os.path.join(tmp, "wh"), stderr=subprocess.DEVNULL) as server:
        uri = ["--uri", server.uri]
        cli(py, "register", "startup", "--schema", "id:int64", *uri)
        startup = {"--version": ["--version"], "list --help": ["list", "--help"], "list": ["list", *uri],
                   "stats": ["stats", "--format", "json", *uri],
                   "tail -e": ["tail", "push:startup", "--from", "earliest", "-e", *uri]}
        report["startup_cpu_s"] = {}  # one push table only: what a command costs to start and end
        for name, argv in startup.items():
            runs = sorted(cli(py, *argv)["cpu_s"] for _ in range(args.repeat))
            report["startup_cpu_s"][name] = {"median": runs[len(runs) // 2], "min": runs[0]}

        if args.sample:
            start = time.perf_counter()
            for i in range(args.sample):
                cli(py, "create", f"one.t{i:03d}", "--schema", SCHEMA, *uri)
                child(py, ["-c", WRITER, server.uri, f"one.t{i:03d}"])
            per = (time.perf_counter() - start) / args.sample
            report["one_by_one"] = {"tables": args.sample, "s_per_table": round(per, 2),
                                    "extrapolated_s": round(per * args.tables)}

        names = [f"db.t{i:03d}" for i in range(args.tables)]
        report["create_file"] = cli(py, "create", "--file", "-", "--schema", SCHEMA, *uri,
                                    stdin="\n".join(names) + "\n")
        report["write"] = child(py, ["-c", WRITER, server.uri, *names])
        report["list_all"] = cli(py, "list", *uri)
        report["list_pattern"] = cli(py, "list", "db.t01*", *uri)
        report["list_page"] = cli(py, "list", "--limit", "50", *uri)
        report["stats_all"] = cli(py, "stats", "--format", "json", *uri)
        report["stats_pattern"] = cli(py, "stats", "db.t01*", "--format", "json", *uri)
        report["stats_page"] = cli(py, "stats", "--limit", "20", "--format", "json", *uri)
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
