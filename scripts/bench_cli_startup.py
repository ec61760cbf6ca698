"""What a client command of flight_cli costs to start and end (issue 48 item 9: under 0.2 s of CPU).

Runs each command --repeat times as a child of --python against a fresh server (`flight_cli serve`
from this checkout's venv, a temporary warehouse, one push table with a batch and one Paimon
table) and prints, per command, the median and min of its CPU seconds (user + system of the child,
getrusage of children) and its median wall seconds. `create` and `register` make a new table each
run. Two floors for comparison: `python -c pass` and `import pyarrow.flight`.

A client-only venv (what `pip install flight-paimon` gives a producer: pyarrow, tenacity, structlog,
rich; no numpy):
  .venv/bin/python -m venv --without-pip /tmp/light
  .venv/bin/python -m pip --python /tmp/light/bin/python install 'pyarrow>=16' 'tenacity>=9,<10' \\
      'structlog>=24' 'rich>=13,<16'
The checkout runs from PYTHONPATH, so the client's code is this tree's, compiled once into a
temporary PYTHONPYCACHEPREFIX as an installed package is (the first run of each command is not counted).

Usage: .venv/bin/python scripts/bench_cli_startup.py [--python /tmp/light/bin/python] [--repeat 7]
       [--importtime COMMAND]   (print `-X importtime` of one run of COMMAND instead, its slowest 25)
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# As an installed package runs: pip compiles each module once, so no start-up compiles this tree's
# sources (the checkout's own __pycache__ stays as the environment wants it).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV.update(PYTHONPATH=ROOT, PYTHONPYCACHEPREFIX=os.path.join(tempfile.gettempdir(), "flight-paimon-bench-pyc"))


def run(python: str, argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """CPU seconds (user + system) and wall seconds of one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([python, *argv], capture_output=True, text=True, cwd=ROOT,
                         env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{argv} failed ({out.returncode}): {out.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=sys.executable, help="the interpreter flight_cli runs in")
    p.add_argument("--repeat", type=int, default=7, help="runs of each command")
    p.add_argument("--importtime", metavar="COMMAND", help="e.g. 'list': print what one run imports, slowest first")
    args = p.parse_args()

    from producers import Client
    from producers.examples.counter import SCHEMA, make_batch
    from tests.process import ServerProcess

    py = args.python
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(os.path.join(tmp, "wh"), stderr=subprocess.DEVNULL) as server:
        uri = ["--uri", server.uri]
        with Client(server.uri, timeout=30).register_streaming_table("startup", SCHEMA) as sink:
            sink.write(make_batch(0, 3))
        run(py, ["-m", "flight_cli", "create", "db.startup", "--schema", "id:int64!,name:string", *uri])
        fresh = itertools.count()
        commands = {
            "--version": lambda: ["--version"],
            "list --help": lambda: ["list", "--help"],
            "list": lambda: ["list", *uri],
            "stats": lambda: ["stats", *uri],
            "tail -e": lambda: ["tail", "push:startup", "--from", "earliest", "-e", *uri],
            "tail -e (Paimon)": lambda: ["tail", "db.startup", "-e", *uri],
            "create": lambda: ["create", f"db.c{next(fresh)}", "--schema", "id:int64!,name:string", *uri],
            "register": lambda: ["register", f"r{next(fresh)}", "--schema", "id:int64", *uri],
        }
        if args.importtime:
            argv = commands[args.importtime]()
            _, _, out = run(py, ["-X", "importtime", "-m", "flight_cli", *argv])
            rows = [line for line in out.stderr.splitlines() if line.startswith("import time:") and "[us]" not in line]
            rows.sort(key=lambda line: int(line.split("|")[0].split(":")[1]), reverse=True)
            print("\n".join(rows[:25]))
            return 0
        floors = {"python -c pass": ["-c", "pass"], "import pyarrow.flight": ["-c", "import pyarrow.flight"]}
        print(f"{py}: CPU s (user+sys) median (min) of {args.repeat}, wall s median")
        for name, make in [*((n, (lambda a=a: a)) for n, a in floors.items()),
                           *((n, (lambda m=m: ["-m", "flight_cli", *m()])) for n, m in commands.items())]:
            runs = [run(py, make())[:2] for _ in range(args.repeat + 1)][1:]  # the first compiles
            cpu = sorted(c for c, _ in runs)
            print(f"  {name:24} {statistics.median(cpu):.3f} ({cpu[0]:.3f})  wall {statistics.median(w for _, w in runs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
