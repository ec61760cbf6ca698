"""Many tables on one server: ack latency and server CPU per commit (issue 37 item 4).

A server with its defaults (`flight_cli serve`) takes durable do_put into `--tables` append tables
(bucket -1), one producer each, `--rate` batches a second of `--rows` rows, for `--seconds`. The
producers run in `--procs` processes (threads in each), so the producers' own GIL is not what is
measured; each batch's ack latency is timed from its write. The server's CPU seconds over the run
are read from /proc, and its commits from `stats`, so CPU per commit follows.

Goals: 100 tables x 5 batches/s of 1,000 rows: ack p50 <= 150 ms, p99 <= 500 ms; 500 tables at
1 batch/s: ack p99 <= 1 s.

Usage: .venv/bin/python scripts/bench_tables.py [--tables 100] [--rate 5] [--rows 1000] [--seconds 60]
       [--procs 4] [--json F]
       .venv/bin/python scripts/bench_tables.py --tables 500 --rate 1

`--floor` measures instead what pypaimon alone can commit, no server, no logic: one thread writes
a `--rows` batch into each of `--tables` tables in turn (native writer, a stream write and commit
per table) and commits it, `--rounds` times; commits a second and CPU ms a commit. A server over
pypaimon commits at most that often in one interpreter: N tables at R batches/s want N x R
commits a second for each batch to be acked within a commit interval.

       .venv/bin/python scripts/bench_tables.py --floor [--tables 100] [--rounds 5] [--floor-procs 2]

With `--floor-procs N` the floor runs in N processes at once, each over its own tables (tables / N
each), started together: what pypaimon alone commits a second on N cores, the ceiling for any
server on this machine however its commits were spread over processes.

`--idle-run N` measures what tables cost once they go quiet (issue 47 item 5): a server with its
defaults (`--table-idle-timeout`, default 60 s, passed on) gets N append tables created, then each
written once (one `--rows` batch by raw do_put, `--put-threads` at a time, each waiting for its
ack), then left idle `--idle-seconds` (default 120). The server's threads (/proc/PID/status
Threads) and RSS are read after the creates (before the writes), right after the writes, every
`--sample-seconds` while idle, and at the end (also the RSS of its child processes, the
compaction worker). `--created N --written M` creates N and writes M of them (e.g. 10,000 and
2,000) and reports the same, and whether the server still answers `health`.

       .venv/bin/python scripts/bench_tables.py --idle-run 1000 [--idle-seconds 120] [--table-idle-timeout "60 s"]
       .venv/bin/python scripts/bench_tables.py --created 10000 --written 2000 --json F

`--compare ROUNDS` runs `--variants` in rounds alternating: `floor xN`, `server` (the defaults),
`server cpN` (`--commit-processes N`), and `bare` / `bare xN`, scripts/bare_ingest_server.py, a
Flight ingest server with no logic at all (each table's pending batches written and committed
with pypaimon as often as it can, in its own process or N), the baseline a server's logic is
measured against. `--rate 0` makes the producers a closed loop: each table's next batch once the
last is acked, so a commit holds one batch, the floor's unit of work, and commits a second are
what the server can do rather than what the offered rate asks.

       .venv/bin/python scripts/bench_tables.py --compare 3 --rate 0 --seconds 30 --procs 3 \
           --variants "floor x1,floor x2,server,server cp1,server cp2,bare,bare x2"

`--sweep B` runs 10, 100, 500 and 1,000 tables sharing B batches a second, each after pypaimon's
floor over as many tables: threads, RSS, commits a second, the floor ratio and ack p50/p99, and
with `--plot F` a PNG of them (issue 47 item 5).

       .venv/bin/python scripts/bench_tables.py --sweep 200 --seconds 30 --plot docs/bench-results/tables-sweep.png
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def role_producers(uri: str, tables: str, rate: str, rows: str, seconds: str) -> None:
    """One process's producers (a thread a table); prints their ack latencies as JSON."""
    import pyarrow as pa
    import pyarrow.flight as flight
    from bench_ingest import SCHEMA, make_batches

    from flight_server.wire import messages

    batches = make_batches(int(rows), 8, seed=5)
    lat: list[float] = []
    lock = threading.Lock()
    go = threading.Event()
    errors: list[str] = []

    def produce(table: str, offset: float):
        try:
            client = flight.FlightClient(uri)
            writer, reader = client.do_put(flight.FlightDescriptor.for_path("paimon", table), SCHEMA)
            closed = float(rate) == 0  # closed loop: the next batch once the last is acked
            n = 0 if closed else int(float(seconds) * float(rate))
            sent = [0.0] * n
            got: list[float] = []
            acked = threading.Semaphore(0)

            def acks():
                while reader.read() is not None:
                    got.append(time.monotonic())
                    acked.release()

            t = threading.Thread(target=acks, daemon=True)
            t.start()
            go.wait()
            start = time.monotonic() + (0 if closed else offset)
            if closed:
                while time.monotonic() - start < float(seconds):
                    sent.append(time.monotonic())
                    writer.write_batch(batches[len(sent) % len(batches)])
                    if not acked.acquire(timeout=120):
                        raise RuntimeError("no ack in 120 s")
                n = len(sent)
            for i in range(0 if closed else n):
                wait = start + i / float(rate) - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                sent[i] = time.monotonic()
                writer.write_batch(batches[i % len(batches)])
            writer.write_metadata(pa.py_buffer(messages.end(n)))
            writer.done_writing()
            t.join(120)
            writer.close()
            with lock:
                lat.extend((a - s) * 1000 for a, s in zip(got, sent))
                if len(got) != n:
                    errors.append(f"{table}: {len(got)} acks of {n}")
        except Exception as e:  # noqa: BLE001 - reported in the JSON
            with lock:
                errors.append(f"{table}: {e}")

    names = tables.split(",")
    threads = [threading.Thread(target=produce, args=(t, i / len(names) / float(rate) if float(rate) else 0.0),
                                daemon=True)
               for i, t in enumerate(names)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    sys.stdin.readline()
    go.set()
    for t in threads:
        t.join()
    print(json.dumps({"lat_ms": lat, "errors": errors}), flush=True)


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bare_process(warehouse: str, names: list[str], procs: int, stderr):
    """scripts/bare_ingest_server.py (the no-logic baseline) as a child process (a ServerProcess:
    its first line is its URI), over tables made here with pypaimon."""
    from bench_ingest import SCHEMA
    from pypaimon import CatalogFactory

    from flight_server.paimon import compat
    from tests.process import ServerProcess

    catalog = CatalogFactory.create({"warehouse": warehouse})
    for name in names:
        compat.create_table(catalog, name, SCHEMA, None, None, {"bucket": "-1"})
    return ServerProcess(warehouse, stderr=stderr, command=[
        sys.executable, os.path.join(ROOT, "scripts", "bare_ingest_server.py"), warehouse, "--procs", str(procs)])


def bare_commits(uri: str) -> int:
    """How many commits the no-logic baseline made (its `commits` action)."""
    import pyarrow.flight as flight

    client = flight.FlightClient(uri)
    try:
        return int(next(iter(client.do_action(flight.Action("commits", b"")))).body.to_pybytes())
    finally:
        client.close()


def run(tables: int, rate: float, rows: int, seconds: float, procs: int, server_args: tuple[str, ...] = (),
        bare_procs: int | None = None) -> dict:
    """The producers against a server (`flight_cli serve` with `server_args`), or against the
    no-logic baseline with its commits in `bare_procs` processes (0: in its own)."""
    from bench_ingest import SCHEMA

    from producers import Client
    from tests.process import ServerProcess, child_env

    with tempfile.TemporaryDirectory(prefix="bench-tables-") as tmp:
        warehouse, log = os.path.join(tmp, "warehouse"), open(os.path.join(tmp, "server.log"), "w")
        names = [f"bench.t{i:04d}" for i in range(tables)]
        client = None
        if bare_procs is not None:
            server = bare_process(warehouse, names, bare_procs, log)

            def commits_now() -> int:
                return bare_commits(server.uri)
        else:
            server = ServerProcess(warehouse, *server_args, log_level="warning", stderr=log)
            client = Client(server.uri, timeout=120)
            for name in names:
                client.create_table(name, SCHEMA, options={"bucket": "-1"})

            def commits_now() -> int:
                return sum(w.commits for w in client.stats().paimon_writes.values())
        try:
            groups = [names[i::procs] for i in range(procs)]
            roles = [subprocess.Popen([sys.executable, __file__, "--role", server.uri, ",".join(g), str(rate), str(rows),
                                       str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env=child_env(), cwd=ROOT) for g in groups if g]
            for r in roles:
                line = r.stdout.readline()
                if line.strip() != "ready":
                    raise RuntimeError(f"a producer process did not start: {line!r}")
            commits0 = commits_now()
            children0 = {c: cpu_s(c) for c in children_of(server.proc.pid)}
            cpu0, start = cpu_s(server.proc.pid), time.monotonic()
            roles_cpu0 = sum(cpu_s(r.pid) for r in roles)
            for r in roles:
                r.stdin.write("go\n")
                r.stdin.flush()
            peak = {"threads": 0, "rss_mib": 0.0, "children_rss_mib": 0.0}
            sampling = threading.Event()

            def sample_peaks() -> None:  # the server's threads and RSS, every second while producing
                while not sampling.wait(1.0):
                    st = proc_status(server.proc.pid)
                    peak["threads"] = max(peak["threads"], st["threads"])
                    peak["rss_mib"] = max(peak["rss_mib"], st["rss_mib"])
                    peak["children_rss_mib"] = max(peak["children_rss_mib"], children_rss_mib(server.proc.pid))

            sampler = threading.Thread(target=sample_peaks, daemon=True)
            sampler.start()
            roles_cpu = 0.0
            outs = []
            for r in roles:  # the producers' CPU read just before each exits
                out = r.stdout.readline()
                roles_cpu += cpu_s(r.pid)
                outs.append(json.loads(out))
                r.wait(60)
            elapsed, cpu = time.monotonic() - start, cpu_s(server.proc.pid) - cpu0
            children_cpu = sum(cpu_s(c) - children0.get(c, 0.0) for c in children_of(server.proc.pid))
            commits = commits_now() - commits0
            sampling.set()
            sampler.join()
        finally:
            if client is not None:
                client.close()
            server.stop()
    lat = [x for o in outs for x in o["lat_ms"]]
    errors = [e for o in outs for e in o["errors"]]
    return {"tables": tables, "rate_batches_s": rate, "rows": rows, "seconds": round(elapsed, 1),
            "acks": len(lat), "errors": errors[:10], "ack_p50_ms": round(pct(lat, 50), 1),
            "ack_p99_ms": round(pct(lat, 99), 1), "ack_max_ms": round(max(lat), 1),
            "commits": commits, "commits_s": round(commits / elapsed, 1), "server_cpu_s": round(cpu, 1),
            "worker_processes_cpu_s": round(children_cpu, 1),
            "producers_cpu_s": round(roles_cpu - roles_cpu0, 1),
            "server_cpu_ms_per_commit": round((cpu + children_cpu) * 1000 / max(commits, 1), 2),
            "serving_process_cpu_ms_per_commit": round(cpu * 1000 / max(commits, 1), 2),
            "server_cores": round((cpu + children_cpu) / elapsed, 2), "mean_ms": round(statistics.mean(lat), 1),
            "server_args": list(server_args), "bare_procs": bare_procs, "peak_threads": peak["threads"],
            "peak_rss_mib": peak["rss_mib"], "peak_children_rss_mib": peak["children_rss_mib"]}


def children_of(pid: int) -> list[int]:
    """The server's child processes (commit workers, the compaction worker)."""
    children = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for task in tasks:  # a child is listed under the thread that started it
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return children


def variant(name: str) -> tuple[str, object]:
    """A `--compare` variant by name: `floor xN` (pypaimon alone in N processes), `server` (the
    defaults), `server cpN` (--commit-processes N), `bare` / `bare xN` (the no-logic server, its
    commits in its own process or in N)."""
    kind, _, n = name.partition(" ")
    if kind == "floor" and n.startswith("x"):
        return "floor", int(n[1:])
    if kind == "server":
        return "server", ("--commit-processes", n[2:]) if n.startswith("cp") else ()
    if kind == "bare":
        return "bare", int(n[1:]) if n.startswith("x") else 0
    raise ValueError(f"unknown variant {name!r}: floor xN, server, server cpN, bare, bare xN")


DEFAULT_VARIANTS = "floor x2,server,server cp2,bare,bare x2"


def compare(rounds: int, tables: int, rate: float, rows: int, seconds: float, procs: int, floor_rounds: int,
            variants: str = DEFAULT_VARIANTS) -> dict:
    """Rounds alternating (each round starts one variant later): commits a second of each variant,
    ack latencies of the servers, and every variant's median as a ratio of the first floor's."""
    names = [v.strip() for v in variants.split(",")]
    kinds = {v: variant(v) for v in names}
    results: dict[str, list[dict]] = {v: [] for v in names}
    for r in range(rounds):
        for v in names[r % len(names):] + names[:r % len(names)]:
            load = os.getloadavg()[0]
            kind, arg = kinds[v]
            if kind == "floor":
                out = floor_procs(tables, floor_rounds, rows, arg) if arg > 1 else floor(tables, floor_rounds, rows)
            elif kind == "bare":
                out = run(tables, rate, rows, seconds, procs, bare_procs=arg)
            else:
                out = run(tables, rate, rows, seconds, procs, arg)
            out["load_before"] = round(load, 2)
            results[v].append(out)
            print(json.dumps({"round": r, "variant": v, "commits_s": out["commits_s"],
                              "ack_p50_ms": out.get("ack_p50_ms"), "ack_p99_ms": out.get("ack_p99_ms"),
                              "load": out["load_before"]}), file=sys.stderr, flush=True)
    med = {v: statistics.median(o["commits_s"] for o in rs) for v, rs in results.items()}
    base = next((v for v in names if kinds[v][0] == "floor"), None)
    servers = [v for v in names if kinds[v][0] != "floor"]
    return {"rounds": rounds, "tables": tables, "rate": rate, "closed_loop": rate == 0, "rows": rows,
            "seconds": seconds, "median_commits_s": med,
            "ratio_to": base, "ratio": {v: round(m / med[base], 2) for v, m in med.items()} if base else None,
            "median_ack_p50_ms": {v: statistics.median(o["ack_p50_ms"] for o in results[v]) for v in servers},
            "median_ack_p99_ms": {v: statistics.median(o["ack_p99_ms"] for o in results[v]) for v in servers},
            "median_cpu_ms_per_commit": {v: statistics.median(o.get("server_cpu_ms_per_commit", o.get("cpu_ms_per_commit"))
                                                              for o in rs) for v, rs in results.items()},
            "runs": results}


SWEEP_TABLES = (10, 100, 500, 1000)


def sweep(total_rate: float, rows: int, seconds: float, procs: int, floor_rounds: int, plot_to: str | None) -> dict:
    """Many tables on one server (issue 47 item 5): for 10, 100, 500 and 1,000 tables sharing
    `total_rate` batches a second (so the rows a second stay the same and only the tables change),
    the server's peak threads and RSS, commits a second, their ratio to pypaimon's floor in 2
    processes over as many tables (measured before each), and ack p50/p99."""
    points = []
    for n in SWEEP_TABLES:
        load = os.getloadavg()[0]
        fl = floor_procs(n, floor_rounds, rows, 2)
        out = run(n, total_rate / n, rows, seconds, procs)
        out.update(load_before=round(load, 2), floor_commits_s=fl["commits_s"],
                   floor_ratio=round(out["commits_s"] / fl["commits_s"], 2))
        points.append(out)
        print(json.dumps({k: out[k] for k in ("tables", "rate_batches_s", "commits_s", "floor_commits_s", "floor_ratio",
                                              "ack_p50_ms", "ack_p99_ms", "peak_threads", "peak_rss_mib",
                                              "load_before")}), file=sys.stderr, flush=True)
    if plot_to:
        plot_sweep(points, plot_to)
    return {"sweep": "tables sharing one total rate", "total_rate_batches_s": total_rate, "rows": rows,
            "seconds": seconds, "points": points}


def plot_sweep(points: list[dict], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("the plot needs matplotlib: .venv/bin/python -m pip install 'matplotlib>=3.8'") from None
    x = [p["tables"] for p in points]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    ax.plot(x, [p["ack_p50_ms"] for p in points], "o-", label="ack p50")
    ax.plot(x, [p["ack_p99_ms"] for p in points], "s-", label="ack p99")
    ax.set(xscale="log", yscale="log", xlabel="tables", ylabel="ms", title="ack latency")
    ax.legend()
    ax = axes[1]
    ax.plot(x, [p["commits_s"] for p in points], "o-", label="server")
    ax.plot(x, [p["floor_commits_s"] for p in points], "s--", label="pypaimon floor, 2 processes")
    ax.set(xscale="log", xlabel="tables", ylabel="commits/s", title="commits a second")
    ax.legend()
    ax = axes[2]
    ax.plot(x, [p["peak_threads"] for p in points], "o-", color="C2", label="threads")
    ax.set(xscale="log", xlabel="tables", ylabel="threads (peak)", title="server threads and RSS")
    twin = ax.twinx()
    twin.plot(x, [p["peak_rss_mib"] for p in points], "s--", color="C3", label="RSS MiB")
    twin.set_ylabel("RSS MiB (peak)")
    fig.suptitle(f"{points[0]['rate_batches_s'] * points[0]['tables']:.0f} batches/s of {points[0]['rows']} rows "
                 "shared by the tables, on this 2-core machine", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def floor(tables: int, rounds: int, rows: int) -> dict:
    """pypaimon alone committing a batch into each table in turn (see the module's docstring)."""
    import pyarrow as pa
    from bench_ingest import SCHEMA, make_batches
    from pypaimon import CatalogFactory

    from flight_server.paimon import compat

    with tempfile.TemporaryDirectory(prefix="bench-tables-floor-") as tmp:
        catalog = CatalogFactory.create({"warehouse": tmp})
        writers = []
        for i in range(tables):
            compat.create_table(catalog, f"db.t{i}", SCHEMA, None, None, {"bucket": "-1"})
            builder = compat.native_write_table(catalog.get_table(f"db.t{i}")).new_stream_write_builder()
            writers.append((builder.new_write(), builder.new_commit()))
        batch = pa.Table.from_batches(make_batches(rows, 1))
        for w, c in writers[:2]:  # the native writer loaded outside the clock
            w.write_arrow(batch)
            c.commit(w.prepare_commit(0), 0)
        write_s = commit_s = 0.0
        cpu0, start, n = time.process_time(), time.perf_counter(), 0
        for r in range(1, rounds + 1):
            for w, c in writers:
                a = time.process_time()
                w.write_arrow(batch)
                messages = w.prepare_commit(r)
                b = time.process_time()
                c.commit(messages, r)
                write_s, commit_s, n = write_s + b - a, commit_s + time.process_time() - b, n + 1
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        for w, c in writers:
            w.close()
            c.close()
    return {"floor": "pypaimon alone, one thread", "tables": tables, "rows": rows, "commits": n,
            "commits_s": round(n / wall, 1), "cpu_ms_per_commit": round(cpu * 1000 / n, 2),
            "write_prepare_cpu_ms": round(write_s * 1000 / n, 2), "commit_cpu_ms": round(commit_s * 1000 / n, 2)}


def floor_procs(tables: int, rounds: int, rows: int, procs: int) -> dict:
    """`floor` in `procs` processes at once (each tables / procs tables): commits a second in all."""
    children = [subprocess.Popen([sys.executable, __file__, "--floor", "--tables", str(max(1, tables // procs)),
                                  "--rounds", str(rounds), "--rows", str(rows)], stdout=subprocess.PIPE, text=True,
                                 cwd=ROOT) for _ in range(procs)]
    outs = [json.loads(c.communicate(timeout=3600)[0].strip().splitlines()[-1]) for c in children]
    if any(c.returncode for c in children):
        raise RuntimeError("a floor process failed")
    return {"floor": f"pypaimon alone, {procs} processes at once", "tables": tables, "rows": rows,
            "commits_s": round(sum(o["commits_s"] for o in outs), 1),
            "cpu_ms_per_commit": round(statistics.mean(o["cpu_ms_per_commit"] for o in outs), 2),
            "per_process": outs}


def proc_status(pid: int) -> dict:
    """Threads and RSS (MiB) of a process, from /proc/PID/status; of the RSS, the anonymous pages
    (heap, Python's arenas, stacks) and the file pages (the code of the libraries it ran)."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)

    def mib(key: str) -> float:
        return round(int(fields.get(key, "0 kB").split()[0]) / 1024, 1)

    return {"threads": int(fields["Threads"]), "rss_mib": mib("VmRSS"), "rss_anon_mib": mib("RssAnon"),
            "rss_file_mib": mib("RssFile")}


def children_rss_mib(pid: int) -> float:
    """RSS (MiB) of the processes whose parent is `pid` (the compaction worker)."""
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:  # ended meanwhile
                continue
            if int(fields["PPid"]) == pid:
                total += int(fields.get("VmRSS", "0 kB").split()[0])
    return round(total / 1024, 1)


def sample(pid: int, start: float) -> dict:
    return {"t_s": round(time.monotonic() - start, 1), **proc_status(pid), "children_rss_mib": children_rss_mib(pid)}


def put_once(uri: str, table: str, batch) -> None:
    """One batch into `table` by raw do_put (the end message names 1 batch); returns once acked."""
    import pyarrow as pa
    import pyarrow.flight as flight

    from flight_server.wire import messages

    client = flight.FlightClient(uri)
    try:
        writer, reader = client.do_put(flight.FlightDescriptor.for_path("paimon", table), batch.schema)
        writer.write_batch(batch)
        writer.write_metadata(pa.py_buffer(messages.end(1)))
        writer.done_writing()
        acks = 0
        while reader.read() is not None:
            acks += 1
        writer.close()
    finally:
        client.close()
    if acks != 1:
        raise RuntimeError(f"{table}: {acks} acks of 1")


def idle_run(created: int, written: int, rows: int, idle_s: float, idle_timeout: str, put_threads: int,
             sample_s: float) -> dict:
    """Tables created, some written once, then idle: the server's threads and RSS (module docstring)."""
    from concurrent.futures import ThreadPoolExecutor

    from bench_ingest import SCHEMA, make_batches

    from producers import Client
    from tests.process import ServerProcess

    batch = make_batches(rows, 1, seed=5)[0]
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-tables-idle-") as tmp:
        server = ServerProcess(os.path.join(tmp, "warehouse"), "--table-idle-timeout", idle_timeout,
                               log_level="warning", stderr=open(os.path.join(tmp, "server.log"), "w"))
        pid, start = server.proc.pid, time.monotonic()
        client = Client(server.uri, timeout=120)
        errors: list[str] = []
        try:
            started = sample(pid, start)
            names = [f"bench.t{i:05d}" for i in range(created)]
            for name in names:
                client.create_table(name, SCHEMA, options={"bucket": "-1"})
            created_s = time.monotonic() - start
            before = sample(pid, start)

            def put(name: str) -> None:
                try:
                    put_once(server.uri, name, batch)
                except Exception as e:  # noqa: BLE001 - counted and reported in the JSON
                    errors.append(f"{name}: {str(e).splitlines()[0][:200]}")

            writes_at = time.monotonic()
            with ThreadPoolExecutor(put_threads) as pool:
                list(pool.map(put, names[:written]))
            write_s = time.monotonic() - writes_at
            after_writes = sample(pid, start)
            idle: list[dict] = []
            idle_from = time.monotonic()
            while time.monotonic() - idle_from < idle_s:
                time.sleep(min(sample_s, max(0.0, idle_s - (time.monotonic() - idle_from))))
                idle.append(sample(pid, start))
            up = server.proc.poll() is None and client.health().status == "serving"
        finally:
            client.close()
            server.stop()
    after_idle = idle[-1] if idle else after_writes
    threads_delta = after_idle["threads"] - before["threads"]
    rss_delta = round(after_idle["rss_mib"] - before["rss_mib"], 1)
    return {"run": "idle", "tables_created": created, "tables_written": written, "rows_per_batch": rows,
            "table_idle_timeout": idle_timeout, "idle_s": idle_s, "put_threads": put_threads,
            "create_s": round(created_s, 1), "write_s": round(write_s, 1),
            "acked": written - len(errors), "errors": len(errors), "first_errors": errors[:10], "server_up_at_end": up,
            "server_started": started, "before_writes": before, "after_writes": after_writes,
            "after_idle": after_idle, "idle_samples": idle,
            "threads_after_idle_minus_before": threads_delta, "rss_mib_after_idle_minus_before": rss_delta,
            "goal": f"after {idle_s:g} s idle: threads within 64 and RSS within 64 MiB of before the writes "
                    "(issue 47: 1,000 tables, 2 min)",
            "goal_met": abs(threads_delta) <= 64 and abs(rss_delta) <= 64, "uptime_at_start": load,
            "uptime_at_end": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}


def build() -> str:
    """The checkout's commit, and whether flight_server has changes not committed."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return "not a git checkout"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "flight_server"], capture_output=True,
                           text=True).stdout.strip()
    return head.stdout.strip() + (" with uncommitted changes in flight_server/" if dirty else "")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--role":
        role_producers(*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--rate", type=float, default=5, help="batches a second per table; 0: closed loop (the next "
                                                          "batch once the last is acked)")
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--json")
    ap.add_argument("--floor", action="store_true", help="pypaimon alone: how many commits a second it makes")
    ap.add_argument("--rounds", type=int, default=5, help="--floor: commits into each table")
    ap.add_argument("--floor-procs", type=int, default=1, help="--floor: run it in this many processes at once")
    ap.add_argument("--server-arg", action="append", default=[], help="a flag for the server (repeat)")
    ap.add_argument("--compare", type=int, metavar="ROUNDS",
                    help="rounds alternating over --variants; commits/s and their ratio to the first floor")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help="--compare: what runs, comma-separated: floor xN, server, server cpN, bare, bare xN")
    ap.add_argument("--sweep", type=float, metavar="BATCHES_S",
                    help="10, 100, 500 and 1,000 tables sharing this many batches a second (see sweep())")
    ap.add_argument("--plot", help="--sweep: draw the sweep into this PNG (needs matplotlib)")
    ap.add_argument("--idle-run", type=int, metavar="N", help="create N tables, write each once, then idle")
    ap.add_argument("--created", type=int, help="idle run: tables created (with --written)")
    ap.add_argument("--written", type=int, help="idle run: of the created tables, written once each")
    ap.add_argument("--idle-seconds", type=float, default=120, help="idle run: how long the tables stay idle")
    ap.add_argument("--table-idle-timeout", default="60 s", help="idle run: the server's --table-idle-timeout")
    ap.add_argument("--put-threads", type=int, default=32, help="idle run: do_puts at once")
    ap.add_argument("--sample-seconds", type=float, default=10, help="idle run: read threads and RSS this often")
    args = ap.parse_args()
    if args.idle_run is not None and (args.created is not None or args.written is not None):
        ap.error("--idle-run N is --created N --written N: pass one or the other")
    if (args.created is None) != (args.written is None):
        ap.error("--created and --written go together")
    if args.created is not None and not 0 <= args.written <= args.created:
        ap.error(f"--written ({args.written}) must be between 0 and --created ({args.created})")
    if args.idle_run is not None or args.created is not None:
        created = args.idle_run if args.idle_run is not None else args.created
        written = args.idle_run if args.idle_run is not None else args.written
        result = idle_run(created, written, args.rows, args.idle_seconds, args.table_idle_timeout, args.put_threads,
                          args.sample_seconds)
        result["build"] = build()
    elif args.sweep:
        result = sweep(args.sweep, args.rows, args.seconds, args.procs, args.rounds, args.plot)
    elif args.compare:
        for v in args.variants.split(","):
            try:
                variant(v.strip())
            except ValueError as e:
                ap.error(str(e))
        result = compare(args.compare, args.tables, args.rate, args.rows, args.seconds, args.procs, args.rounds,
                         args.variants)
    elif args.floor and args.floor_procs > 1:
        result = floor_procs(args.tables, args.rounds, args.rows, args.floor_procs)
    elif args.floor:
        result = floor(args.tables, args.rounds, args.rows)
    else:
        result = run(args.tables, args.rate, args.rows, args.seconds, args.procs, tuple(args.server_arg))
    print(json.dumps(result), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(["scripts/bench_tables.py", *sys.argv[1:]]), **result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
