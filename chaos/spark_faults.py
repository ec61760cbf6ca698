"""Spark streaming queries whose driver is SIGKILLed mid-batch and restarted from the checkpoint
(the restart runs Trigger.AvailableNow and stops when caught up): every row once."""

from __future__ import annotations

import collections
import json
import time
import uuid

from chaos.harness import Context, Run, scenario, wrong_error
from chaos.ingest_faults import ROWS, table_batches
from chaos.push_faults import Drain
from producers import Client
from producers.examples.counter import SCHEMA as PUSH_SCHEMA
from producers.examples.events import SCHEMA as EVENTS_SCHEMA

BATCHES = 40
SHORT_BATCHES = 16  # CI's runs: still several micro-batches past the kill (3 snapshots or 20 batches a trigger)
JOB_S = 240  # one driver's limit: Spark starts in ~10-20 s on 2 cores


def job(ctx: Context, uri: str, *args: str):
    return ctx.python("-m", "chaos.spark_job", uri, "--out", str(ctx.dir / "out"), "--checkpoint",
                      str(ctx.dir / "ckpt"), *args)


def kill_mid_batch(ctx: Context, proc) -> None:
    """SIGKILL the driver at a random moment after its first non-empty micro-batch."""
    line = proc.stdout.readline()
    if not line.startswith("batch"):
        raise wrong_error(f"the Spark job did not run a batch: {line!r} {proc.stderr.read()[-400:]}")
    ctx.sleep_random(0.0, 1.5)
    ctx.kill(proc)
    ctx.exited(proc, "the killed driver")


def finish(ctx: Context, uri: str, *args: str) -> None:
    again = job(ctx, uri, *args, "--available-now")
    if ctx.exited(again, "the restarted driver (AvailableNow)", timeout=JOB_S) != 0:
        raise wrong_error(f"the restarted query failed: {again.stderr.read()[-400:]}")


def kill_and_finish(ctx: Context, uri: str, feeder, *job_args: str) -> None:
    """Start the query, SIGKILL its driver mid-batch while `feeder` writes its source, let the
    feeder finish, then restart the query from its checkpoint until it has caught up."""
    kill_mid_batch(ctx, job(ctx, uri, *job_args))
    if ctx.exited(feeder, "the process feeding the source", timeout=60) != 0:
        raise wrong_error(f"the process feeding the source failed: {feeder.stderr.read()[-300:]}")
    finish(ctx, uri, *job_args)


def count(ids, expected: set) -> tuple[int, int]:
    seen = collections.Counter(ids)
    return sum(1 for i in expected if seen[i] == 0), sum(n - 1 for n in seen.values() if n > 1)


def batches(ctx: Context) -> int:
    """Batches a run's feeder writes: fewer in CI's short runs, whose restarted driver then has
    fewer micro-batches to catch up through (each ~1-3 s of Spark)."""
    return SHORT_BATCHES if ctx.short else BATCHES


def _durable_rows(ctx: Context, uri: str, table: str) -> None:
    """Write batches(ctx) batches into a Paimon table through the server, while the query runs."""
    proc = ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", "w", "--batches",
                      str(batches(ctx)), "--rows", str(ROWS), "--rate", "8")
    return proc


@scenario("spark", "readStream of a Paimon table: driver SIGKILLed mid-batch, restarted", "every row once in "
          "the Parquet sink (exactly-once)", short=0, full=3)
def _paimon_source(ctx: Context) -> Run:
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    table = f"db.t{uuid.uuid4().hex[:8]}"
    client.create_table(table, EVENTS_SCHEMA)
    client.close()
    writer = _durable_rows(ctx, uri, table)
    kill_and_finish(ctx, uri, writer, "--read", f"paimon:{table}")
    held, _ = table_batches(ctx.warehouse(), table)
    expected = {s * 1_000_000 + r for (_, s) in held for r in range(ROWS)}
    lost, dup = count(json.load(open(ctx.dir / "ids.json")), expected)
    return Run(detail=f"{len(expected)} rows", lost=lost, duplicated=dup)


@scenario("spark", "readStream of a push table: driver SIGKILLed mid-batch, restarted", "every row once in "
          "the Parquet sink (exactly-once: replay ranges committed after the batch)", short=1, full=3)
def _push_source(ctx: Context) -> Run:
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    table = f"t{uuid.uuid4().hex[:8]}"
    client.register(table, PUSH_SCHEMA, capacity=256)  # the producer never waits for the dead driver
    client.close()
    n = batches(ctx) * 4
    producer = ctx.python("-m", "chaos.producer", uri, f"push:{table}", "--batches", str(n), "--rows", "250",
                          "--rate", "30")
    kill_and_finish(ctx, uri, producer, "--read", f"push:{table}")
    lost, dup = count(json.load(open(ctx.dir / "ids.json")), set(range(n * 250)))
    return Run(detail=f"{n * 250} rows", lost=lost, duplicated=dup)


def _source_and_sink_names(ctx: Context, sink_prefix: str) -> tuple[str, Client, str, str]:
    """A server, a client of it, a fresh Paimon source table created there, and a fresh sink name."""
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    source, sink = f"db.t{uuid.uuid4().hex[:8]}", f"{sink_prefix}{uuid.uuid4().hex[:8]}"
    client.create_table(source, EVENTS_SCHEMA)
    return uri, client, source, sink


@scenario("spark", "writeStream into a push table: driver SIGKILLed mid-batch, restarted", "the push table's "
          "reader gets every row once (named producers, micro-batch id as seq)", short=0, full=3)
def _push_sink(ctx: Context) -> Run:
    uri, client, source, sink = _source_and_sink_names(ctx, "out")
    client.register(sink, EVENTS_SCHEMA, capacity=1024)
    drain = Drain(client, sink)
    writer = _durable_rows(ctx, uri, source)
    kill_and_finish(ctx, uri, writer, "--read", f"paimon:{source}", "--write-push", sink)
    expected = {s * 1_000_000 + r for s in range(batches(ctx)) for r in range(ROWS)}
    ctx.wait_for(lambda: expected <= set(drain.ids), "the push table's reader to get every row", timeout=30)
    time.sleep(1)  # a duplicate would arrive right behind
    drain.reader.cancel()
    lost, dup = count(list(drain.ids), expected)
    client.close()
    return Run(detail=f"{len(expected)} rows", lost=lost, duplicated=dup)


@scenario("spark", "writeStream into a Paimon table: driver SIGKILLed mid-batch, restarted", "the table holds "
          "every row once (each micro-batch staged by its tasks and committed by the driver as one snapshot, the "
          "micro-batch id its seq)", short=1, full=3)
def _paimon_sink(ctx: Context) -> Run:
    uri, client, source, sink = _source_and_sink_names(ctx, "db.out")
    client.create_table(sink, EVENTS_SCHEMA)
    client.close()
    writer = _durable_rows(ctx, uri, source)
    kill_and_finish(ctx, uri, writer, "--read", f"paimon:{source}", "--write-paimon", sink)
    held, partial = table_batches(ctx.warehouse(), sink)
    if partial:
        raise wrong_error(f"batches held partly: {partial[:5]}")
    lost = sum(ROWS for s in range(batches(ctx)) if held[("w", s)] == 0)
    duplicated = sum(n - ROWS for n in held.values() if n > ROWS)
    return Run(detail=f"{sum(held.values())} rows", lost=lost, duplicated=duplicated)
