"""Spark benchmark: flight-paimon vs spark.read.parquet on one Paimon table, the same through Spark
Connect; push-to-foreachBatch latency.

    .venv/bin/python scripts/bench_spark.py [--rows 4000000] [--runs 3] [--latency-s 20] [--json out.json]

1. An aggregation over an append Paimon table (bucket=-1, written by pypaimon in 4 commits, so
   4 data files, planned by the server as 2 flight-paimon partitions for the 2 cores),
   read through flight-paimon and, in the same SparkSession, with spark.read.parquet on the
   table's own data files. The query touches every column, so parquet cannot skip any.
   After one warm-up each, the two reads alternate for `--runs` rounds; ratio = the median of
   the rounds' flight / parquet times (a noisy moment on a shared machine hits both of a round).
2. The same aggregation over flight-paimon through Spark Connect (a Connect server on the same
   SparkContext, scripts/local_connect.py) against classic Spark, rounds alternating: the
   ratio is the median of connect / classic.
3. Latency from a producer's TableSink.write of a one-row batch (one every 50 ms) to the row
   collected inside foreachBatch of a readStream over the push table, trigger processingTime 0
   and 200 ms: p50/p99. Producer and foreachBatch run in this process, so one clock times both
   ends. Beside it, rounds alternating, the same query over a Python streaming source with no
   logic at all (scripts/clock_source.py): what Spark's micro-batches cost alone.
4. Selective reads (scripts/bench_selective.py): a one-partition query of a 10-partition table,
   sum(x) and a full scan, each against spark.read.parquet of the same files and, rounds
   alternating, a Python data source with no logic at all over them (scripts/parquet_source.py:
   the floor under any Python source), and the bytes the server sent for the one-partition query
   against the full scan's.
`--only scan,connect,latency,selective` runs some of them (all by default).
The server runs as a separate `flight_cli serve` process, as it does in production.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from producers import Client  # noqa: E402
from scripts.bench_selective import bench_selective, free_port  # noqa: E402
from tests.paimon_tables import commit_arrow  # noqa: E402
from tests.process import ServerProcess  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("region", pa.string())])
# Small split targets make each data file its own split, so a bucket=-1 table plans one
# endpoint per file (up to the server's 16 groups) instead of one for the whole table.
TABLE_OPTIONS = {"bucket": "-1", "source.split.target-size": "8mb"}
QUERY = "SELECT region, count(*) AS n, sum(amount) AS total, max(id) AS top, min(name) AS first FROM t GROUP BY region"


def start_server(warehouse: str, metrics_port: int) -> tuple[subprocess.Popen, str]:
    server = ServerProcess(warehouse, "--metrics-port", str(metrics_port), stderr=subprocess.DEVNULL)
    return server.proc, server.uri


def write_table(warehouse: str, rows: int, commits: int = 4) -> str:
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("bench", True)
    catalog.create_table("bench.orders", Schema.from_pyarrow_schema(SCHEMA, options=TABLE_OPTIONS), False)
    table = catalog.get_table("bench.orders")
    regions = pa.array(["eu", "us", "apac", "latam"])
    per = rows // commits
    for c in range(commits):
        ids = pa.array(range(c * per, (c + 1) * per), pa.int64())
        data = pa.table({
            "id": ids,
            "name": pc.binary_join_element_wise("n", pc.cast(ids, pa.string()), ""),
            "amount": pc.multiply(pc.cast(ids, pa.float64()), 0.25),
            "region": regions.take(pc.bit_wise_and(ids, 3)),
        }, schema=SCHEMA)
        commit_arrow(table, data)
    return "bench.orders"


def timed_pairs(spark, flight_df, parquet_df, runs: int) -> tuple[list, list, list, list]:
    """Alternate the two reads run by run, so a noisy moment on the shared machine hits both."""
    flight_df.createOrReplaceTempView("f")
    parquet_df.createOrReplaceTempView("p")
    flight_q, parquet_q = QUERY.replace("FROM t", "FROM f"), QUERY.replace("FROM t", "FROM p")
    # warm-up: JVM, Python workers, page cache; also the two answers to compare
    flight_result = sorted(map(tuple, spark.sql(flight_q).collect()))
    parquet_result = sorted(map(tuple, spark.sql(parquet_q).collect()))
    flight_s, parquet_s = [], []
    for _ in range(runs):
        for query, times in ((flight_q, flight_s), (parquet_q, parquet_s)):
            start = time.perf_counter()
            spark.sql(query).collect()
            times.append(time.perf_counter() - start)
    return flight_s, parquet_s, flight_result, parquet_result


def bench_scan(spark, uri: str, warehouse: str, rows: int, runs: int) -> dict:
    t0 = time.perf_counter()
    table = write_table(warehouse, rows)
    write_s = time.perf_counter() - t0
    files = sorted(glob.glob(f"{warehouse}/bench.db/orders/**/*.parquet", recursive=True))
    if not files:
        raise SystemExit(f"no parquet data files under {warehouse}/bench.db/orders")
    flight_df = spark.read.format("flight-paimon").option("uri", uri).option("table", table).load()
    parquet_df = spark.read.parquet(*files)
    flight_s, parquet_s, flight_result, parquet_result = timed_pairs(spark, flight_df, parquet_df, runs)
    assert flight_result == parquet_result, "the two reads disagree"
    ratios = [f / p for f, p in zip(flight_s, parquet_s)]
    return {"rows": rows, "data_files": len(files), "flight_partitions": flight_df.rdd.getNumPartitions(),
            "pypaimon_write_s": round(write_s, 2), "flight_median_s": round(statistics.median(flight_s), 3),
            "parquet_median_s": round(statistics.median(parquet_s), 3),
            "ratio": round(statistics.median(ratios), 2), "ratios": [round(r, 2) for r in ratios]}


def bench_connect(spark, connect, uri: str, table: str, runs: int) -> dict:
    """The aggregation through Spark Connect against classic Spark, rounds alternating."""
    from spark_reader import FlightPaimonDataSource

    connect.dataSource.register(FlightPaimonDataSource)
    frames = {name: session.read.format("flight-paimon").option("uri", uri).option("table", table).load()
              for name, session in (("classic", spark), ("connect", connect))}
    answers, times = {}, {"classic": [], "connect": []}
    for name, df in frames.items():  # warm-up, and the answers to compare
        df.createOrReplaceTempView("f")
        answers[name] = sorted(map(tuple, df.sparkSession.sql(QUERY.replace("FROM t", "FROM f")).collect()))
    assert answers["classic"] == answers["connect"], "Connect and classic disagree"
    for _ in range(runs):
        for name, df in frames.items():
            df.createOrReplaceTempView("f")
            start = time.perf_counter()
            df.sparkSession.sql(QUERY.replace("FROM t", "FROM f")).collect()
            times[name].append(time.perf_counter() - start)
    ratios = [c / k for c, k in zip(times["connect"], times["classic"])]
    return {"classic_median_s": round(statistics.median(times["classic"]), 3),
            "connect_median_s": round(statistics.median(times["connect"]), 3),
            "ratio": round(statistics.median(ratios), 2), "ratios": [round(r, 2) for r in ratios]}


def bench_latency(spark, uri: str, seconds: float, checkpoint: str, trigger_ms: int) -> dict:
    """A producer writes a one-row batch every 50 ms into a push table read by a readStream."""
    schema = pa.schema([("n", pa.int64()), ("sent", pa.float64())])
    client = Client(uri, timeout=30)
    name = f"latency_{os.path.basename(checkpoint).replace('-', '_')}"
    client.register(name, schema, capacity=64)
    df = spark.readStream.format("flight-paimon").option("uri", uri).option("push", name).load()
    with client.sink(name) as producer:
        sent = 0

        def send_for(secs: float) -> list[int]:
            nonlocal sent
            first, end = sent, time.monotonic() + secs
            while time.monotonic() < end:
                producer.write(pa.record_batch([pa.array([sent]), pa.array([time.time()])], schema=schema))
                sent += 1
                time.sleep(0.05)
            return list(range(first, sent))

        result = _latency(df, f"{checkpoint}-push", trigger_ms, seconds, send_for)
    client.close()
    return result


def bench_latency_baseline(spark, seconds: float, checkpoint: str, trigger_ms: int) -> dict:
    """The same foreachBatch and trigger over a Python streaming source with no logic at all
    (scripts/clock_source.py: one row every 50 ms, timed by the clock): Spark's own floor."""
    from scripts.clock_source import RATE, ClockSource

    spark.dataSource.register(ClockSource)
    df = spark.readStream.format("bench-clock").load()

    def rows_for(secs: float) -> list[int]:
        first = int(time.time() * RATE)
        time.sleep(secs)
        return list(range(first, int(time.time() * RATE)))

    return _latency(df, f"{checkpoint}-clock", trigger_ms, seconds, rows_for)


def _latency(df, checkpoint: str, trigger_ms: int, seconds: float, rows_for) -> dict:
    """Run `df` (n, sent) through foreachBatch; `rows_for(secs)` makes rows for that long and
    returns their n. A row is seen once its micro-batch has collected it. The first micro-batches
    with data start Python workers and load the reader (seconds): 5 s of rows warm up first and
    are not counted."""
    seen: dict[int, float] = {}

    def sink(batch, batch_id):
        rows = batch.select("n", "sent").collect()
        now = time.time()
        seen.update((r.n, now - r.sent) for r in rows)

    def wait_seen(ns: list[int]) -> None:
        deadline = time.monotonic() + 60
        while any(n not in seen for n in ns) and time.monotonic() < deadline:
            time.sleep(0.05)

    query = (df.writeStream.foreachBatch(sink).trigger(processingTime=f"{trigger_ms} milliseconds")
             .option("checkpointLocation", checkpoint).start())
    try:
        wait_seen(rows_for(5))
        measured = rows_for(seconds)
        wait_seen(measured)
    finally:
        query.stop()
    ms = sorted(seen[n] * 1000 for n in measured if n in seen)
    return {"trigger_ms": trigger_ms, "rows_sent": len(measured), "rows_seen": len(ms),
            "p50_ms": round(ms[len(ms) // 2], 1), "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 1),
            "max_ms": round(ms[-1], 1)}


def _by_trigger(rows: list[dict]) -> list[dict]:
    """One row per trigger: the median p50 and p99 of its rounds, the rows of them all."""
    out = []
    for trigger in sorted({r["trigger_ms"] for r in rows}):
        mine = [r for r in rows if r["trigger_ms"] == trigger]
        out.append({"trigger_ms": trigger, "rounds": len(mine), "rows_sent": sum(r["rows_sent"] for r in mine),
                    "rows_seen": sum(r["rows_seen"] for r in mine),
                    "p50_ms": statistics.median(r["p50_ms"] for r in mine),
                    "p99_ms": statistics.median(r["p99_ms"] for r in mine), "max_ms": max(r["max_ms"] for r in mine)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-s", type=float, default=20.0)
    parser.add_argument("--latency-rounds", type=int, default=2, help="rounds per trigger, alternating sources")
    parser.add_argument("--selective-rows", type=int, default=2_000_000)
    parser.add_argument("--only", default="scan,connect,latency,selective", help="sections to run, comma-separated")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    only = set(args.only.split(","))

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    from scripts.local_connect import connect_session
    from spark_reader import register

    spark = (SparkSession.builder.master("local[2]").appName("bench-spark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        metrics_port = free_port()
        proc, uri = start_server(f"{tmp}/warehouse", metrics_port)
        results = {}
        try:
            if "selective" in only:
                results["selective"] = bench_selective(spark, uri, f"http://127.0.0.1:{metrics_port}/metrics",
                                                       f"{tmp}/warehouse", args.selective_rows, args.runs)
                print(json.dumps(results["selective"]), flush=True)
            if only & {"scan", "connect"}:
                results["scan"] = bench_scan(spark, uri, f"{tmp}/warehouse", args.rows, args.runs)
                print(json.dumps(results["scan"]), flush=True)
            if "connect" in only:
                with connect_session(spark) as connect:
                    results["connect"] = bench_connect(spark, connect, uri, "bench.orders", args.runs)
                print(json.dumps(results["connect"]), flush=True)
            # rounds alternate between the push source and the no-logic clock source
            results["latency"], results["latency_baseline"] = [], []
            for ms in ((0, 200) if "latency" in only else ()):
                for r in range(args.latency_rounds):
                    results["latency"].append(bench_latency(spark, uri, args.latency_s, f"{tmp}/l{ms}-{r}", ms))
                    results["latency_baseline"].append(bench_latency_baseline(spark, args.latency_s,
                                                                              f"{tmp}/l{ms}-{r}", ms))
                    print(json.dumps(results["latency"][-1]), json.dumps(results["latency_baseline"][-1]), flush=True)
            results["latency"] = _by_trigger(results["latency"])
            results["latency_baseline"] = _by_trigger(results["latency_baseline"])
        finally:
            proc.kill()
            proc.wait(10)
            spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
