"""df.write.format("flight-paimon"): each Spark task pushes its rows into a push-table partition."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from spark_reader.flight_io import SourceError
from spark_reader.options import Options


@dataclass
class PushedRows(WriterCommitMessage):
    """What one task pushed: its partition and how many rows and batches the server accepted."""

    partition: int
    rows: int
    batches: int


class PushWriter(DataSourceArrowWriter):
    """One TableSink per task into partition (task partition id mod the table's partitions).

    Each task is one writer stream of its partition: register the push table with `writers`
    equal to the tasks per partition, or the partition reaches EOF before the last task ends.
    A task that fails fails its partition in-band, so readers get the cause, not a short stream.
    """

    def __init__(self, opts: Options, schema: pa.Schema, partitions: int):
        self.opts = opts
        self.schema = schema  # the push table's registered schema, nullability included
        self.partitions = partitions

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PushedRows:
        from producers import Client  # imported in the task: the executor's own client

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        partition = task % self.partitions
        names = self.schema.names
        rows = batches = 0
        client = Client(self.opts.uri, timeout=self.opts.timeout, credentials=self.opts.credentials)
        try:
            with client.sink(self.opts.push, partition) as sink:
                for batch in iterator:
                    if batch.num_rows:
                        sink.write(batch.select(names).cast(self.schema))
                        rows += batch.num_rows
                        batches += 1
        except Exception as e:
            raise SourceError(
                f"Spark task {task} could not push into {self.opts.target} partition {partition} "
                f"at {self.opts.uri}: {e}"
            ) from e
        finally:
            client.close()
        return PushedRows(partition, rows, batches)

    def commit(self, messages: list) -> None:
        """Nothing to do: each task's stream ended cleanly, and the server already holds its rows."""

    def abort(self, messages: list) -> None:
        """Nothing to undo: a failed task has already failed its partition in-band."""
