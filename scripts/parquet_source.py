"""A batch Python data source with no logic at all, for scripts/bench_selective.py: the Parquet
files under a directory, one Spark partition per file, each read with pyarrow.parquet and handed
to Spark as the file's own pyarrow RecordBatches (the fastest path PySpark 4.3's API offers: no
tuples). Measured beside flight-paimon and spark.read.parquet on the same files, it is what Spark's
Python data source path costs alone: the floor under any Python source's scan.

    spark.read.format("bench-parquet").option("path", table_dir).load()

What the API lets it skip: EqualTo filters on a directory key (`p = 3` -> `.../p=3/...`, with
spark.sql.python.filterPushdown.enabled) drop the other files; Spark still applies every filter.
Columns cannot be pruned: a PySpark 4.3 reader gets the full schema, not the query's columns."""

from __future__ import annotations

import glob

import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema


def data_files(path: str) -> list[str]:
    return sorted(glob.glob(f"{path}/**/*.parquet", recursive=True))


class ParquetSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench-parquet"

    def schema(self):
        return from_arrow_schema(pq.read_schema(data_files(self.options["path"])[0]))

    def reader(self, schema):
        return ParquetReader(self.options["path"])


class ParquetReader(DataSourceReader):
    def __init__(self, path: str):
        self.path, self.equal = path, []

    def pushFilters(self, filters):
        self.equal = [(".".join(f.attribute), f.value) for f in filters if isinstance(f, EqualTo)]
        return filters  # Spark applies them all: the directories only drop whole files

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(f) for f in data_files(self.path)  # a file not under key=... stays
                if all(f"/{k}=" not in f or f"/{k}={v}/" in f for k, v in self.equal)]

    def read(self, partition):
        yield from pq.ParquetFile(partition.value).read().to_batches()  # no dataset: no hive columns added
