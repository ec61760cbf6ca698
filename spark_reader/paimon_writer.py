"""df.write / df.writeStream into a Paimon table through the server's durable writes.

Each Spark task writes as a named producer, so a retried or replayed task is not written twice:
- batch (`df.write`): producer `spark-<job uuid>-<partition>`, seq = the Arrow batch's index in
  the task; a retried attempt skips the batches the table already holds (`last_seq`).
- stream (`df.writeStream`): producer `spark-<query id>-<partition>` (the query id survives
  restarts from the checkpoint), and the micro-batch id is the seq: each task sends its
  micro-batch as one batch, and a micro-batch Spark replays after a restart is skipped.
A task's rows are committed (durable, visible) when its `write` returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from flight_server.wire.schemas import loosened
from spark_reader.flight_io import SourceError
from spark_reader.options import Options

QUERY_ID, BATCH_ID = "sql.streaming.queryId", "streaming.sql.batchId"  # Spark's task-local properties


@dataclass
class CommittedRows(WriterCommitMessage):
    """What one task committed: its producer, rows and batches written, the table's last seq."""

    producer: str
    rows: int
    batches: int
    last_seq: int | None
    snapshot: int | None


def task_property(context, key: str) -> str:
    value = context.getLocalProperty(key) if context is not None else None
    if not value:
        raise SourceError(f"Spark did not set the task property {key!r}; a streaming write needs it.")
    return value


class _TaskWriter:
    """One task's sink into the table (the executor's own client)."""

    def __init__(self, opts: Options, schema: pa.Schema, producer: str):
        from producers import Client

        self.opts, self.producer = opts, producer
        self.target = loosened(schema)
        self.client = Client(opts.uri, timeout=opts.timeout, credentials=opts.credentials)
        self.sink = self.client.paimon_sink(opts.table, producer=producer)

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.select(self.target.names).cast(self.target)

    def finish(self, rows: int, batches: int) -> CommittedRows:
        try:
            self.sink.close()
        finally:
            self.client.close()
        return CommittedRows(self.producer, rows, batches, self.sink.last_seq, self.sink.last_snapshot)

    def fail(self, error: BaseException) -> SourceError:
        self.sink.fail(error)
        self.client.close()
        return SourceError(f"Spark could not write into {self.opts.target} at {self.opts.uri} as producer "
                           f"{self.producer!r}: {error}")


class PaimonBatchWriter(DataSourceArrowWriter):
    """`df.write.format("flight-paimon").option("table", "db.t").mode("append").save()`."""

    def __init__(self, opts: Options, schema: pa.Schema):
        self.opts, self.schema = opts, schema
        self.job = uuid.uuid4().hex[:16]  # made once on the driver: every attempt of a task shares it

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommittedRows:
        context = TaskContext.get()
        task = _TaskWriter(self.opts, self.schema, f"spark-{self.job}-{context.partitionId() if context else 0}")
        held = task.sink.last_seq if task.sink.last_seq is not None else -1  # an earlier attempt's commits
        rows = batches = 0
        try:
            for seq, batch in enumerate(b for b in iterator if b.num_rows):
                if seq > held:
                    task.sink.write(task.conform(batch), seq=seq)
                    rows += batch.num_rows
                    batches += 1
        except Exception as e:
            raise task.fail(e) from e
        return task.finish(rows, batches)

    def commit(self, messages: list) -> None:
        """Nothing to do: every task's batches were committed before its write returned."""

    def abort(self, messages: list) -> None:
        """Nothing to undo here: a failed task's committed batches stay (a retry skips them)."""


class PaimonStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("flight-paimon").option("table", "db.t")`: the micro-batch id is the seq."""

    def __init__(self, opts: Options, schema: pa.Schema):
        self.opts, self.schema = opts, schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommittedRows:
        context = TaskContext.get()
        batch_id = int(task_property(context, BATCH_ID))
        producer = f"spark-{task_property(context, QUERY_ID)}-{context.partitionId()}"
        task = _TaskWriter(self.opts, self.schema, producer)
        try:
            if task.sink.last_seq is not None and batch_id <= task.sink.last_seq:
                rows = batches = 0  # a micro-batch replayed after a restart: the table holds it
            else:
                parts = [task.conform(b) for b in iterator if b.num_rows]
                rows, batches = sum(b.num_rows for b in parts), 1 if parts else 0
                if parts:  # the whole micro-batch of this task as one batch, one seq
                    combined = pa.Table.from_batches(parts, schema=task.target).combine_chunks()
                    task.sink.write(combined.to_batches(max_chunksize=combined.num_rows)[0], seq=batch_id)
        except Exception as e:
            raise task.fail(e) from e
        return task.finish(rows, batches)

    def commit(self, messages: list, batchId: int) -> None:
        """Nothing to do: the tasks' rows were committed before their writes returned."""

    def abort(self, messages: list, batchId: int) -> None:
        """Nothing to undo: a replay of the micro-batch skips what the table holds."""
