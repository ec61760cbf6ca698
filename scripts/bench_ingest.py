"""Durable-ingest benchmark: Flight do_put into a Paimon table, against baselines in the same run.

    .venv/bin/python scripts/bench_ingest.py [--quick] [--runs 3] [--only latency|throughput|rss]

1. Ack latency: a paced producer (raw pyarrow do_put) sends 1,000-row batches at 100/s for
   `--latency-s` seconds; each batch's write_batch -> its ack `{"seq", "snapshot"}` (committed).
   Floor: pypaimon alone writing and committing the same 10-batch groups in one process.
2. Commit -> visible: the same producer with a follow reader (`--poll-ms`, 20) attached; per
   snapshot, the snapshot's `time_millis` (pypaimon sets it just before it writes the snapshot
   file) -> the follower's first batch of that snapshot (wall clocks of one machine).
   Runs with and without the follower alternate; both give ack latencies.
3. Throughput of 1,000- and 64k-row batches (`--gib` per run) from 1/4/16 named producers
   (`--producers`; PaimonSink, its defaults) into an append table (bucket -1) of a server with its
   defaults, as a ratio to pypaimon's own streaming writer as an expert uses it (batches grouped
   into writes of 64k rows, a commit once 100 ms passed since the last ended) in one process; also `--bare-producers` (1 and 4) into a server without
   maintenance (the ingest path alone) and raw do_put into a discarding server (no logic: the
   transport alone).
   Per variant: CPU s/GiB of the server (per writer thread and the commit thread) and of the
   producers, ack p50/p99 (hand-off to gRPC -> ack), the server's peak RSS.
4. Server RSS while 4 named producers push 64k-row batches into one table (--commit-bytes 64
   MiB), sampled every 100 ms; baseline: pypaimon alone holding two 64 MiB groups; and (if gdb
   may attach) the RSS left after malloc_trim(0).

Producers, followers, servers and the pypaimon baselines are separate processes, started and
warmed up outside the clock. Medians of `--runs` runs; the load average is recorded per run.
Results: docs/bench-results/ingest.json (`--quick`: ingest-quick.json; `--only` keeps the other
sections of an existing file). The page docs/benchmarks_ingest.md discusses them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flight_server.ingest.committer import DEFAULT_WRITERS  # noqa: E402
from flight_server.wire import messages  # noqa: E402
from tests.process import ServerProcess, child_env  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("user_id", pa.int64()),
                    ("amount", pa.float64()), ("name", pa.string())])
BIG_ROWS = 65536
SMALL_ROWS = 1000
GROUP_ROWS = 65536  # the pypaimon baseline writes groups of at least this many rows
DB = "bench"


def make_batches(rows: int, count: int, seed: int = 7) -> list[pa.RecordBatch]:
    """`count` distinct batches of a plausible event schema: sequential ids and times, random
    users and amounts, names from a pool of 100k (about 51 bytes a row, 3.2 MiB per 64k rows)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = pa.array([f"customer-{i:06d}" for i in range(100_000)])
    t0 = 1_700_000_000_000_000
    out = []
    for k in range(count):
        ids = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
        out.append(pa.record_batch([
            pa.array(ids),
            pa.array(t0 + ids * 1000, pa.timestamp("us")),
            pa.array(rng.integers(0, 1_000_000, rows, dtype=np.int64)),
            pa.array(np.round(rng.random(rows) * 1000, 2)),
            pool.take(pa.array(rng.integers(0, len(pool), rows))),
        ], schema=SCHEMA))
    return out


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def pct(values, p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def med(values) -> float:
    return statistics.median(values)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- roles run as subprocesses ---------------------------------------------------------------

class DiscardServer(flight.FlightServerBase):
    """No logic at all: raw pyarrow do_put into a server that reads and drops every batch."""

    def do_put(self, context, descriptor, reader, writer):
        for _ in reader:
            pass

    def list_actions(self, context):
        return []


def role_discard_server() -> None:
    server = DiscardServer("grpc://127.0.0.1:0")
    print(f"grpc://127.0.0.1:{server.port}", flush=True)
    server.serve()


def _wait_go() -> None:
    """Tell the driver this process is warmed up; start when it says go (a line on stdin)."""
    print("ready", flush=True)
    sys.stdin.readline()


def role_lat_producer(uri: str, table: str, rate: str, seconds: str) -> None:
    """Raw do_put of 1,000-row batches paced at `rate`/s; each batch's send and ack times."""
    rate_f, n = float(rate), int(float(seconds) * float(rate))
    batches = make_batches(SMALL_ROWS, 64, seed=11)
    client = flight.FlightClient(uri)
    client.list_actions()  # connected before the clock
    _wait_go()
    writer, reader = client.do_put(flight.FlightDescriptor.for_path("paimon", table), SCHEMA)
    sent_mono = [0.0] * n
    acks: list[tuple[float, float, int, int]] = []  # (monotonic, wall, seq, snapshot)

    def read_acks():
        while True:
            buf = reader.read()
            if buf is None:
                return
            now, wall = time.monotonic(), time.time()
            ack = messages.read_ack(buf)
            acks.append((now, wall, ack.seq, ack.snapshot))

    t = threading.Thread(target=read_acks, daemon=True)
    t.start()
    start = time.monotonic()
    slip = 0.0
    for i in range(n):
        due = start + i / rate_f
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        sent_mono[i] = time.monotonic()
        slip = max(slip, sent_mono[i] - due)
        writer.write_batch(batches[i % len(batches)])
    writer.write_metadata(pa.py_buffer(messages.end(n)))
    writer.done_writing()
    t.join(60)
    writer.close()
    lat_ms = [(m - sent_mono[seq]) * 1000 for m, _, seq, _ in acks]
    first_ack: dict[int, float] = {}
    group: dict[int, int] = {}
    for _, wall, _, snap in acks:
        first_ack.setdefault(snap, wall)
        group[snap] = group.get(snap, 0) + 1
    print(json.dumps({"sent": n, "acked": len(acks), "lat_ms": lat_ms, "max_send_slip_ms": slip * 1000,
                      "first_ack_wall": first_ack, "batches_per_snapshot": group}), flush=True)


def role_follower(uri: str, table: str, poll_ms: str, seconds: str) -> None:
    """A follow read from `latest`: the wall time of the first batch of each snapshot."""
    client = flight.FlightClient(uri)
    cmd = {"table": table, "follow": True, "start": "latest", "poll_interval_ms": int(poll_ms)}
    info = client.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)))
    seen: dict[int, float] = {}
    rows = [0]
    readers = [client.do_get(ep.ticket) for ep in info.endpoints]

    def pull(reader):
        try:
            while True:
                chunk = reader.read_chunk()
                now = time.time()
                mark = messages.read_mark(chunk.app_metadata)
                if mark.snapshot is not None and chunk.data is not None and chunk.data.num_rows:
                    seen.setdefault(mark.snapshot, now)
                    rows[0] += chunk.data.num_rows
        except (StopIteration, flight.FlightError):
            pass

    threads = [threading.Thread(target=pull, args=(r,), daemon=True) for r in readers]
    for th in threads:
        th.start()
    time.sleep(0.3)  # the follow streams are open and polling
    print("ready", flush=True)
    sys.stdin.readline()  # the producer ran; keep reading a little longer
    time.sleep(float(seconds))
    for r in readers:
        r.cancel()
    print(json.dumps({"endpoints": len(readers), "rows": rows[0], "seen_wall": seen}), flush=True)


def role_named_producer(uri: str, table: str, rows: str, batches: str, name: str) -> None:
    """One named producer (PaimonSink, the defaults) of `batches` batches of `rows` rows; each batch's
    latency from its hand-off to gRPC (blocked sends included) to its ack."""
    from producers.client import Client
    from producers.paimon_sink import PaimonSink

    lat_ms: list[float] = []

    class TimedSink(PaimonSink):
        def _pop_acked(self):
            lat_ms.append((time.monotonic() - self._unacked[0].sent_at) * 1000)
            super()._pop_acked()

    data = make_batches(int(rows), 64, seed=sum(map(ord, name)))
    client = Client(uri)
    sink = TimedSink(client, table, name)
    _wait_go()
    cpu0 = cpu_s()
    start = time.monotonic()
    for i in range(int(batches)):
        sink.write(data[i % len(data)])
    sink.close()
    end = time.monotonic()
    print(json.dumps({"start": start, "end": end, "cpu_s": cpu_s() - cpu0, "acked": sink.acked,
                      "lat_ms": [round(x, 1) for x in lat_ms]}), flush=True)


def role_raw_producer(uri: str, batches: str, rows: str = str(BIG_ROWS)) -> None:
    data = make_batches(int(rows), 8)
    client = flight.FlightClient(uri)
    client.list_actions()
    _wait_go()
    cpu0 = cpu_s()
    start = time.monotonic()
    writer, _ = client.do_put(flight.FlightDescriptor.for_path("discard"), SCHEMA)
    for i in range(int(batches)):
        writer.write_batch(data[i % len(data)])
    writer.done_writing()
    writer.close()
    print(json.dumps({"start": start, "end": time.monotonic(), "cpu_s": cpu_s() - cpu0}), flush=True)


def _native_table(warehouse: str, name: str):
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(DB, True)
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, options={"bucket": "-1"}), True)
    return catalog.get_table(name).copy({"write.native.enabled": "true"})


def role_pypaimon_stream(warehouse: str, table: str, rows: str, batches: str, interval_ms: str) -> None:
    """pypaimon alone, in one process, as an expert writes a stream with it: batches grouped into
    writes of at least GROUP_ROWS rows (`write_arrow` of the group), a commit once `interval_ms`
    passed since the last one ended (so a slow commit never makes every batch a commit), and one at
    the end."""
    data = make_batches(int(rows), 64)
    warm = _native_table(warehouse, table + "_warm")  # loads the native writer outside the clock
    wb = warm.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow_batch(data[0])
    wb.new_commit().commit(w.prepare_commit())
    w.close()
    t = _native_table(warehouse, table)
    builder = t.new_stream_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    _wait_go()
    cpu0 = cpu_s()
    start = last = time.monotonic()
    ident = 0
    group: list[pa.RecordBatch] = []
    grouped = 0
    for i in range(int(batches)):
        group.append(data[i % len(data)])
        grouped += group[-1].num_rows
        end = i == int(batches) - 1
        if grouped >= GROUP_ROWS or end:
            w.write_arrow(pa.Table.from_batches(group))
            group, grouped = [], 0
        if (time.monotonic() - last >= int(interval_ms) / 1000 and not group) or end:
            ident += 1
            c.commit(w.prepare_commit(ident), ident)
            last = time.monotonic()
    w.close()
    c.close()
    print(json.dumps({"start": start, "end": time.monotonic(), "cpu_s": cpu_s() - cpu0, "commits": ident}),
          flush=True)


def role_pypaimon_groups(warehouse: str, table: str, groups: str, per_group: str) -> None:
    """The latency floor: pypaimon committing groups of 1,000-row batches as the server does
    (one stream writer, one commit per group with snapshot properties); each group's wall time."""
    data = make_batches(SMALL_ROWS, 64, seed=11)
    t = _native_table(warehouse, table)
    builder = t.new_stream_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    times = []
    for g in range(int(groups) + 3):  # 3 warm-up groups
        start = time.perf_counter()
        for i in range(int(per_group)):
            w.write_arrow_batch(data[(g * int(per_group) + i) % len(data)])
        c.commit(w.prepare_commit(g + 1), g + 1, snapshot_properties={"bench": str(g)})
        t.snapshot_manager().get_latest_snapshot()  # the server looks its snapshot up too
        if g >= 3:
            times.append((time.perf_counter() - start) * 1000)
    w.close()
    c.close()
    print(json.dumps({"group_ms": times}), flush=True)


def role_pypaimon_rss(warehouse: str, table: str, batches: str, commit_bytes: str) -> None:
    """The RSS baseline without Flight: pypaimon alone writing groups of `commit_bytes` with one
    stream writer, two groups alive at a time (the server's queue + the commit in flight). Each
    batch is a fresh malloc'ed copy read zero-copy from IPC, as Flight's received batches are;
    run with MALLOC_ARENA_MAX=1, as flight_cli serve sets it."""
    import psutil

    ps = psutil.Process()
    data = make_batches(BIG_ROWS, 8)
    payloads = []
    for b in data:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, b.schema) as w:
            w.write_batch(b)
        payloads.append(sink.getvalue())
    del data
    start_rss = ps.memory_info().rss
    t = _native_table(warehouse, table)
    builder = t.new_stream_write_builder()
    w, c = builder.new_write(), builder.new_commit()

    def fresh(i):
        return pa.ipc.open_stream(pa.py_buffer(payloads[i % len(payloads)].to_pybytes())).read_next_batch()

    for i in range(8):  # a first write, as the server's idle figure has had
        w.write_arrow_batch(fresh(i))
    c.commit(w.prepare_commit(1), 1)
    idle = ps.memory_info().rss
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(ps.memory_info().rss)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    prev, group, size, ident = [], [], 0, 1
    for i in range(int(batches)):
        group.append(fresh(i))
        size += group[-1].nbytes
        if size >= int(commit_bytes) or i == int(batches) - 1:
            for b in group:
                w.write_arrow_batch(b)
            ident += 1
            c.commit(w.prepare_commit(ident), ident)
            prev, group, size = group, [], 0  # the committed group stays alive until the next commit
    del prev
    stop.set()
    sampler.join()
    print(json.dumps({"start_mib": start_rss / 2**20, "idle_mib": idle / 2**20, "peak_mib": max(samples) / 2**20,
                      "after_mib": ps.memory_info().rss / 2**20}), flush=True)


# -- the driver ------------------------------------------------------------------------------

class Role:
    """A role subprocess; `go()` releases one that waits at `_wait_go`, `result()` is its JSON."""

    def __init__(self, *args: str, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env or child_env(), cwd=ROOT)

    def ready(self) -> None:
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.proc.kill()
            raise RuntimeError(f"{self.proc.args[2:]} did not get ready: {line!r}")

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = 900) -> dict:
        out, _ = self.proc.communicate(timeout=timeout)
        if self.proc.returncode != 0:
            raise RuntimeError(f"{self.proc.args[2:]} failed with {self.proc.returncode}")
        return json.loads(out.strip().splitlines()[-1])


def run_role(*args: str) -> dict:
    """A role that waits at `_wait_go`: start, wait until warmed up, release, collect."""
    r = Role(*args)
    r.ready()
    r.go()
    return r.result()


def paimon_server(warehouse: str, interval_ms: int, commit_bytes: int, metrics: bool = False,
                  maintenance: bool = True) -> ServerProcess:
    extra = ["--commit-interval-ms", str(interval_ms), "--commit-bytes", str(commit_bytes)]
    if not maintenance:  # the ingest path alone: no compaction of what it writes
        extra += ["--maintenance-interval-ms", str(10**9)]
    if metrics:
        extra += ["--metrics-port", "0"]
    return ServerProcess(warehouse, *extra, log_level="warning", stderr=subprocess.DEVNULL)


def create(uri: str, table: str) -> None:
    from producers.client import Client

    c = Client(uri)
    c.create_table(table, SCHEMA, options={"bucket": "-1"})
    c.close()


def drop_files(warehouse: str, table: str) -> None:
    """Delete a finished table's files (dirty pages of deleted files are never written back)."""
    db, name = table.split(".")
    shutil.rmtree(Path(warehouse) / f"{db}.db" / name, ignore_errors=True)


def snapshot_times(warehouse: str, table: str) -> dict[int, float]:
    """Each snapshot's `time_millis` as wall-clock seconds (the server's own compactions, which add no
    rows for a follower to see, left out)."""
    from pypaimon import CatalogFactory

    t = CatalogFactory.create({"warehouse": warehouse}).get_table(table)
    sm = t.snapshot_manager()
    latest = sm.get_latest_snapshot()
    out = {}
    for sid in range(1, (latest.id if latest else 0) + 1):
        s = sm.get_snapshot_by_id(sid)
        if s is not None and s.commit_kind != "COMPACT":
            out[sid] = s.time_millis / 1000
    return out


def scrape_commit_seconds(metrics_url: str, table: str) -> tuple[float, int]:
    """(sum of seconds, count) of the server's group commits (write + commit) into `table`."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    total = count = 0.0
    for line in text.splitlines():
        if f'table="{table}"' not in line:
            continue
        if line.startswith("flight_paimon_table_ingest_commit_seconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("flight_paimon_table_ingest_commit_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
    return total, int(count)


def one_latency_run(wh: str, uri: str, metrics_url: str | None, table: str, seconds: float, follow: bool,
                    poll_ms: int) -> dict:
    create(uri, table)
    follower = None
    if follow:
        follower = Role("follower", uri, table, str(poll_ms), "2")
        follower.ready()
    producer = Role("lat-producer", uri, table, "100", str(seconds))
    producer.ready()
    producer.go()
    p = producer.result()
    out = {"p": p}
    if follower is not None:
        follower.go()
        f = follower.result()
        commits = snapshot_times(wh, table)
        seen = {int(k): v for k, v in f["seen_wall"].items()}
        first_ack = {int(k): v for k, v in p["first_ack_wall"].items()}
        out["visible_ms"] = [(seen[s] - commits[s]) * 1000 for s in commits if s in seen]
        out["visible_after_ack_ms"] = [(seen[s] - first_ack[s]) * 1000 for s in first_ack if s in seen]
        out["missing"] = sorted(set(commits) - set(seen))
        out["endpoints"] = f["endpoints"]
    if metrics_url:
        total, count = scrape_commit_seconds(metrics_url, table)
        out["commit_ms_mean"] = total / count * 1000 if count else None
        out["commits"] = count
    assert p["acked"] == p["sent"], p
    drop_files(wh, table)
    return out


def bench_latency(wh: str, runs: int, seconds: float, poll_ms: int) -> dict:
    server = paimon_server(wh, 100, 64 << 20, metrics=True)
    line = server.first_line  # "... (warehouse DIR, metrics http://HOST:PORT/metrics)"
    metrics_url = line.split("metrics ", 1)[1].strip().rstrip(")") if "metrics " in line else None
    res = {"plain": [], "followed": []}
    try:
        say("  warm-up (3 s, not counted)")
        one_latency_run(wh, server.uri, None, f"{DB}.lat_warm", 3, True, poll_ms)
        for run in range(runs):
            order = ("plain", "followed") if run % 2 == 0 else ("followed", "plain")
            for kind in order:
                r = one_latency_run(wh, server.uri, metrics_url, f"{DB}.lat{run}_{kind}", seconds,
                                    kind == "followed", poll_ms)
                lat = r["p"]["lat_ms"]
                r["p50"], r["p95"], r["p99"], r["max"] = (pct(lat, 50), pct(lat, 95), pct(lat, 99), max(lat))
                groups = list(r["p"]["batches_per_snapshot"].values())
                r["batches_per_commit"] = med(groups)
                line = (f"  run {run} {kind}: ack p50 {r['p50']:.0f} ms, p95 {r['p95']:.0f}, p99 {r['p99']:.0f}, "
                        f"max {r['max']:.0f}; {len(groups)} commits, {r['batches_per_commit']:.0f} batches each, "
                        f"server write+commit mean {r['commit_ms_mean']:.0f} ms; send slip max "
                        f"{r['p']['max_send_slip_ms']:.0f} ms")
                if kind == "followed":
                    v = r["visible_ms"]
                    line += (f"; visible p50 {pct(v, 50):.0f} ms p99 {pct(v, 99):.0f} (after ack p50 "
                             f"{pct(r['visible_after_ack_ms'], 50):.0f}), {len(r['missing'])} unseen")
                r["load1"] = load()[0]
                say(line + f"; load {load()}")
                res[kind].append(r)
    finally:
        server.stop()
    # The floor: pypaimon alone committing the same groups (about 10 batches per commit at 100/s).
    per_group = max(1, round(med(r["batches_per_commit"] for r in res["plain"])))
    floor = Role("pypaimon-groups", wh, f"{DB}.lat_floor", "60", str(per_group))
    floor_ms = floor.result()["group_ms"]
    drop_files(wh, f"{DB}.lat_floor")
    say(f"  pypaimon alone, {per_group} x 1000-row batches write + commit: p50 {pct(floor_ms, 50):.0f} ms, "
        f"p99 {pct(floor_ms, 99):.0f} ms")

    def summary(kind):
        rs = res[kind]
        return {"p50_ms": med(r["p50"] for r in rs), "p95_ms": med(r["p95"] for r in rs),
                "p99_ms": med(r["p99"] for r in rs), "max_ms": max(r["max"] for r in rs),
                "p50_runs_ms": [round(r["p50"], 1) for r in rs], "p99_runs_ms": [round(r["p99"], 1) for r in rs],
                "batches_per_commit": med(r["batches_per_commit"] for r in rs),
                "server_write_commit_mean_ms": med(r["commit_ms_mean"] for r in rs),
                "max_send_slip_ms": max(r["p"]["max_send_slip_ms"] for r in rs)}

    vis = [r["visible_ms"] for r in res["followed"]]
    vis_ack = [r["visible_after_ack_ms"] for r in res["followed"]]
    return {
        "rate_batches_s": 100, "rows_per_batch": SMALL_ROWS, "seconds_per_run": seconds, "runs": runs,
        "commit_interval_ms": 100, "commit_bytes": 64 << 20,
        "ack": summary("plain"), "ack_with_follower": summary("followed"),
        "load1_runs": [r["load1"] for kind in ("plain", "followed") for r in res[kind]],
        "floor_pypaimon_group_commit_ms": {"batches_per_group": per_group, "p50": pct(floor_ms, 50),
                                           "p99": pct(floor_ms, 99)},
        "visibility": {
            "poll_interval_ms": poll_ms, "commit_time": "snapshot time_millis",
            "p50_ms": med(pct(v, 50) for v in vis), "p95_ms": med(pct(v, 95) for v in vis),
            "p99_ms": med(pct(v, 99) for v in vis), "max_ms": max(max(v) for v in vis),
            "p50_runs_ms": [round(pct(v, 50), 1) for v in vis],
            "after_ack_p50_ms": med(pct(v, 50) for v in vis_ack),
            "after_ack_p99_ms": med(pct(v, 99) for v in vis_ack),
            "snapshots_per_run": [len(v) for v in vis],
            "unseen_snapshots": sum(len(r["missing"]) for r in res["followed"]),
        },
    }


def table_writes(uri: str, table: str) -> dict:
    """The server's `stats` of its durable writes into `table` (writer threads' CPU and so on)."""
    from producers.client import Client

    c = Client(uri)
    try:
        return c.stats(table).paimon_writes[table].to_json()
    finally:
        c.close()


def run_producers(uri: str, table: str, rows: int, producers: int, per: int, pid: int, rss: list) -> dict:
    """`producers` named producers released together; the server's CPU and peak RSS meanwhile."""
    import psutil

    roles = [Role("named-producer", uri, table, str(rows), str(per), f"p{i}") for i in range(producers)]
    for r in roles:
        r.ready()
    ps = psutil.Process(pid)
    peak, stop = [ps.memory_info().rss], threading.Event()

    def sample():
        while not stop.wait(0.1):
            peak.append(ps.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0 = sum(ps.cpu_times()[:2])
    for r in roles:
        r.go()
    outs = [r.result(timeout=1800) for r in roles]
    stop.set()
    sampler.join()
    rss.append(max(peak))
    assert all(o["acked"] == per for o in outs), [o["acked"] for o in outs]
    lat = [x for o in outs for x in o["lat_ms"]]
    return {"start": min(o["start"] for o in outs), "end": max(o["end"] for o in outs),
            "server_cpu_s": sum(ps.cpu_times()[:2]) - cpu0, "producer_cpu_s": sum(o["cpu_s"] for o in outs),
            "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat)}


def bench_throughput(wh: str, runs: int, gib: float, producer_counts: list[int], bare_counts: list[int]) -> dict:
    """Per batch size (1,000 and 64k rows): pypaimon's own streaming writer (a commit every 100 ms)
    against the server with its defaults fed by 1/4/16 named producers, and raw do_put into a
    discarding server (the transport alone). Variants alternate within each round."""
    import psutil

    server = paimon_server(wh, 100, 64 << 20)
    bare = paimon_server(wh, 100, 64 << 20, maintenance=False)
    os.environ["MALLOC_ARENA_MAX"] = "1"  # as flight_cli serve sets it (flight_server/wire/allocator.py)
    try:
        discard = ServerProcess("", stderr=subprocess.DEVNULL, command=[sys.executable, __file__, "discard-server"])
    finally:
        del os.environ["MALLOC_ARENA_MAX"]
    out = {"runs": runs, "gib_per_run": gib, "schema": str(SCHEMA).replace("\n", "; "),
           "server": f"defaults: --commit-interval-ms 100 --commit-bytes 64MiB --write-threads {DEFAULT_WRITERS}",
           "sizes": {}}
    try:
        for s in (server, bare):  # the native writer loaded, threads started
            create(s.uri, f"{DB}.tp_warm")
            run_role("named-producer", s.uri, f"{DB}.tp_warm", str(BIG_ROWS), "8", "warm")
            drop_files(wh, f"{DB}.tp_warm")
        run_role("raw-producer", discard.uri, "4")
        for rows in (SMALL_ROWS, BIG_ROWS):
            batch_bytes = make_batches(rows, 1)[0].nbytes
            total = max(16, int(gib * 2**30 / batch_bytes))
            variants = ["pypaimon", *(f"flight x{n}" for n in producer_counts),
                        *(f"flight x{n} no maintenance" for n in bare_counts),
                        "raw do_put (discard)"]
            res = {v: [] for v in variants}
            for run in range(runs):
                order = variants[run % len(variants):] + variants[:run % len(variants)]
                for v in order:
                    table = f"{DB}.tp{rows}_{run}_{variants.index(v)}"
                    if v == "pypaimon":
                        r = run_role("pypaimon-stream", wh, table, str(rows), str(total), "100")
                        r["cpu_s_per_gib"] = r["cpu_s"] / (total * batch_bytes / 2**30)
                    elif v.startswith("raw"):
                        before = sum(psutil.Process(discard.proc.pid).cpu_times()[:2])
                        r = run_role("raw-producer", discard.uri, str(total), str(rows))
                        r["cpu_s_per_gib"] = (sum(psutil.Process(discard.proc.pid).cpu_times()[:2]) - before) / (
                            total * batch_bytes / 2**30)
                    else:
                        n = int(v.split("x")[1].split()[0])
                        per = total // n
                        s = bare if v.endswith("no maintenance") else server
                        create(s.uri, table)
                        rss: list[int] = []
                        r = run_producers(s.uri, table, rows, n, per, s.proc.pid, rss)
                        pushed = n * per * batch_bytes / 2**30
                        w = table_writes(s.uri, table)
                        r.update(cpu_s_per_gib=r["server_cpu_s"] / pushed,
                                 write_cpu_s_per_gib=[round(x / pushed, 2) for x in w["write_cpu_s"]],
                                 commit_cpu_s_per_gib=w["commit_cpu_s"] / pushed, commits=w["commits"],
                                 producer_cpu_s_per_gib=r["producer_cpu_s"] / pushed, peak_rss_mib=rss[0] / 2**20)
                        r["mib"] = n * per * batch_bytes / 2**20
                    r.setdefault("mib", total * batch_bytes / 2**20)
                    r["mib_s"] = r["mib"] / (r["end"] - r["start"])
                    res[v].append(r)
                    drop_files(wh, table)
                    drop_files(wh, table + "_warm")
                say(f"  {rows} rows, run {run}: " + ", ".join(
                    f"{v} {res[v][-1]['mib_s']:.0f} MiB/s ({res[v][-1]['cpu_s_per_gib']:.2f} CPU s/GiB"
                    + (f", ack p99 {res[v][-1]['p99_ms']:.0f} ms" if "p99_ms" in res[v][-1] else "") + ")"
                    for v in variants) + f"; load {load()}")
            base = res["pypaimon"]
            size = {"rows_per_batch": rows, "batch_kib": batch_bytes / 1024, "batches_per_run": total,
                    "pypaimon_mib_s": med(r["mib_s"] for r in base),
                    "pypaimon_runs_mib_s": [round(r["mib_s"]) for r in base],
                    "pypaimon_cpu_s_per_gib": med(r["cpu_s_per_gib"] for r in base),
                    "pypaimon_commits_per_run": med(r["commits"] for r in base),
                    "raw_do_put_mib_s": med(r["mib_s"] for r in res["raw do_put (discard)"]),
                    "raw_do_put_server_cpu_s_per_gib": med(r["cpu_s_per_gib"] for r in res["raw do_put (discard)"]),
                    "flight": {}}
            for n in [*producer_counts, *(f"{n} no maintenance" for n in bare_counts)]:
                rs = res[f"flight x{n}"]
                ratios = [r["mib_s"] / b["mib_s"] for r, b in zip(rs, base)]
                cpu_ratios = [r["cpu_s_per_gib"] / b["cpu_s_per_gib"] for r, b in zip(rs, base)]
                size["flight"][str(n)] = {
                    "mib_s": med(r["mib_s"] for r in rs), "mb_s": med(r["mib_s"] for r in rs) * 2**20 / 1e6,
                    "ratio_to_pypaimon": med(ratios), "ratios": [round(x, 3) for x in ratios],
                    "runs_mib_s": [round(r["mib_s"]) for r in rs],
                    "server_cpu_s_per_gib": med(r["cpu_s_per_gib"] for r in rs),
                    "cpu_ratio_to_pypaimon": med(cpu_ratios),
                    "write_threads_cpu_s_per_gib": [med(r["write_cpu_s_per_gib"][i] for r in rs)
                                                    for i in range(len(rs[0]["write_cpu_s_per_gib"]))],
                    "commit_thread_cpu_s_per_gib": med(r["commit_cpu_s_per_gib"] for r in rs),
                    "producers_cpu_s_per_gib": med(r["producer_cpu_s_per_gib"] for r in rs),
                    "commits_per_run": med(r["commits"] for r in rs),
                    "ack_p50_ms": med(r["p50_ms"] for r in rs), "ack_p99_ms": med(r["p99_ms"] for r in rs),
                    "ack_p99_runs_ms": [round(r["p99_ms"]) for r in rs], "ack_max_ms": max(r["max_ms"] for r in rs),
                    "server_peak_rss_mib": max(r["peak_rss_mib"] for r in rs)}
            out["sizes"][str(rows)] = size
    finally:
        server.stop()
        bare.stop()
        discard.stop()
    return out


def trim_probe(pid: int) -> int | None:
    """The server's RSS after glibc's malloc_trim(0), called through gdb: what of its RSS is free heap
    glibc kept rather than live data. None when gdb is missing or may not attach."""
    import psutil

    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    try:
        r = subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "call (int)malloc_trim(0)"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0 or "$1 = " not in r.stdout:
        return None
    return psutil.Process(pid).memory_info().rss


def bench_rss(wh: str, runs: int, gib_total: float, producers: int, commit_bytes: int) -> dict:
    import psutil

    batch_bytes = make_batches(BIG_ROWS, 1)[0].nbytes
    per = max(1, int(gib_total * 2**30 / batch_bytes / producers))
    results = []
    for run in range(runs):
        server = paimon_server(wh, 100, commit_bytes)
        try:
            ps = psutil.Process(server.proc.pid)
            start_rss = ps.memory_info().rss
            create(server.uri, f"{DB}.rss_warm{run}")
            run_role("named-producer", server.uri, f"{DB}.rss_warm{run}", str(BIG_ROWS), "8", "warm")
            time.sleep(0.5)
            idle = ps.memory_info().rss
            table = f"{DB}.rss{run}"
            create(server.uri, table)
            samples, stop = [], threading.Event()

            def sample():
                while not stop.is_set():
                    samples.append(ps.memory_info().rss)
                    time.sleep(0.1)

            roles = [Role("named-producer", server.uri, table, str(BIG_ROWS), str(per), f"p{i}")
                     for i in range(producers)]
            for r in roles:
                r.ready()
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            cpu0 = sum(ps.cpu_times()[:2])
            for r in roles:
                r.go()
            outs = [r.result(timeout=1800) for r in roles]
            stop.set()
            sampler.join()
            cpu = sum(ps.cpu_times()[:2]) - cpu0
            after = ps.memory_info().rss
            trimmed = trim_probe(server.proc.pid)
        finally:
            server.stop()
        drop_files(wh, table)
        drop_files(wh, f"{DB}.rss_warm{run}")
        base = Role("pypaimon-rss", wh, f"{DB}.rss_base{run}", str(min(per * producers, 320)), str(commit_bytes),
                    env=dict(child_env(), MALLOC_ARENA_MAX="1")).result()
        drop_files(wh, f"{DB}.rss_base{run}")
        pushed = per * producers * batch_bytes
        wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
        results.append({"start_mib": start_rss / 2**20, "idle_mib": idle / 2**20, "peak_mib": max(samples) / 2**20,
                        "after_mib": after / 2**20, "after_trim_mib": trimmed / 2**20 if trimmed else None,
                        "samples": len(samples), "pushed_gib": pushed / 2**30, "mib_s": pushed / 2**20 / wall,
                        "server_cpu_s_per_gib": cpu / (pushed / 2**30), "load1": load()[0], "baseline": base})
        r = results[-1]
        say(f"  run {run}: start {r['start_mib']:.0f} MiB, idle after a first write {r['idle_mib']:.0f}, peak "
            f"{r['peak_mib']:.0f}, after {r['after_mib']:.0f}, after malloc_trim "
            f"{r['after_trim_mib'] if r['after_trim_mib'] is None else round(r['after_trim_mib'])}; "
            f"{r['mib_s']:.0f} MiB/s total over {producers} producers, server {r['server_cpu_s_per_gib']:.1f} "
            f"CPU s/GiB; pypaimon alone (2 groups alive): start {base['start_mib']:.0f}, idle {base['idle_mib']:.0f}, "
            f"peak {base['peak_mib']:.0f}; load {load()}")
    bound = 2 * commit_bytes / 2**20 + 200
    trims = [r["after_trim_mib"] for r in results if r["after_trim_mib"] is not None]
    return {"producers": producers, "pushed_gib": results[0]["pushed_gib"], "commit_bytes_mib": commit_bytes >> 20,
            "commit_interval_ms": 100, "sample_interval_ms": 100, "runs": runs, "bound_mib": bound,
            "start_rss_mib": med(r["start_mib"] for r in results),
            "idle_rss_mib": med(r["idle_mib"] for r in results),
            "peak_rss_mib": med(r["peak_mib"] for r in results),
            "peak_rss_max_mib": max(r["peak_mib"] for r in results),
            "growth_over_idle_mib": med(r["peak_mib"] - r["idle_mib"] for r in results),
            "peak_runs_mib": [round(r["peak_mib"]) for r in results],
            "after_run_rss_mib": med(r["after_mib"] for r in results),
            "after_malloc_trim_rss_mib": med(trims) if trims else None,
            "aggregate_mib_s": med(r["mib_s"] for r in results),
            "server_cpu_s_per_gib": med(r["server_cpu_s_per_gib"] for r in results),
            "load1_runs": [r["load1"] for r in results],
            "pypaimon_alone": {  # no Flight: the same writer and two 64 MiB groups alive, 1 GiB per run
                "start_rss_mib": med(r["baseline"]["start_mib"] for r in results),
                "idle_rss_mib": med(r["baseline"]["idle_mib"] for r in results),
                "peak_rss_mib": med(r["baseline"]["peak_mib"] for r in results),
                "peak_runs_mib": [round(r["baseline"]["peak_mib"]) for r in results],
                "after_run_rss_mib": med(r["baseline"]["after_mib"] for r in results)}}


def machine() -> dict:
    import psutil

    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import importlib.metadata as md

    def version(dist):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    return {"cpus": os.cpu_count(), "cpu_model": model, "mem_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "pyarrow": pa.__version__,
            "pypaimon": version("pypaimon"), "pypaimon_rust": version("pypaimon-rust"),
            "kernel": platform.release()}


def main() -> None:
    roles = {"discard-server": role_discard_server, "lat-producer": role_lat_producer, "follower": role_follower,
             "raw-producer": role_raw_producer,
             "named-producer": role_named_producer, "pypaimon-stream": role_pypaimon_stream, "pypaimon-groups": role_pypaimon_groups,
             "pypaimon-rss": role_pypaimon_rss}
    if len(sys.argv) > 1 and sys.argv[1] in roles:
        roles[sys.argv[1]](*sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer, shorter runs: checks that everything works")
    p.add_argument("--runs", type=int, help="runs per figure (default 3; --quick 2)")
    p.add_argument("--latency-s", type=float, help="seconds per latency run (default 10; --quick 3)")
    p.add_argument("--poll-ms", type=int, default=20, help="the follow reader's poll interval")
    p.add_argument("--gib", type=float, help="GiB per throughput run (default 1; --quick 0.125)")
    p.add_argument("--rss-gib", type=float, help="GiB pushed in total per RSS run (default 4; --quick 0.5)")
    p.add_argument("--producers", default="1,4,16", help="throughput: producer counts, comma separated")
    p.add_argument("--bare-producers", default="1,4",
                   help="throughput: producer counts into a server without maintenance (the ingest path alone)")
    p.add_argument("--json", help="write results here (default docs/bench-results/ingest[-quick].json)")
    p.add_argument("--only", choices=["latency", "throughput", "rss"], action="append",
                   help="run only this section (repeatable); an existing JSON keeps its other sections")
    args = p.parse_args()
    runs = args.runs or (2 if args.quick else 3)
    seconds = args.latency_s or (3.0 if args.quick else 10.0)
    gib = args.gib or (0.125 if args.quick else 1.0)
    rss_gib = args.rss_gib or (0.5 if args.quick else 4.0)
    producer_counts = [int(n) for n in args.producers.split(",")]
    bare_counts = [int(n) for n in args.bare_producers.split(",")]
    only = set(args.only or ["latency", "throughput", "rss"])
    out_path = Path(args.json) if args.json else ROOT / "docs" / "bench-results" / (
        "ingest-quick.json" if args.quick else "ingest.json")
    out = {"command": " ".join(["scripts/bench_ingest.py", *sys.argv[1:]]), "quick": args.quick,
           "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "machine": machine(), "load": {"start": load()}}
    t0 = time.monotonic()
    wh = tempfile.mkdtemp(prefix="bench-ingest-")
    try:
        if "latency" in only:
            say(f"latency + visibility ({runs} x 2 runs of {seconds:.0f} s) ...")
            out["latency"] = bench_latency(wh, runs, seconds, args.poll_ms)
            out["load"]["after_latency"] = load()
        if "throughput" in only:
            say(f"throughput (1,000- and 64k-row batches, {runs} rounds x {len(producer_counts) + len(bare_counts) + 2} variants, "
                f"{gib} GiB each) ...")
            out["throughput"] = bench_throughput(wh, runs, gib, producer_counts, bare_counts)
            out["load"]["after_throughput"] = load()
        if "rss" in only:
            say(f"server RSS ({runs} runs, 4 producers, {rss_gib} GiB in total) ...")
            out["rss"] = bench_rss(wh, runs, rss_gib, 4, 64 << 20)
            out["load"]["after_rss"] = load()
    finally:
        shutil.rmtree(wh, ignore_errors=True)
    out["elapsed_s"] = round(time.monotonic() - t0, 1)
    if args.only and out_path.exists():  # one section re-run: the others stay as they were
        old = json.loads(out_path.read_text())
        old.update({k: v for k, v in out.items() if k in only})
        old.setdefault("reruns", []).append({k: out[k] for k in ("command", "date", "load", "elapsed_s")})
        out = old
    text = json.dumps(out, indent=2)
    print(text)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text + "\n")
    say(f"wrote {out_path} in {out['elapsed_s']} s")


if __name__ == "__main__":
    main()
