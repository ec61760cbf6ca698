"""df.write / df.writeStream into a Paimon table: one atomic commit per job (per epoch), as
Paimon's own Spark writer makes it.

Each task stages its rows on the server (do_put `{"write", "stage", "attempt"}`): written, not
committed, named by its attempt. The driver's `commit` then commits the successful attempts in one
snapshot (`commit_staged`), and the server discards the stage's other attempts (failed and
speculative ones); `abort` discards them all (`abort_staged`). So a job's rows land whole or not
at all, whatever Spark retried or in what order a retry yielded its rows:
- batch (`df.write`): the stage is a job id made on the driver that says when the job began
  (`names.job_stage`). A commit whose answer is lost (UNAVAILABLE, a deadline, a reset
  connection; the server killed as the snapshot landed) is asked again until the server answers
  for certain, for up to COMMIT_RETRY_S: the snapshot that holds the stage (its properties name
  it, so a restarted server finds it), "nothing was committed" only when the server can prove it,
  or "the outcome is unknown". So Spark reports what happened, and never a second snapshot.
- stream (`df.writeStream`): the stage is `<query id>-<batch id>`; its commit names producer
  `spark-<query id>` (the query id survives restarts from the checkpoint) with the micro-batch id
  as the seq, so a micro-batch Spark replays after a restart commits nothing.
"""

from __future__ import annotations

import logging
import time
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

from flight_server.wire import names
from flight_server.wire.errors import (
    Cancelled,
    TimedOut,
    Unavailable,
    error_message,
    from_flight,
)
from flight_server.wire.schemas import by_name_columns, loosened
from spark_reader.flight_io import SourceError, call, connect
from spark_reader.options import Options

log = logging.getLogger(__name__)  # runs on Spark's driver: Spark's application configures logging

QUERY_ID, BATCH_ID = "sql.streaming.queryId", "streaming.sql.batchId"  # Spark's task-local properties
COMMIT_RETRY_S = 300.0  # how long a commit whose answer was lost is asked again (a server restarting)
LOST = (Unavailable, TimedOut, Cancelled)  # a call whose answer never came: it may or may not have run


@dataclass
class StagedRows(WriterCommitMessage):
    """What one task attempt staged: its stage, attempt id, rows and batches."""

    stage: str
    attempt: str
    rows: int
    batches: int


def task_property(context, key: str) -> str:
    value = context.getLocalProperty(key) if context is not None else None
    if not value:
        raise SourceError(f"Spark did not set the task property {key!r}; a streaming write needs it.")
    return value


def stage_task(opts: Options, schema: pa.Schema, stage: str, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
    """Stage this task attempt's batches (the executor's own client)."""
    context = TaskContext.get()
    # taskAttemptId is unique in the application: a resubmitted stage's attempts start at 0 again
    attempt = f"{context.partitionId()}-{context.taskAttemptId()}" if context is not None else "0-0"
    target = loosened(schema)
    counted = {"rows": 0, "batches": 0}

    def batches():
        for batch in iterator:
            if batch.num_rows:
                counted["rows"] += batch.num_rows
                counted["batches"] += 1
                yield pa.RecordBatch.from_arrays(by_name_columns(batch, target), schema=target)  # null: a missing column

    client = connect(opts)
    try:
        call(opts, "staged write", client.stage, opts.table, stage, attempt, target, batches(), None,
             opts.merge_schema)
    except SourceError as e:
        raise SourceError(f"Spark could not stage attempt {attempt} of {opts.target} at {opts.uri}: {e}") from None
    finally:
        client.close()
    return StagedRows(stage, attempt, counted["rows"], counted["batches"])


def commit_stage(opts: Options, stage: str, messages: list, producer: str | None, seq: int | None,
                 retry_s: float = COMMIT_RETRY_S) -> None:
    """The driver: the attempts Spark kept, committed in one snapshot (the stage's others discarded).
    A commit whose answer was lost is asked again (commit_staged answers a retry of a commit that
    landed with its snapshot) until the server answers for certain, or `retry_s` passed."""
    attempts = [m.attempt for m in messages if isinstance(m, StagedRows)]
    if not attempts:
        abort_stage(opts, stage)
        return
    deadline, delay, tries = time.monotonic() + retry_s, 0.2, 0
    while True:
        tries += 1
        client = connect(opts)
        try:
            client.commit_staged(opts.table, stage, attempts, producer, seq)
            return
        except (flight.FlightError, pa.ArrowException, KeyError) as e:
            if not isinstance(from_flight(e), LOST) or time.monotonic() + delay > deadline:
                if tries > 1:  # the first answers were lost: say so, as the outcome may be unknown
                    log.warning("commit_staged of stage %s gave up after %d tries: %s", stage, tries, error_message(e))
                call(opts, names.COMMIT_STAGED, _raise, e)
            log.warning("commit_staged of stage %s: the answer was lost (%s); asking again in %.1f s", stage,
                        error_message(e), delay)
        finally:
            client.close()
        time.sleep(delay)  # a server restarting: nothing to wait on but time
        delay = min(delay * 2, 5.0)


def _raise(e: BaseException):
    raise e


def abort_stage(opts: Options, stage: str) -> None:
    client = connect(opts)
    try:
        call(opts, names.ABORT_STAGED, client.abort_staged, opts.table, stage)
    finally:
        client.close()


class PaimonBatchWriter(DataSourceArrowWriter):
    """`df.write.format("flight-paimon").option("table", "db.t").mode("append").save()`: one snapshot."""

    def __init__(self, opts: Options, schema: pa.Schema):
        self.opts, self.schema = opts, schema
        # made once on the driver (every attempt of every task shares it), saying when the job began
        self.job = names.job_stage(int(time.time() * 1000), uuid.uuid4().hex[:16])

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        return stage_task(self.opts, self.schema, self.job, iterator)

    def commit(self, messages: list) -> None:
        # No producer: a job runs once (a producer per job would stay in the table's map for ever);
        # a commit retried after a lost answer gets the same answer from the server, which finds
        # the stage in its snapshot's properties after a restart too.
        commit_stage(self.opts, self.job, messages, None, None)

    def abort(self, messages: list) -> None:
        abort_stage(self.opts, self.job)


class PaimonStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("flight-paimon").option("table", "db.t")`: one snapshot per micro-batch,
    the micro-batch id its producer seq."""

    def __init__(self, opts: Options, schema: pa.Schema):
        self.opts, self.schema = opts, schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        context = TaskContext.get()
        stage = f"{task_property(context, QUERY_ID)}-{task_property(context, BATCH_ID)}"
        return stage_task(self.opts, self.schema, stage, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        staged = [m for m in messages if isinstance(m, StagedRows)]
        if staged:
            query = staged[0].stage[: -len(f"-{batchId}")]
            commit_stage(self.opts, staged[0].stage, staged, f"spark-{query}", batchId)

    def abort(self, messages: list, batchId: int) -> None:
        for stage in {m.stage for m in messages if isinstance(m, StagedRows)}:
            abort_stage(self.opts, stage)
