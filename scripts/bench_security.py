"""Security benchmark: push and Paimon read throughput with TLS + tokens against the same without,
and what the token check costs against one batch's time.

    .venv/bin/python scripts/bench_security.py [--runs 5] [--batches 128] [--rows 2000000]
        [--json docs/bench-results/security.json] [--md docs/benchmarks_security.md]

Two server processes over one warehouse, one plain (grpc://, no --auth) and one secured
(grpc+tls:// with an --auth file), measured in alternating rounds (the first configuration of a
round alternates too); producers, consumers and readers are separate processes started outside
the clock. Medians of `--runs`. The token check is timed in-process (the work the middleware and
the grant check do per call) and, end to end, as the per-call latency of the `health` action on a
plain server with and without --auth.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.process import ServerProcess, child_env  # noqa: E402

ROWS, COLS = 65536, 8  # 4 MiB per push batch
MiB = 1 << 20


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def client(uri: str, token: str | None, ca: str | None):
    from producers import Client

    return Client(uri, timeout=60, token=token or None, tls_root_certs=ca or None)


# -- roles run as subprocesses ---------------------------------------------------------------

def role_producer(uri: str, name: str, batches: int, token: str, ca: str) -> None:
    col = pa.array(range(ROWS), pa.int64())
    batch = pa.record_batch([col] * COLS, names=[f"c{i}" for i in range(COLS)])
    c = client(uri, token, ca)
    sys.stdin.readline()  # started and connected: go
    cpu0, start = cpu_s(), time.monotonic()
    with c.sink(name) as sink:
        for _ in range(batches):
            sink.write(batch)
    print(json.dumps({"start": start, "end": time.monotonic(), "cpu_s": cpu_s() - cpu0}), flush=True)


def role_consumer(uri: str, name: str, token: str, ca: str) -> None:
    from flight_server.wire.allocator import reuse_batch_buffers

    reuse_batch_buffers()
    c = client(uri, token, ca)
    ticket = c.info(name).endpoints[0].ticket
    print("ready", flush=True)
    cpu0 = cpu_s()
    nbytes = 0
    for chunk in c.flight.do_get(ticket, options=c.options(None)):
        nbytes += chunk.data.nbytes
    print(json.dumps({"end": time.monotonic(), "bytes": nbytes, "cpu_s": cpu_s() - cpu0}), flush=True)


def role_reader(uri: str, table: str, token: str, ca: str) -> None:
    import pyarrow.flight as flight

    from flight_server.wire.allocator import reuse_batch_buffers

    reuse_batch_buffers()
    c = client(uri, token, ca)
    c.action("health")  # connected (TLS handshake done) before the clock
    sys.stdin.readline()
    cpu0, start = cpu_s(), time.monotonic()
    info = c.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), options=c.options())
    nbytes = 0
    for endpoint in info.endpoints:
        for chunk in c.flight.do_get(endpoint.ticket, options=c.options(None)):
            nbytes += chunk.data.nbytes
    print(json.dumps({"start": start, "end": time.monotonic(), "bytes": nbytes, "cpu_s": cpu_s() - cpu0}), flush=True)


def role_health(plain_uri: str, auth_uri: str, token: str, calls: int) -> None:
    """`health` round trips to a plain server and to one with --auth, in alternating blocks of 100
    calls from this one process (so both see the same machine); medians of the blocks' means."""
    clients = {"plain": client(plain_uri, None, None), "plain+token": client(auth_uri, token, None)}
    for c in clients.values():
        c.action("health")
    blocks: dict[str, list[float]] = {k: [] for k in clients}
    for b in range(max(1, calls // 100)):
        for name in (list(clients) if b % 2 == 0 else list(clients)[::-1]):
            start = time.perf_counter()
            for _ in range(100):
                clients[name].action("health")
            blocks[name].append((time.perf_counter() - start) / 100 * 1e6)
    print(json.dumps({k: statistics.median(v) for k, v in blocks.items()}), flush=True)


ROLES = {"producer": role_producer, "consumer": role_consumer, "reader": role_reader, "health": role_health}


def spawn(role: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--role", role, *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)


def result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"a benchmark role failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


# -- rounds ------------------------------------------------------------------------------------

def push_round(uri: str, token: str, ca: str, name: str, batches: int) -> dict:
    client(uri, token, ca).register(name, pa.schema([(f"c{i}", pa.int64()) for i in range(COLS)]), capacity=16)
    consumer = spawn("consumer", uri, name, token, ca)
    assert consumer.stdout.readline().strip() == "ready"
    producer = spawn("producer", uri, name, batches, token, ca)
    producer.stdin.write("go\n")
    producer.stdin.flush()
    p, c = result(producer), result(consumer)
    client(uri, token, ca).drop(name)
    seconds = c["end"] - p["start"]
    return {"mib_s": c["bytes"] / MiB / seconds, "cpu_s_per_gib": (p["cpu_s"] + c["cpu_s"]) / (c["bytes"] / (1 << 30))}


def read_round(uri: str, token: str, ca: str, table: str) -> dict:
    reader = spawn("reader", uri, table, token, ca)
    reader.stdin.write("go\n")
    reader.stdin.flush()
    r = result(reader)
    return {"mib_s": r["bytes"] / MiB / (r["end"] - r["start"]), "cpu_s_per_gib": r["cpu_s"] / (r["bytes"] / (1 << 30))}


def make_warehouse(path: str, rows: int) -> str:
    from pypaimon import CatalogFactory, Schema

    from tests.paimon_tables import commit_arrow

    catalog = CatalogFactory.create({"warehouse": path})
    catalog.create_database("bench", True)
    schema = pa.schema([("id", pa.int64()), ("a", pa.float64()), ("b", pa.int64()), ("name", pa.string())])
    catalog.create_table("bench.events", Schema.from_pyarrow_schema(schema, options={"bucket": "4", "bucket-key": "id"}),
                         False)
    ids = pa.array(range(rows), pa.int64())
    data = pa.table([ids, pa.array([i * 0.5 for i in range(rows)]), ids, pa.array([f"n{i % 1000}" for i in range(rows)])],
                    schema=schema)
    commit_arrow(catalog.get_table("bench.events"), data)
    return "bench.events"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--batches", type=int, default=128, help="4 MiB batches pushed per push round")
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the Paimon table read per read round")
    p.add_argument("--health-calls", type=int, default=4000, help="health actions per server and run")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--md", help="write a Markdown report here")
    p.add_argument("--role", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args()
    if args.role:
        fn = ROLES[args.role]
        fn(*[int(a) if a.isdigit() else a for a in rest])
        return 0

    from flight_server.auth import ALLOW_ALL, AuthConfig, token_sha256
    from scripts.throwaway_ca import write_certs

    token = "bench-" + os.urandom(16).hex()
    with tempfile.TemporaryDirectory() as d:
        write_certs(d)
        Path(f"{d}/auth.json").write_text(json.dumps({"principals": [{
            "name": "bench", "token_sha256": token_sha256(token),
            "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]}]}))
        table = make_warehouse(f"{d}/wh", args.rows)
        tls = ["--tls-cert", f"{d}/server.pem", "--tls-key", f"{d}/server.key"]
        servers = {
            "plain": (ServerProcess(f"{d}/wh", log_level="warning"), "", ""),
            "tls+token": (ServerProcess(f"{d}/wh", *tls, "--auth", f"{d}/auth.json", log_level="warning"),
                          token, f"{d}/ca.pem"),
            "plain+token": (ServerProcess(f"{d}/wh", "--auth", f"{d}/auth.json", log_level="warning"), token, ""),
        }
        try:
            push = {"plain": [], "tls+token": []}
            read = {"plain": [], "tls+token": []}
            health = {"plain": [], "plain+token": []}
            for cfg in ("plain", "tls+token"):  # warm-up, not measured: first reads, imports, caches
                server, tok, ca_path = servers[cfg]
                read_round(server.uri, tok, ca_path, table)
                push_round(server.uri, tok, ca_path, "bench_warmup", 8)
            for run in range(args.runs):
                order = ["plain", "tls+token"] if run % 2 == 0 else ["tls+token", "plain"]
                for cfg in order:
                    server, tok, ca_path = servers[cfg]
                    push[cfg].append(push_round(server.uri, tok, ca_path, f"bench_{run}", args.batches))
                    read[cfg].append(read_round(server.uri, tok, ca_path, table))
                got = result(spawn("health", servers["plain"][0].uri, servers["plain+token"][0].uri, token,
                                   args.health_calls))
                for cfg in health:
                    health[cfg].append(got[cfg])
                print(f"run {run + 1}/{args.runs}: push {[round(push[c][-1]['mib_s']) for c in push]} MiB/s, "
                      f"read {[round(read[c][-1]['mib_s']) for c in read]} MiB/s, "
                      f"health {[round(health[c][-1]) for c in health]} us", flush=True)
        finally:
            for server, _, _ in servers.values():
                server.stop()

        config = AuthConfig.load(f"{d}/auth.json")
        header = [f"Bearer {token}".encode()]

        def check():
            config.authenticate(header).require("write", "bench_0", "push table 'bench_0'")

        n = 200_000
        check_us = min(timeit.repeat(check, number=n, repeat=5)) / n * 1e6
        open_us = min(timeit.repeat(lambda: ALLOW_ALL.require("write", "bench_0", "x"), number=n, repeat=5)) / n * 1e6

    med = statistics.median

    def summary(rounds: list[dict]) -> dict:
        return {"mib_s": med(r["mib_s"] for r in rounds), "cpu_s_per_gib": med(r["cpu_s_per_gib"] for r in rounds),
                "runs": rounds}

    out = {"push": {k: summary(v) for k, v in push.items()}, "read": {k: summary(v) for k, v in read.items()},
           "health_us": {k: med(v) for k, v in health.items()}, "check_us": check_us, "check_us_without_auth": open_us,
           "batch_mib": ROWS * COLS * 8 / MiB, "runs": args.runs, "batches": args.batches, "rows": args.rows}
    batch_us = out["batch_mib"] / out["push"]["plain"]["mib_s"] * 1e6
    out["check_share_of_batch"] = check_us / batch_us
    out["rpc_overhead_us"] = out["health_us"]["plain+token"] - out["health_us"]["plain"]
    out["rpc_overhead_share_of_batch"] = out["rpc_overhead_us"] / batch_us
    for kind in ("push", "read"):
        out[kind]["ratio"] = out[kind]["tls+token"]["mib_s"] / out[kind]["plain"]["mib_s"]
    report = render(out, batch_us)
    print(report)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    if args.md:
        Path(args.md).write_text(report)
    return 0


def render(o: dict, batch_us: float) -> str:
    push, read = o["push"], o["read"]
    return "\n".join([
        "# Security benchmark",
        "",
        f"`scripts/bench_security.py --runs {o['runs']} --batches {o['batches']} --rows {o['rows']}`: a plain server and a "
        "TLS + bearer-token server over one warehouse, in alternating rounds; medians. Producers, consumers and "
        "readers are separate processes started (and connected) outside the clock.",
        "",
        "| measurement | plain | TLS + token | ratio |",
        "|---|---|---|---|",
        f"| push: producer -> server -> consumer, {o['batches']} x {o['batch_mib']:g} MiB (MiB/s) | "
        f"{push['plain']['mib_s']:.0f} | {push['tls+token']['mib_s']:.0f} | {push['ratio']:.2f} |",
        f"| push: CPU s per GiB (producer + consumer) | {push['plain']['cpu_s_per_gib']:.2f} | "
        f"{push['tls+token']['cpu_s_per_gib']:.2f} | |",
        f"| Paimon read: {o['rows']:,} rows, 4 buckets, one reader (MiB/s) | {read['plain']['mib_s']:.0f} | "
        f"{read['tls+token']['mib_s']:.0f} | {read['ratio']:.2f} |",
        f"| Paimon read: reader CPU s per GiB | {read['plain']['cpu_s_per_gib']:.2f} | "
        f"{read['tls+token']['cpu_s_per_gib']:.2f} | |",
        "",
        "The token check, against one push batch's time at the plain rate "
        f"({o['batch_mib']:g} MiB in {batch_us:.0f} us):",
        "",
        "| measurement | us | share of a batch |",
        "|---|---|---|",
        f"| authenticate (sha256 of the token, one lookup) + grant check, in-process | {o['check_us']:.2f} | "
        f"{o['check_share_of_batch']:.3%} |",
        f"| the same call's grant check without --auth | {o['check_us_without_auth']:.2f} | |",
        f"| `health` action round trip, plain servers: without --auth / with --auth (one client process, alternating blocks) | "
        f"{o['health_us']['plain']:.0f} / {o['health_us']['plain+token']:.0f} | "
        f"{o['rpc_overhead_share_of_batch']:.2%} (the difference) |",
        "",
        "The check runs once per call (a do_put stream of many batches pays it once); the share above is the "
        "worst case, one batch per call. TLS costs encryption and decryption of every byte on both ends; on "
        "loopback that is most of what the ratio shows.",
        "",
    ])


if __name__ == "__main__":
    sys.exit(main())
