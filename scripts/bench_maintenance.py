"""Does a durable table stay fast as it ages? An hour of ingest at ten commits a second, simulated.

A server (`flight_cli serve`, --commit-interval-ms 1) takes small batches into two tables of the same
shape (2 buckets): `db.kept`, maintained by the server (its defaults), and `db.raw` (`write-only`:
never compacted nor expired). One producer writes each table in turn, a round of `--round` batches
at a time (rounds alternating), each batch acked before the next, so each batch is one commit.
Every `--sample-every` commits, for each table: its snapshots and live data files (pypaimon), and a
full read through Flight, timed (median of 7, rounds alternating) against a baseline table that
holds the same rows in one commit, written fresh at that point. The kept table is read once its
maintenance has caught up with the round's commits (the goal is about the table's shape), and also
right after the round, while the server still maintains it in the same process (`busy_*`).

Goals (issue 27): the maintained table's full read <= 1.2x the baseline's at any age, snapshots
within retention, files bounded, ingest throughput with maintenance >= 0.9x without.

Usage: .venv/bin/python scripts/bench_maintenance.py [--commits 36000] [--rows 100] [--round 500]
       [--sample-every 3000] [--json docs/bench-results/maintenance.json] [--svg docs/benchmarks_maintenance.svg]

`--acks` measures instead what maintenance costs the producers of the table it maintains (issue
27: ack p50 <= 100 ms while it runs, no commit held back more than one commit interval): a server
with the default --commit-interval-ms 100 takes bench_ingest's paced producer (1,000-row batches at
100/s, raw do_put, each batch's ack timed) for `--acks-seconds`, into a fresh table maintained by
the server or a `write-only` one (rounds alternating, `--acks-runs` each); the server's committer
says how long the compaction commits it ran between group commits took (the longest of them is
how far a group commit was held back).

       .venv/bin/python scripts/bench_maintenance.py --acks [--acks-runs 3] [--acks-seconds 60] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import pyarrow as pa  # noqa: E402
import pyarrow.flight as flight  # noqa: E402

from flight_server.paimon import compat  # noqa: E402
from producers import Client  # noqa: E402
from producers.examples.events import SCHEMA, batch  # noqa: E402
from tests.process import ServerProcess  # noqa: E402

TABLES = ("db.kept", "db.raw")
READS = 7  # full reads of the kept table and its baseline a sample, alternating (a read takes 30-150 ms)
SHAPE = {"bucket": "2", "bucket-key": "id"}


def full_read_s(client: Client, table: str) -> float:
    start = time.perf_counter()
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), client.options())
    rows = sum(client.flight.do_get(ep.ticket, client.options()).read_all().num_rows for ep in info.endpoints)
    elapsed = time.perf_counter() - start
    assert rows == info.total_records or info.total_records < 0, (table, rows, info.total_records)
    return elapsed


def shape_of(catalog, table: str) -> tuple[int, int]:
    """(snapshots kept, live data files) of the table's latest snapshot."""
    t = catalog.get_table(table)
    manager = t.snapshot_manager()
    latest = manager.get_latest_snapshot()
    earliest = compat.earliest_snapshot_id(manager) or latest.id
    return latest.id - earliest + 1, len(t.new_read_builder().new_scan().file_scanner.plan_files())


def baseline(catalog, name: str, commits: int, rows: int) -> str:
    """A table with the rows of `commits` batches in one commit (pypaimon's native writer)."""
    compat.create_table(catalog, name, SCHEMA, None, None, SHAPE)
    table = compat.native_write_table(catalog.get_table(name))
    data = pa.Table.from_batches([batch("bench", i, rows) for i in range(commits)])
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    return name


def svg(samples: list[dict], path: str) -> None:
    """Snapshots and data files of both tables over commits, as a small dependency-free SVG."""
    width, height, pad = 720, 360, 50
    xs = [s["commits"] for s in samples]
    series = [("kept snapshots", "kept_snapshots", "#1f77b4", ""), ("kept data files", "kept_files", "#ff7f0e", ""),
              ("raw snapshots", "raw_snapshots", "#1f77b4", "4 3"), ("raw data files", "raw_files", "#ff7f0e", "4 3")]
    top = max(max(s[key] for s in samples) for _, key, _, _ in series) or 1
    import math

    def y(v: float) -> float:  # log scale: 1 .. top
        return height - pad - (math.log10(max(v, 1)) / math.log10(max(top, 10))) * (height - 2 * pad)

    def x(v: float) -> float:
        return pad + (v / max(xs)) * (width - 2 * pad)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{pad}" y="20">snapshots and live data files over commits (log scale; dashed: no maintenance)</text>',
           f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
           f'<text x="{width - pad}" y="{height - pad + 30}" text-anchor="end">{max(xs)} commits</text>']
    for decade in range(0, int(math.log10(max(top, 10))) + 1):
        out.append(f'<text x="{pad - 5}" y="{y(10 ** decade) + 4}" text-anchor="end">{10 ** decade}</text>')
    for i, (label, key, color, dash) in enumerate(series):
        points = " ".join(f"{x(s['commits']):.1f},{y(s[key]):.1f}" for s in samples)
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
        out.append(f'<text x="{pad + 10}" y="{pad + 15 + 14 * i}" fill="{color}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def acks(runs: int, seconds: float) -> dict:
    """Ack latency into a maintained table against a write-only one (see the module's docstring)."""
    import bench_ingest as bi

    with tempfile.TemporaryDirectory(prefix="bench-maintenance-acks-") as tmp:
        warehouse = os.path.join(tmp, "warehouse")
        server = ServerProcess(warehouse, stderr=open(os.path.join(tmp, "server.log"), "w"))  # the defaults
        client = Client(server.uri, timeout=120)
        out: dict[str, list[dict]] = {"maintained": [], "write_only": []}
        try:
            for run in range(-1, runs):  # run -1: warm-up, not counted
                order = ("maintained", "write_only") if run % 2 == 0 else ("write_only", "maintained")
                for kind in order:
                    table = f"{bi.DB}.acks{run + 1}_{kind}"
                    options = {"bucket": "-1", **({"write-only": "true"} if kind == "write_only" else {})}
                    client.create_table(table, bi.SCHEMA, options=options)
                    producer = bi.Role("lat-producer", server.uri, table, "100", str(3 if run < 0 else seconds))
                    producer.ready()
                    producer.go()
                    p = producer.result()
                    assert p["acked"] == p["sent"], p
                    if run < 0:
                        continue
                    lat = p["lat_ms"]
                    writes = client.stats().paimon_writes[table]
                    kept = client.stats(table).maintenance.get(table)
                    row = {"p50_ms": bi.pct(lat, 50), "p99_ms": bi.pct(lat, 99), "max_ms": max(lat),
                           "commits": writes.commits, "compaction_commits": writes.maintenance_commits,
                           "compaction_commit_ms_max": writes.maintenance_commit_ms_max,
                           "data_files": getattr(kept, "data_files", None), "snapshots": getattr(kept, "snapshots", None),
                           "load1": bi.load()[0]}
                    out[kind].append(row)
                    print(json.dumps({"run": run, "table": kind, **{k: round(v, 1) if isinstance(v, float) else v
                                                                    for k, v in row.items()}}), flush=True)
        finally:
            client.close()
            server.stop()

    def summary(rows):
        return {"p50_ms": statistics.median(r["p50_ms"] for r in rows),
                "p99_ms": statistics.median(r["p99_ms"] for r in rows), "max_ms": max(r["max_ms"] for r in rows),
                "compaction_commits": sum(r["compaction_commits"] for r in rows),
                "compaction_commit_ms_max": max(r["compaction_commit_ms_max"] for r in rows),
                "runs": rows}

    return {"command": " ".join(["scripts/bench_maintenance.py", *sys.argv[1:]]), "commit_interval_ms": 100,
            "rate_batches_s": 100, "rows_per_batch": bi.SMALL_ROWS, "seconds_per_run": seconds,
            "maintained": summary(out["maintained"]), "write_only": summary(out["write_only"])}


def parts(runs: int, counts: list[int], batches: int) -> dict:
    """What the part files compaction leaves cost a read: a bucket of N files of `batches` x 64k
    rows of bench_ingest's schema (20: ~18 MiB of Parquet, about the part-file size, which
    compaction leaves until they add up to target-file-size) against the same rows in one commit,
    full reads through Flight (median of `runs`, alternating). Both tables are `write-only`
    (nothing compacts them meanwhile)."""
    import bench_ingest as bi
    from pypaimon import CatalogFactory

    part_rows = batches * bi.BIG_ROWS
    data = bi.make_batches(bi.BIG_ROWS, batches)
    shape = {"bucket": "1", "bucket-key": "id", "write-only": "true"}
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-maintenance-parts-") as tmp:
        warehouse = os.path.join(tmp, "warehouse")
        server = ServerProcess(warehouse, stderr=open(os.path.join(tmp, "server.log"), "w"))
        client = Client(server.uri, timeout=300)
        catalog = CatalogFactory.create({"warehouse": warehouse})
        try:
            for n in counts:
                tables = (f"db.parts{n}", f"db.one{n}")
                for t in tables:
                    client.create_table(t, bi.SCHEMA, options=shape)
                for _ in range(n):  # n commits of one part each
                    _commit(catalog, tables[0], data)
                _commit(catalog, tables[1], [b for _ in range(n) for b in data])
                files = catalog.get_table(tables[0]).new_read_builder().new_scan().file_scanner.plan_files()
                reads = {t: [] for t in tables}
                full_read_s(client, tables[0])  # warm: the server's first read of a table loads it
                full_read_s(client, tables[1])
                for run in range(runs):
                    for t in (tables if run % 2 == 0 else tables[::-1]):
                        reads[t].append(full_read_s(client, t))
                row = {"part_files": len(files), "part_mib": statistics.median(f.file.file_size for f in files) / 2**20,
                       "rows": n * part_rows, "parts_read_s": statistics.median(reads[tables[0]]),
                       "one_file_read_s": statistics.median(reads[tables[1]])}
                row["parts_vs_one_file"] = row["parts_read_s"] / row["one_file_read_s"]
                row["ms_per_extra_file"] = 1000 * (row["parts_read_s"] - row["one_file_read_s"]) / max(1, n - 1)
                out.append(row)
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        finally:
            client.close()
            server.stop()
    return {"command": " ".join(["scripts/bench_maintenance.py", *sys.argv[1:]]), "runs": runs, "samples": out}


def _commit(catalog, name: str, batches: list) -> None:
    table = compat.native_write_table(catalog.get_table(name))
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    for b in batches:
        write.write_arrow_batch(b)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=36000, help="commits into each table (an hour at 10/s)")
    ap.add_argument("--rows", type=int, default=100, help="rows a batch (a commit)")
    ap.add_argument("--round", type=int, default=500, help="commits into one table before switching to the other")
    ap.add_argument("--sample-every", type=int, default=3000)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--svg", help="write the plot here")
    ap.add_argument("--acks", action="store_true", help="measure ack latency with and without maintenance instead")
    ap.add_argument("--acks-runs", type=int, default=3)
    ap.add_argument("--acks-seconds", type=float, default=60)
    ap.add_argument("--parts", action="store_true", help="measure what the part files compaction leaves cost a read")
    ap.add_argument("--parts-counts", default="5,15", help="part files a bucket holds, comma separated")
    ap.add_argument("--parts-runs", type=int, default=7)
    ap.add_argument("--parts-batches", type=int, default=20, help="64k-row batches a part file holds")
    args = ap.parse_args()
    if args.parts:
        result = parts(args.parts_runs, [int(n) for n in args.parts_counts.split(",")], args.parts_batches)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return 0
    if args.acks:
        result = acks(args.acks_runs, args.acks_seconds)
        print(json.dumps({k: v for k, v in result.items() if k not in ("maintained", "write_only")}
                         | {k: {x: y for x, y in result[k].items() if x != "runs"} for k in ("maintained", "write_only")},
                         indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return 0
    from pypaimon import CatalogFactory

    with tempfile.TemporaryDirectory(prefix="bench-maintenance-") as tmp:
        warehouse = os.path.join(tmp, "warehouse")
        server = ServerProcess(warehouse, "--commit-interval-ms", "1", stderr=open(os.path.join(tmp, "server.log"), "w"))
        client = Client(server.uri, timeout=120)
        catalog = CatalogFactory.create({"warehouse": warehouse})
        try:
            client.create_table("db.kept", SCHEMA, options=SHAPE)
            client.create_table("db.raw", SCHEMA, options={**SHAPE, "write-only": "true"})
            sinks = {t: client.paimon_sink(t, producer="bench", max_unacked=1) for t in TABLES}
            written = {t: 0 for t in TABLES}
            rates: dict[str, list[float]] = {t: [] for t in TABLES}
            samples: list[dict] = []
            while written["db.kept"] < args.commits:
                for table in TABLES:  # a round each, alternating
                    sink, start = sinks[table], time.perf_counter()
                    n = min(args.round, args.commits - written[table])
                    for i in range(written[table], written[table] + n):
                        sink.write(batch("bench", i, args.rows))
                    while sink.acked < written[table] + n:
                        time.sleep(0.001)  # the sink's acks arrive on its own thread
                    rates[table].append(n / (time.perf_counter() - start))
                    written[table] += n
                done = written["db.kept"]
                if done % args.sample_every == 0 or done == args.commits:
                    base = baseline(catalog, f"db.base{done}", done, args.rows)
                    # Right after a round, the server is still maintaining the kept table (catching up
                    # on its last commits, in the same process): reads then share the CPU with it.
                    busy = {t: [] for t in ("db.kept", base)}
                    for _ in range(3):
                        for t in ("db.kept", base):
                            busy[t].append(full_read_s(client, t))
                    start = time.perf_counter()
                    while client.stats("db.kept").maintenance["db.kept"].due and time.perf_counter() - start < 120:
                        time.sleep(0.05)  # the table's shape is what the goal is about: read it settled
                    settle_s = time.perf_counter() - start
                    reads = {t: [] for t in (*TABLES, base)}
                    for _ in range(READS):
                        for t in ("db.kept", base):
                            reads[t].append(full_read_s(client, t))
                    reads["db.raw"].append(full_read_s(client, "db.raw"))  # once: it gets slow
                    row = {"commits": done}
                    for t, key in (("db.kept", "kept"), ("db.raw", "raw")):
                        row[f"{key}_snapshots"], row[f"{key}_files"] = shape_of(catalog, t)
                    row.update(kept_read_s=statistics.median(reads["db.kept"]), base_read_s=statistics.median(reads[base]),
                               raw_read_s=reads["db.raw"][0], settle_s=settle_s,
                               busy_kept_read_s=statistics.median(busy["db.kept"]),
                               busy_base_read_s=statistics.median(busy[base]))
                    row["busy_kept_vs_one_commit"] = row["busy_kept_read_s"] / row["busy_base_read_s"]
                    row["kept_vs_one_commit"] = row["kept_read_s"] / row["base_read_s"]
                    row["raw_vs_one_commit"] = row["raw_read_s"] / row["base_read_s"]
                    samples.append(row)
                    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
            for sink in sinks.values():
                sink.close()
            ratios = [k / r for k, r in zip(rates["db.kept"], rates["db.raw"])]
            stats = client.stats("db.kept").maintenance["db.kept"].to_json()
        finally:
            client.close()
            server.stop()
    result = {"command": " ".join(["scripts/bench_maintenance.py", *sys.argv[1:]]), "rows_per_commit": args.rows,
              "samples": samples, "commits_per_s_kept": statistics.median(rates["db.kept"]),
              "commits_per_s_raw": statistics.median(rates["db.raw"]),
              "throughput_ratio_median": statistics.median(ratios), "rounds": len(ratios),
              "worst_kept_vs_one_commit": max(s["kept_vs_one_commit"] for s in samples),
              "worst_busy_kept_vs_one_commit": max(s["busy_kept_vs_one_commit"] for s in samples),
              "maintenance": stats}
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.svg:
        svg(samples, args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
