"""A streaming Python data source with no logic at all, for scripts/bench_spark.py: row n becomes
available at time (n + 1) / RATE and carries that time as `sent`. Measured beside the push
source with the same foreachBatch and trigger, it is what Spark's micro-batch engine and its
Python data source path cost alone: the floor under any Python source's latency."""

from __future__ import annotations

import time

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

RATE = 20  # rows per second: one every 50 ms, as the benchmark's push producer writes


class ClockSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench-clock"

    def schema(self) -> str:
        return "n bigint, sent double"

    def streamReader(self, schema):
        return ClockReader()


class ClockReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"n": int(time.time() * RATE)}

    def latestOffset(self, start=None, limit=None) -> dict:
        return {"n": int(time.time() * RATE)}  # rows 0 .. n-1 are available by now

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition((start["n"], end["n"]))]

    def read(self, partition):
        first, end = partition.value
        for n in range(first, end):
            yield n, (n + 1) / RATE
