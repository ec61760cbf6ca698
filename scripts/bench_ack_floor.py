"""The floor of durable ingest's per-batch path: a Flight server with no logic that reads each
batch with its app_metadata and writes one ack per batch, as the durable-write contract asks.

    .venv/bin/python scripts/bench_ack_floor.py [--rows 1000] [--batches 10000] [--runs 3]

Prints the server's CPU seconds per GiB received (its process, the producer is another): what
any server keeping the contract in pyarrow's Flight spends before it does anything with the
batches (docs/benchmarks_ingest.md, "Where the ingest path's CPU goes").
"""

from __future__ import annotations

import argparse
import json
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
    if sys.argv[1:] == ["server"]:
        server = AckingServer("grpc://127.0.0.1:0")
        print(server.port, flush=True)
        server.serve()
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--batches", type=int, default=10000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
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
