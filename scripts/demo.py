"""The end-to-end demo behind scripts/demo: push tables, Paimon tables and Spark over one server."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

from producers import Client  # noqa: E402


def section(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def start_server(warehouse: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "flight_server.cli", "--log-level", "warning", "serve", "--port", "0",
         "--warehouse", warehouse], stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    line = proc.stdout.readline()
    print(line.strip())
    return proc, re.search(r"grpc://[\d.]+:\d+", line).group(0)


def run(*cmd: str, timeout: float = 120) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"demo step failed: {' '.join(cmd)}\n{out.stderr}")
    return out.stdout


def demo_push(uri: str, batches: int) -> None:
    section("push table: a producer process -> server -> a reader, concurrently, with backpressure")
    client = Client(uri)
    client.register("demo_orders", __import__("producers.examples.counter", fromlist=["SCHEMA"]).SCHEMA, capacity=16)
    start = time.monotonic()
    producer = subprocess.Popen([sys.executable, "-m", "producers.examples.counter", "demo_orders", "--uri", uri,
                                 "--batches", str(batches), "--rows", "65536"],
                                stdout=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    rows = nbytes = 0
    for chunk in client.flight.do_get(client.info("demo_orders").endpoints[0].ticket, options=client.options(300)):
        rows += chunk.data.num_rows
        nbytes += chunk.data.nbytes
    elapsed = time.monotonic() - start
    assert producer.wait(60) == 0
    print(f"flowed {rows:,} rows, {nbytes / 2**20:,.0f} MiB in {elapsed:.2f} s: "
          f"{nbytes / 2**20 / elapsed:,.0f} MiB/s, {rows / elapsed:,.0f} rows/s (includes producer start-up)")

    section("push table: flight_cli register, an example producer, flight_cli tail")
    print(run(sys.executable, "-m", "flight_server.cli", "register", "demo_small",
              "--schema", "id:int64,name:string,ts:timestamp[us]", "--uri", uri).strip())
    producer = subprocess.Popen([sys.executable, "-m", "producers.examples.counter", "demo_small", "--uri", uri,
                                 "--batches", "3", "--rows", "2", "--rate", "5"], stdout=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    print(run(sys.executable, "-m", "flight_server.cli", "tail", "push:demo_small", "--uri", uri), end="")
    producer.wait(30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--warehouse", default=str(ROOT / "warehouse"))
    p.add_argument("--batches", type=int, default=100, help="64k-row batches in the push throughput step")
    args = p.parse_args()
    os.makedirs(args.warehouse, exist_ok=True)
    server, uri = start_server(args.warehouse)
    try:
        demo_push(uri, args.batches)
    finally:
        server.terminate()
        server.wait(15)
    print("\ndemo finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
