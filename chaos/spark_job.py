"""A Spark driver the fault runs SIGKILL mid-batch and restart from its checkpoint.

    python -m chaos.spark_job URI --read paimon:DB.T|push:NAME --out DIR --checkpoint DIR
        [--write-push NAME | --write-paimon DB.T] [--available-now] [--trigger-ms N]

Reads the source as a stream and writes it to Parquet files (Spark's exactly-once file sink) or,
with --write-push or --write-paimon, into a push table or a Paimon table through the server's
durable writes (`writeStream.format("flight-paimon")`). Prints `batch N` as
micro-batches complete. With --available-now it processes what is there and stops; then, for a
Parquet sink, it writes the ids Spark reads back from the sink (through its metadata log) to
DIR/ids.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tests.process import ROOT


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("uri")
    p.add_argument("--read", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--write-push")
    p.add_argument("--write-paimon")
    p.add_argument("--available-now", action="store_true")
    p.add_argument("--trigger-ms", type=int, default=300)
    args = p.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    from spark_reader import register

    spark = (SparkSession.builder.master("local[2]").appName("chaos").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.authenticate.socketTimeout", "300s")  # Python workers start slowly under load
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    kind, name = args.read.split(":", 1)
    reader = spark.readStream.format("flight-paimon").option("uri", args.uri)
    if kind == "paimon":
        reader = reader.option("table", name).option("read.stream.maxSnapshotsPerTrigger", "3")
    else:
        reader = reader.option("push", name).option("maxOffsetsPerTrigger", "20")
    df = reader.load()
    if args.write_push or args.write_paimon:
        target = ("push", args.write_push) if args.write_push else ("table", args.write_paimon)
        writer = (df.select("producer", "seq", "id").writeStream.format("flight-paimon").option("uri", args.uri)
                  .option(*target))
    else:
        writer = df.select("id").writeStream.format("parquet").option("path", args.out)
    writer = writer.option("checkpointLocation", args.checkpoint)
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(
        processingTime=f"{args.trigger_ms} milliseconds")
    query = writer.start()
    seen = -1
    while query.isActive:
        query.awaitTermination(0.2)
        progress = query.lastProgress
        if progress and progress["batchId"] > seen and progress["numInputRows"] > 0:
            seen = progress["batchId"]
            print(f"batch {seen}", flush=True)
    if query.exception() is not None:
        print(f"failed: {query.exception()}", file=sys.stderr, flush=True)
        return 1
    if args.available_now and not (args.write_push or args.write_paimon):
        ids = [r.id for r in spark.read.parquet(args.out).select("id").collect()]
        with open(os.path.join(args.out, "..", "ids.json"), "w") as f:
            json.dump(ids, f)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
