"""df.write / df.writeStream into a push table.

- `df.write`: the job is one writer stream of every partition of the table, however many tasks it
  has. Each task pushes as the named producer `spark-<job>-<task>` (named producers hold no writer
  slot and never end a partition), so no task ends a partition on its own: a task cannot know it
  is the job's last. The driver's `commit()` then ends every partition with one clean writer
  stream (the end marker and no batch); its `abort()` fails every partition still open with an
  error saying the job failed, so a reader gets the job's failure, never a short clean end. A task
  that fails fails its partition in-band with its cause first. A writer stream cannot be taken
  back, so a task Spark runs again (a retry, or a speculative copy) is refused before it writes.
- `df.writeStream`: each task of a micro-batch pushes as the named producer
  `spark-<query id>-<task>` with the micro-batch id as its seq, in one batch: a micro-batch Spark
  replays after a crash or restart adds nothing twice. Named producers never end a partition.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.flight as flight
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from flight_server.wire import messages, names
from flight_server.wire.errors import error_message
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
    """The job's tasks push as named producers into partition (task partition id mod the table's
    partitions); the driver's commit ends every partition, its abort fails them (module docstring)."""

    def __init__(self, opts: Options, schema: pa.Schema, partitions: int):
        self.opts = opts
        self.schema = schema  # the push table's registered schema, nullability included
        self.partitions = partitions
        self.job = uuid.uuid4().hex[:16]  # made once on the driver: every task of the job shares it

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
        client = Client(self.opts.uri, timeout=self.opts.timeout, credentials=self.opts.credentials)
        try:
            rows, batches = _push_task(client, self.opts.push, partition, f"spark-{self.job}-{task}", self.schema,
                                       iterator)
        except Exception as e:
            raise SourceError(
                f"Spark task {task} could not push into {self.opts.target} partition {partition} "
                f"at {self.opts.uri}: {error_message(e)}"
            ) from e
        finally:
            client.close()
        return PushedRows(partition, rows, batches)

    def commit(self, messages: list) -> None:
        """Every task pushed all its rows: end each partition with one clean writer stream."""
        from producers import Client

        client = Client(self.opts.uri, timeout=self.opts.timeout, credentials=self.opts.credentials)
        try:
            for partition in range(self.partitions):
                try:
                    _end_partition(client, self.opts.push, partition, self.schema)
                except Exception as e:
                    raise SourceError(
                        f"The Spark job pushed its rows into {self.opts.target} but could not end partition "
                        f"{partition}: {error_message(e)} A df.write is one writer stream of every partition, "
                        "ended at its commit: register the table with writers=N, N >= the jobs (and other "
                        "producer streams) that write it.") from e
        finally:
            client.close()

    def abort(self, messages: list) -> None:
        """The job failed: fail every partition still open, so its readers get an error, never a
        clean end with the failed job's rows missing (a failed task has already failed its own
        partition with its cause; a partition at EOF ended before this job could end it)."""
        from producers import Client

        reason = ("the Spark job writing it failed (Spark aborted the write; the job's error says why): register a "
                  "new table and run the job again")
        client = Client(self.opts.uri, timeout=self.opts.timeout, credentials=self.opts.credentials)
        try:
            table = client.stats(self.opts.push).push[self.opts.push]
            for partition, stats in sorted(table.partitions.items(), key=lambda kv: int(kv[0])):
                if stats.state == "open":
                    client.fail(self.opts.push, reason, int(partition))
        finally:
            client.close()


def _push_task(client, name: str, partition: int, producer: str, schema: pa.Schema,
               iterator: Iterator[pa.RecordBatch]) -> tuple[int, int]:
    """Push one task's rows as the named `producer`, batch i with seq i, acks read as they come;
    an error while reading the task's rows fails the partition in-band with its cause."""
    descriptor = flight.FlightDescriptor.for_command(json.dumps(names.named_push_command(name, partition, producer)))
    from producers.client import drain_acks  # imported in the task, as the client is

    writer, acks = client.flight.do_put(descriptor, schema, options=client.options(None))
    reader, drained = drain_acks(acks, "push-acks")
    rows = batches = 0
    try:
        for batch in iterator:
            if batch.num_rows:
                writer.write_with_metadata(batch.select(schema.names).cast(schema),
                                           pa.py_buffer(messages.batch_seq(batches)))
                rows += batch.num_rows
                batches += 1
    except BaseException as e:
        try:
            if not drained:  # the task's own failure, not the stream's: the partition's readers get the cause
                writer.write_metadata(pa.py_buffer(messages.producer_error(f"Spark task failed: {error_message(e)}")))
            writer.close()
        except Exception:  # noqa: BLE001 - the stream broke too; the job's abort fails the partition
            pass
        reader.join()
        if drained and isinstance(e, (flight.FlightError, pa.ArrowException)):
            raise drained[0] from e  # the server's sentence, not the write's "stream closed"
        raise
    try:
        writer.write_metadata(pa.py_buffer(messages.end(batches)))
        writer.done_writing()
        reader.join()
    finally:
        writer.close()
        reader.join()
    if drained:
        raise drained[0]
    return rows, batches


def _end_partition(client, name: str, partition: int, schema: pa.Schema) -> None:
    """One writer stream with no batch and its end marker: the partition's clean end once all its
    `writers` have ended."""
    descriptor = flight.FlightDescriptor.for_path(*names.push_path(name, partition))
    writer, acks = client.flight.do_put(descriptor, schema, options=client.options(None))
    try:
        writer.write_metadata(pa.py_buffer(messages.end(0)))
        writer.done_writing()
        while acks.read() is not None:
            pass
    finally:
        writer.close()


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
