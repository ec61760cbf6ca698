"""df.write / df.writeStream into a push table.

- `df.write`: each Spark task is one writer stream of a partition (the table's `writers` count
  them; the partition ends once all have ended). A writer stream cannot be taken back, so a task
  Spark runs again (a retry, or a speculative copy) is refused before it writes anything.
- `df.writeStream`: each task of a micro-batch pushes as the named producer
  `spark-<query id>-<task>` with the micro-batch id as its seq, in one batch: a micro-batch Spark
  replays after a crash or restart adds nothing twice. Named producers never end a partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from spark_reader.flight_io import SourceError
from spark_reader.options import Options
from spark_reader.paimon_writer import BATCH_ID, QUERY_ID, task_property


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
        if context is not None and context.attemptNumber() > 0:
            raise SourceError(
                f"Spark ran task {task} again (attempt {context.attemptNumber()}: a retry or a speculative copy); "
                f"its rows may already be in {self.opts.target}, whose writer streams cannot be taken back, so it "
                "was refused before writing. Turn spark.speculation off for writes into push tables; after a "
                "failed attempt the partition has already failed with that attempt's cause.")
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


class PushStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("flight-paimon").option("push", NAME)`: idempotent micro-batches."""

    def __init__(self, opts: Options, schema: pa.Schema, partitions: int):
        self.opts = opts
        self.schema = schema
        self.partitions = partitions

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PushedRows:
        from producers import Client

        context = TaskContext.get()
        task = context.partitionId()
        batch_id = int(task_property(context, BATCH_ID))
        producer = f"spark-{task_property(context, QUERY_ID)}-{task}"
        partition = task % self.partitions
        parts = [b.select(self.schema.names).cast(self.schema) for b in iterator if b.num_rows]
        rows = sum(b.num_rows for b in parts)
        if not parts:
            return PushedRows(partition, 0, 0)
        # The task's whole micro-batch as one batch with one seq: a replay of it is all or nothing.
        combined = pa.Table.from_batches(parts, schema=self.schema).combine_chunks().to_batches()[0]
        client = Client(self.opts.uri, timeout=self.opts.timeout, credentials=self.opts.credentials)
        try:
            client.push_named(self.opts.push, partition, producer, [(batch_id, combined)])
        except Exception as e:
            raise SourceError(
                f"Spark task {task} of micro-batch {batch_id} could not push into {self.opts.target} partition "
                f"{partition} at {self.opts.uri}: {e}") from e
        finally:
            client.close()
        return PushedRows(partition, rows, 1)

    def commit(self, messages: list, batchId: int) -> None:
        """Nothing to do: the server holds every task's rows, each once."""

    def abort(self, messages: list, batchId: int) -> None:
        """Nothing to undo: the replay of the micro-batch adds only what the table lacks."""
