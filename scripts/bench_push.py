"""Push-table benchmark: throughput against raw Flight do_put, small-batch latency, server RSS.

    .venv/bin/python scripts/bench_push.py [--runs 5] [--gib 1] [--json out.json] [--only rss]

Every figure is measured in this run against its baseline, producers and consumers as separate
processes. Medians of `--runs` runs; clocks compared across processes are CLOCK_MONOTONIC.
The throughput section also gives CPU seconds per GiB of every process: on a small shared
machine that figure is steadier than MiB/s, and it shows where the end-to-end path spends.
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

import pyarrow as pa
import pyarrow.flight as flight

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.process import ServerProcess  # noqa: E402

ROWS = 65536
COLS = 8  # 8 x int64 x 64k rows = 4 MiB per batch


def big_batch() -> pa.RecordBatch:
    col = pa.array(range(ROWS), pa.int64())
    return pa.record_batch([col] * COLS, names=[f"c{i}" for i in range(COLS)])


LAT_SCHEMA = pa.schema([("n", pa.int64()), ("sent_ns", pa.int64())])


def cpu_s() -> float:
    """CPU seconds (user + system) this process has used so far."""
    t = os.times()
    return t.user + t.system


# -- roles run as subprocesses ---------------------------------------------------------------

class DiscardServer(flight.FlightServerBase):
    """The baseline: raw pyarrow do_put into a server that reads and drops every batch."""

    def do_put(self, context, descriptor, reader, writer):
        for _ in reader:
            pass


class BridgeServer(flight.FlightServerBase):
    """The minimal bridge, a baseline with no logic at all: do_put -> a bounded queue ->
    RecordBatchStream, one stream each, no acks, no offsets, no accounting."""

    def __init__(self, location: str):
        super().__init__(location)
        import queue

        self.queue = queue.Queue(maxsize=16)
        self.schema = None

    def do_put(self, context, descriptor, reader, writer):
        self.schema = reader.schema
        for chunk in reader:
            self.queue.put(chunk.data)
        self.queue.put(None)

    def do_get(self, context, ticket):
        while self.schema is None:
            time.sleep(0.001)

        def batches():
            while (batch := self.queue.get()) is not None:
                yield batch

        return flight.RecordBatchStream(pa.RecordBatchReader.from_batches(self.schema, batches()))


def role_bridge_server() -> None:
    server = BridgeServer("grpc://127.0.0.1:0")
    print(f"grpc://127.0.0.1:{server.port}", flush=True)
    server.serve()


def role_raw_consumer(uri: str) -> None:
    from flight_server.wire.allocator import reuse_batch_buffers

    reuse_batch_buffers()
    cpu0 = cpu_s()
    client = flight.FlightClient(uri)
    n = nbytes = 0
    for chunk in client.do_get(flight.Ticket(b"bridge")):
        n += 1
        nbytes += chunk.data.nbytes
    print(json.dumps({"end": time.monotonic(), "batches": n, "bytes": nbytes, "cpu_s": cpu_s() - cpu0}), flush=True)


def role_discard_server() -> None:
    server = DiscardServer("grpc://127.0.0.1:0")
    print(f"grpc://127.0.0.1:{server.port}", flush=True)
    server.serve()


def role_raw_producer(uri: str, batches: int) -> None:
    batch = big_batch()  # before the clock: pa.record_batch imports pandas once (~0.3 CPU s)
    cpu0 = cpu_s()
    client = flight.FlightClient(uri)
    start = time.monotonic()
    writer, _ = client.do_put(flight.FlightDescriptor.for_path("push", "bench", "0"), batch.schema)
    for _ in range(batches):
        writer.write_batch(batch)
    writer.done_writing()
    writer.close()
    print(json.dumps({"start": start, "end": time.monotonic(), "cpu_s": cpu_s() - cpu0}), flush=True)


def role_sink_producer(uri: str, batches: int, name: str) -> None:
    from producers import Client

    batch = big_batch()  # before the clock: pa.record_batch imports pandas once (~0.3 CPU s)
    cpu0 = cpu_s()
    start = time.monotonic()
    with Client(uri).sink(name) as sink:
        for _ in range(batches):
            sink.write(batch)
    print(json.dumps({"start": start, "end": time.monotonic(), "cpu_s": cpu_s() - cpu0}), flush=True)


def role_consumer(uri: str, name: str, stall_every: int, stall_s: float, reuse: bool = False) -> None:
    from flight_server.wire.allocator import reuse_batch_buffers
    from producers import Client

    if reuse:  # what flight_cli tail and the Spark reader do: see flight_server/wire/allocator.py
        assert reuse_batch_buffers(), "glibc malloc thresholds could not be set"
    cpu0 = cpu_s()
    client = Client(uri)
    reader = client.flight.do_get(client.info(name).endpoints[0].ticket)
    n = nbytes = 0
    for chunk in reader:
        n += 1
        nbytes += chunk.data.nbytes
        if stall_every and n % stall_every == 0:
            time.sleep(stall_s)
    print(json.dumps({"end": time.monotonic(), "batches": n, "bytes": nbytes, "cpu_s": cpu_s() - cpu0}), flush=True)


def role_latency_producer(uri: str, name: str, count: int, rate: float) -> None:
    from producers import Client

    start = time.monotonic()
    with Client(uri).sink(name) as sink:
        for i in range(count):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            sink.write(pa.record_batch([pa.array([i]), pa.array([time.monotonic_ns()])], schema=LAT_SCHEMA))
    print(json.dumps({"sent": count}), flush=True)


def role_latency_consumer(uri: str, name: str) -> None:
    from producers import Client

    client = Client(uri)
    lat_us = []
    for chunk in client.flight.do_get(client.info(name).endpoints[0].ticket):
        now = time.monotonic_ns()
        lat_us.extend((now - s) / 1000 for s in chunk.data.column(1).to_pylist())
    print(json.dumps({"lat_us": lat_us}), flush=True)


# -- the driver ------------------------------------------------------------------------------

def spawn(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, env=env)


def result(proc: subprocess.Popen, timeout: float = 600) -> dict:
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{proc.args[2:]} failed with {proc.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def start_server(*cmd: str) -> tuple[subprocess.Popen, str]:
    server = ServerProcess("", stderr=subprocess.DEVNULL, command=[sys.executable, *cmd])
    return server.proc, server.uri


def flight_paimon_server(warehouse: str) -> tuple[subprocess.Popen, str]:
    server = ServerProcess(warehouse, log_level="warning", stderr=subprocess.DEVNULL)
    return server.proc, server.uri


def register(uri: str, name: str, schema: pa.Schema, capacity: int) -> None:
    from producers import Client

    Client(uri).register(name, schema, capacity=capacity)


def bench_throughput(runs: int, batches: int, warehouse: str) -> dict:
    import psutil

    mib = batches * big_batch().nbytes / 2**20
    gib = mib / 1024
    base, e2e, e2e_plain, bridge = [], [], [], []
    cpu = {k: [] for k in ("raw_producer", "discard_server", "bridge_server", "sink_producer", "server", "consumer",
                           "plain_consumer")}
    discard, discard_uri = start_server(__file__, "discard-server")
    os.environ["MALLOC_ARENA_MAX"] = "1"  # the bridge runs with one malloc arena, as flight_cli serve does
    try:
        bridge_server, bridge_uri = start_server(__file__, "bridge-server")
    finally:
        del os.environ["MALLOC_ARENA_MAX"]
    server, uri = flight_paimon_server(warehouse)
    server_cpu = lambda proc: sum(psutil.Process(proc.pid).cpu_times()[:2])  # noqa: E731
    try:
        for run in range(runs):
            before = server_cpu(discard)
            r = result(spawn("raw-producer", discard_uri, str(batches)))
            cpu["discard_server"].append((server_cpu(discard) - before) / gib)
            cpu["raw_producer"].append(r["cpu_s"] / gib)
            base.append(mib / (r["end"] - r["start"]))
            before = server_cpu(bridge_server)
            consumer = spawn("raw-consumer", bridge_uri)
            p = result(spawn("raw-producer", bridge_uri, str(batches)))
            c = result(consumer)
            cpu["bridge_server"].append((server_cpu(bridge_server) - before) / gib)
            assert c["batches"] == batches, c
            bridge.append(mib / (c["end"] - p["start"]))
            # Our reader set-up (flight_cli tail, the Spark reader), then a consumer on glibc's defaults.
            for reuse, rates, key in ((True, e2e, "consumer"), (False, e2e_plain, "plain_consumer")):
                name = f"tp{run}{key}"
                register(uri, name, big_batch().schema, 16)
                before = server_cpu(server)
                consumer = spawn("consumer", uri, name, "0", "0", str(int(reuse)))
                p = result(spawn("sink-producer", uri, str(batches), name))
                c = result(consumer)
                if reuse:
                    cpu["server"].append((server_cpu(server) - before) / gib)
                    cpu["sink_producer"].append(p["cpu_s"] / gib)
                cpu[key].append(c["cpu_s"] / gib)
                assert c["batches"] == batches, c
                rates.append(mib / (c["end"] - p["start"]))
            print(f"  run {run}: raw do_put {base[-1]:.0f} MiB/s, bridge {bridge[-1]:.0f} MiB/s, "
                  f"end-to-end {e2e[-1]:.0f} MiB/s "
                  f"(plain consumer {e2e_plain[-1]:.0f}); CPU s/GiB: "
                  + ", ".join(f"{k} {v[-1]:.2f}" for k, v in cpu.items()), file=sys.stderr)
    finally:
        discard.kill()
        bridge_server.kill()
        server.kill()
    ratios = [e / b for e, b in zip(e2e, base)]
    return {"batch_mib": big_batch().nbytes / 2**20, "mib_per_run": mib,
            "baseline_mib_s": statistics.median(base), "end_to_end_mib_s": statistics.median(e2e),
            "ratio": statistics.median(ratios), "ratios": [round(r, 3) for r in ratios],
            # the minimal bridge: do_put -> bounded queue -> RecordBatchStream, no logic at all
            "bridge_mib_s": statistics.median(bridge),
            "ratio_to_bridge": statistics.median(e / b for e, b in zip(e2e, bridge)),
            # the same path read by a consumer left on glibc's malloc defaults
            "end_to_end_plain_consumer_mib_s": statistics.median(e2e_plain),
            "ratio_plain_consumer": statistics.median(e / b for e, b in zip(e2e_plain, base)),
            # CPU seconds per GiB of each process; the clients' count from after their imports
            "cpu_s_per_gib": {k: round(statistics.median(v), 3) for k, v in cpu.items()}}


def bench_latency(runs: int, count: int, warehouse: str) -> dict:
    p50s, p99s = [], []
    server, uri = flight_paimon_server(warehouse)
    try:
        for run in range(-1, runs):  # run -1 warms the server up and is not counted
            name = f"lat{run + 1}"
            n = count if run >= 0 else 300
            register(uri, name, LAT_SCHEMA, 16)
            consumer = spawn("latency-consumer", uri, name)
            result(spawn("latency-producer", uri, name, str(n), "1000"))
            lat = sorted(result(consumer)["lat_us"])
            assert len(lat) == n
            if run < 0:
                continue
            p50s.append(lat[len(lat) // 2] / 1000)
            p99s.append(lat[int(len(lat) * 0.99)] / 1000)
            print(f"  run {run}: p50 {p50s[-1]:.2f} ms, p99 {p99s[-1]:.2f} ms", file=sys.stderr)
    finally:
        server.kill()
    return {"rate_per_s": 1000, "batches_per_run": count,
            "p50_ms": statistics.median(p50s), "p99_ms": statistics.median(p99s),
            "p99_runs_ms": [round(v, 2) for v in p99s]}


def bench_rss(gib: float, capacity: int, warehouse: str) -> dict:
    import psutil

    batches = int(gib * 1024 / 4)
    server, uri = flight_paimon_server(warehouse)
    try:
        register(uri, "rss", big_batch().schema, capacity)
        ps = psutil.Process(server.pid)
        idle = ps.memory_info().rss
        peak, stop = [idle], threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], ps.memory_info().rss)
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # The consumer stalls 1 s after every 128 batches: the producer keeps pushing into a full log.
        consumer = spawn("consumer", uri, "rss", "128", "1.0")
        result(spawn("sink-producer", uri, str(batches), "rss"), timeout=1800)
        c = result(consumer, timeout=1800)
        stop.set()
        sampler.join()
    finally:
        server.kill()
    bound = capacity * big_batch().nbytes + 100 * 2**20
    return {"pushed_gib": c["bytes"] / 2**30, "capacity": capacity, "idle_rss_mib": idle / 2**20,
            "peak_rss_mib": peak[0] / 2**20, "growth_mib": (peak[0] - idle) / 2**20,
            "bound_growth_mib": bound / 2**20}


def main() -> None:
    roles = {"discard-server": role_discard_server, "bridge-server": role_bridge_server,
             "raw-consumer": role_raw_consumer, "raw-producer": lambda u, n: role_raw_producer(u, int(n)),
             "sink-producer": lambda u, n, t: role_sink_producer(u, int(n), t),
             "consumer": lambda u, t, e, s, r="0": role_consumer(u, t, int(e), float(s), r == "1"),
             "latency-producer": lambda u, t, c, r: role_latency_producer(u, t, int(c), float(r)),
             "latency-consumer": role_latency_consumer}
    if len(sys.argv) > 1 and sys.argv[1] in roles:
        roles[sys.argv[1]](*sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--gib", type=float, default=1.0, help="data per throughput run")
    p.add_argument("--rss-gib", type=float, default=4.0, help="data pushed in the RSS run")
    p.add_argument("--latency-batches", type=int, default=3000)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--only", choices=["throughput", "latency", "rss"], action="append",
                   help="run only this section (repeatable)")
    args = p.parse_args()
    only = set(args.only or ["throughput", "latency", "rss"])
    import tempfile

    with tempfile.TemporaryDirectory() as wh:
        out = {}
        if "throughput" in only:
            print("throughput ...", file=sys.stderr)
            out["throughput"] = bench_throughput(args.runs, int(args.gib * 256), wh)
        if "latency" in only:
            print("latency ...", file=sys.stderr)
            out["latency"] = bench_latency(args.runs, args.latency_batches, wh)
        if "rss" in only:
            print("rss ...", file=sys.stderr)
            out["rss"] = bench_rss(args.rss_gib, 16, wh)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
