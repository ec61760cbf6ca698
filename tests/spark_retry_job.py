"""A Spark job in its own process (spark.task.maxFailures 2: `local[2,2]`) whose tasks fail on
their first attempt, for tests/test_spark_push_streams.py. Prints one JSON line with its results.

    python -m tests.spark_retry_job URI READ_TABLE WRITE_TABLE
"""

from __future__ import annotations

import json
import os
import sys


def fail_first_attempt(batches):
    """A pass-through that raises in every task's first attempt after its first batch."""
    from pyspark import TaskContext

    attempt = TaskContext.get().attemptNumber()
    for i, batch in enumerate(batches):
        if attempt == 0 and i == 1:
            raise RuntimeError("injected failure of the first attempt")
        yield batch


def main(uri: str, read_table: str, write_table: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from spark_reader import register

    spark = (SparkSession.builder.master("local[2,2]").appName("flight-paimon-retry")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
             .config("spark.python.authenticate.socketTimeout", "300s")  # Python workers start slowly under load
             .getOrCreate())
    register(spark)
    out: dict = {}
    try:
        df = spark.read.format("flight-paimon").option("uri", uri).option("push", read_table).load()
        got = df.mapInArrow(fail_first_attempt, df.schema).select("id").collect()
        out["read_ids"] = [r.id for r in got]
        out["read_again_ids"] = [r.id for r in df.select("id").collect()]
        src = spark.range(0, 1000, numPartitions=2).selectExpr("id", "concat('r', id) AS name")
        try:
            (src.mapInArrow(fail_first_attempt, src.schema).write.format("flight-paimon")
             .option("uri", uri).option("push", write_table).mode("append").save())
            out["write_error"] = None
        except Exception as e:  # noqa: BLE001 - reported to the test, which asserts on it
            out["write_error"] = str(e)
    finally:
        spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
