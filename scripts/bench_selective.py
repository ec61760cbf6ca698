"""Selective reads (scripts/bench_spark.py --only selective): flight-paimon vs spark.read.parquet of
the same files, on a 10-partition append table, with spark.sql.python.filterPushdown.enabled.

Three queries, each read through flight-paimon (a fresh load() per run, as a query is written),
with spark.read.parquet, and with a Python data source with no logic at all over the same files
(scripts/parquet_source.py: one Spark partition per file, pyarrow's batches as they are, files
dropped by their p=... directory for `p = 3`; also a fresh load() per run), rounds alternating
flight, parquet, no-logic; ratio = the median of the rounds' flight / parquet, nologic_ratio of
no-logic / parquet, flight_over_nologic of flight / no-logic:
- one partition: `WHERE p = 3`, count and sum(x); parquet reads that partition's directory;
- sum(x) over the table; parquet reads only column x, flight-paimon and the no-logic source every
  column (a PySpark 4.3 Python source is not told the columns a query needs);
- a full scan into Spark's noop sink.
Bytes: what the server sent for the one-partition query against the full scan (its /metrics).
"""

from __future__ import annotations

import glob
import socket
import statistics
import time
import urllib.request

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from scripts.parquet_source import ParquetSource, data_files

PARTS = 10
SCHEMA = pa.schema([("p", pa.int32()), ("id", pa.int64()), ("x", pa.int64()), ("name", pa.string())])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_parts(warehouse: str, rows: int, commits: int = 2) -> str:
    from pypaimon import CatalogFactory, Schema

    from tests.paimon_tables import commit_arrow

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("bench", True)
    catalog.create_table("bench.parts", Schema.from_pyarrow_schema(SCHEMA, partition_keys=["p"],
                                                                   options={"bucket": "-1"}), False)
    table = catalog.get_table("bench.parts")
    per = rows // commits // PARTS * PARTS
    for c in range(commits):
        ids = pa.array(range(c * per, (c + 1) * per), pa.int64())
        commit_arrow(table, pa.table({
            "p": pc.cast(pc.divide(pc.subtract(ids, c * per), per // PARTS), pa.int32()),  # 0..9
            "id": ids, "x": pc.bit_wise_and(ids, 1023),
            "name": pc.binary_join_element_wise("n", pc.cast(ids, pa.string()), ""),
        }, schema=SCHEMA))
    return "bench.parts"


def served_bytes(metrics_url: str, table: str) -> float:
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    for line in text.splitlines():
        if (line.startswith("flight_paimon_table_bytes_total{") and 'direction="out"' in line
                and 'kind="paimon"' in line and f'table="{table}"' in line):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def bench_selective(spark, uri: str, metrics_url: str, warehouse: str, rows: int, runs: int) -> dict:
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    table = write_parts(warehouse, rows)
    root = f"{warehouse}/bench.db/parts"
    files = sorted(glob.glob(f"{root}/**/*.parquet", recursive=True))
    part3 = sorted(glob.glob(f"{root}/p=3/**/*.parquet", recursive=True))

    def flight():
        return spark.read.format("flight-paimon").option("uri", uri).option("table", table) \
            .option("read.filter-pushdown", "true").load()

    spark.dataSource.register(ParquetSource)
    assert data_files(root) == files, "the no-logic source reads other files"

    def nologic():
        return spark.read.format("bench-parquet").option("path", root).load()

    def noop(df):
        return df.write.format("noop").mode("overwrite").save()

    queries = {
        "one_partition": (lambda: flight().where("p = 3").agg(F.count("*"), F.sum("x")).collect(),
                          lambda: spark.read.parquet(*part3).agg(F.count("*"), F.sum("x")).collect(),
                          lambda: nologic().where("p = 3").agg(F.count("*"), F.sum("x")).collect()),
        "sum_x": (lambda: flight().agg(F.sum("x")).collect(),
                  lambda: spark.read.parquet(*files).agg(F.sum("x")).collect(),
                  lambda: nologic().agg(F.sum("x")).collect()),
        "full_scan": (lambda: noop(flight()), lambda: noop(spark.read.parquet(*files)), lambda: noop(nologic())),
    }
    out: dict = {"rows": rows, "partitions": PARTS, "data_files": len(files),
                 "row_groups": sum(pq.ParquetFile(f).metadata.num_row_groups for f in files),
                 "spark_partitions": {"flight": flight().rdd.getNumPartitions(),
                                      "parquet": spark.read.parquet(*files).rdd.getNumPartitions(),
                                      "parquet_one_partition": spark.read.parquet(*part3).rdd.getNumPartitions(),
                                      "nologic": nologic().rdd.getNumPartitions(),
                                      "nologic_one_partition": nologic().where("p = 3").rdd.getNumPartitions()}}
    for name, contenders in queries.items():
        if name != "full_scan":
            answers = [[tuple(r) for r in q()] for q in contenders]
            assert answers[0] == answers[1] == answers[2], f"{name}: the reads disagree: {answers}"
        else:  # warm-up
            for q in contenders:
                q()
        f_s, p_s, n_s = [], [], []
        for _ in range(runs):
            for q, times in zip(contenders, (f_s, p_s, n_s)):
                start = time.perf_counter()
                q()
                times.append(time.perf_counter() - start)

        def median_ratio(a, b):
            ratios = [x / y for x, y in zip(a, b)]
            return round(statistics.median(ratios), 2), [round(r, 2) for r in ratios]

        out[name] = {"flight_median_s": round(statistics.median(f_s), 3),
                     "parquet_median_s": round(statistics.median(p_s), 3),
                     "nologic_median_s": round(statistics.median(n_s), 3)}
        out[name]["ratio"], out[name]["ratios"] = median_ratio(f_s, p_s)
        out[name]["nologic_ratio"], out[name]["nologic_ratios"] = median_ratio(n_s, p_s)
        out[name]["flight_over_nologic"], out[name]["flight_over_nologic_ratios"] = median_ratio(f_s, n_s)
    before = served_bytes(metrics_url, table)
    queries["one_partition"][0]()
    one = served_bytes(metrics_url, table) - before
    queries["full_scan"][0]()
    full = served_bytes(metrics_url, table) - before - one
    out["bytes"] = {"one_partition": int(one), "full_scan": int(full), "fraction": round(one / full, 3)}
    return out
