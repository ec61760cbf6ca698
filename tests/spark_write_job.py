"""A Spark df.write into a Paimon table in its own process (`local[2,4]`: a task may run 4 times),
for tests/test_spark_atomic_writes.py. Prints one JSON line with its result.

    python -m tests.spark_write_job URI TABLE[,TABLE] reorder  # every task fails once part-way; its
                                                               # retry yields its rows in reverse order
                                                               # (a job into each table, one session)
    python -m tests.spark_write_job URI TABLE block     # task 1 waits for ever: the test kills the driver
    python -m tests.spark_write_job URI TABLE plain     # the rows as they are (the test kills the server)
"""

from __future__ import annotations

import json
import os
import sys
import threading

ROWS, PARTITIONS = 30_000, 3


def reorder_on_retry(batches):
    """The first attempt of each task hands Spark two batches, then fails; a retry yields every
    batch in reverse order, each reversed (as a retry after a shuffle may)."""
    from pyspark import TaskContext

    attempt = TaskContext.get().attemptNumber()
    seen = []
    for i, batch in enumerate(batches):
        if attempt == 0:
            if i == 2:
                raise RuntimeError("injected failure of the first attempt, after two batches")
            yield batch
        else:
            seen.append(batch)
    for batch in reversed(seen):
        yield batch.take(list(range(batch.num_rows - 1, -1, -1)))


def block_task_one(batches):
    from pyspark import TaskContext

    if TaskContext.get().partitionId() == 1:
        threading.Event().wait()  # until the driver is killed
    yield from batches


def as_they_are(batches):
    yield from batches


def main(uri: str, table: str, mode: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from spark_reader import register

    spark = (SparkSession.builder.master("local[2,4]").appName("flight-paimon-write-job")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
             .config("spark.python.authenticate.socketTimeout", "300s")  # Python workers start slowly under load
             .getOrCreate())
    register(spark)
    out: dict = {}
    try:
        for name in table.split(","):
            try:
                src = spark.range(0, ROWS, numPartitions=PARTITIONS).selectExpr(
                    "concat('p', cast(id % 3 as string)) AS producer", "id DIV 1000 AS seq", "id")
                fn = {"reorder": reorder_on_retry, "block": block_task_one, "plain": as_they_are}[mode]
                src.mapInArrow(fn, src.schema).write.format("flight-paimon").option("uri", uri) \
                    .option("table", name).mode("append").save()
                out[name] = None
            except Exception as e:  # noqa: BLE001 - reported to the test, which asserts on it
                out[name] = str(e)
    finally:
        spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
