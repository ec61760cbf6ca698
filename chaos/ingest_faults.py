"""Durable writes into Paimon tables: producers killed, stopped, timed out, ending badly.

A named producer is restarted after the fault and finishes: the table must then hold every batch
exactly once, whole. An unnamed producer is at-least-once: every batch acked before the kill
must be in the table. Named producers in one process also live through repeated server SIGKILLs
(a restart on the same port after each): every batch exactly once."""

from __future__ import annotations

import collections
import threading
import uuid

import pyarrow as pa
from pypaimon import CatalogFactory

from chaos.harness import Context, Run, hang, scenario, wrong_error
from producers import Client
from producers.examples.events import SCHEMA, batch

BATCHES, ROWS = 30, 500


def table_batches(warehouse: str, table: str) -> tuple[collections.Counter, list[str]]:
    """(rows per (producer, seq) in the table, problems: a batch held partly or twice)."""
    t = CatalogFactory.create({"warehouse": warehouse}).get_table(table)
    rb = t.new_read_builder()
    data: pa.Table = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    held = collections.Counter(zip(data.column("producer").to_pylist(), data.column("seq").to_pylist()))
    return held, [f"{k}: {n} rows" for k, n in held.items() if n % ROWS]


def named_batches_held(warehouse: str, table: str, producers: int, batches: int, rows: int = ROWS):
    """(held, lost rows, duplicated rows) of named producers p0..p{producers-1}, each of which sent
    seqs 0..batches-1 of `rows` rows; a batch held partly is a wrong error."""
    held, _ = table_batches(warehouse, table)
    partial = [f"{k}: {n} rows" for k, n in held.items() if n % rows]
    if partial:
        raise wrong_error(f"batches held partly: {partial[:5]}")
    lost = sum(rows for i in range(producers) for s in range(batches) if held[(f"p{i}", s)] == 0)
    duplicated = sum(n - rows for n in held.values() if n > rows)
    return held, lost, duplicated


def producer(ctx: Context, uri: str, table: str, name: str | None, *args: str, batches: int = BATCHES):
    named = ["--producer", name] if name else []
    return ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--batches", str(batches), "--rows", str(ROWS),
                      "--rate", "40", *named, *args)


def new_table(client: Client) -> str:
    table = f"db.t{uuid.uuid4().hex[:8]}"
    client.create_table(table, SCHEMA)
    return table


def _named(ctx: Context, how: str) -> Run:
    uri, name = ctx.server().uri, "p1"
    client = Client(uri, timeout=10)
    try:
        table = new_table(client)
        extra: list[str] = []
        batches = BATCHES
        if how == "deadline":
            extra = ["--deadline", f"{ctx.rnd.uniform(0.5, 1.2):.3f}"]
        elif how in ("plain-close", "error"):
            batches = ctx.rnd.randint(1, BATCHES)
            extra = ["--end", how]
        proc = producer(ctx, uri, table, name, *extra, batches=batches)
        ctx.fault(proc, how, 0.5, 1.5)
        ctx.exited(proc, "the producer")
        again = producer(ctx, uri, table, name)  # the restarted producer finishes the job
        if ctx.exited(again, "the restarted producer", timeout=30) != 0:
            raise wrong_error(f"the restarted producer failed: {again.stderr.read()[-300:]}")
        held, partial = table_batches(ctx.warehouse(), table)
        if partial:
            raise wrong_error(f"batches held partly: {partial[:5]}")
        lost = sum(ROWS for s in range(BATCHES) if held[(name, s)] == 0)
        duplicated = sum(n - ROWS for n in held.values() if n > ROWS)
        return Run(detail=f"{len(held)} batches", lost=lost, duplicated=duplicated)
    finally:
        client.close()


for _how, _what in [("sigkill", "SIGKILL at a random moment"), ("sigstop", "SIGSTOP, then SIGKILL"),
                    ("deadline", "its call deadline passes mid-stream"),
                    ("plain-close", "half-closes without the end marker"),
                    ("error", "fails in-band after a random number of batches")]:
    scenario("producer", f"durable, named: {_what}", "restarted, the producer finishes: every batch in the "
             "table exactly once and whole (exactly-once)", full=10)(lambda ctx, h=_how: _named(ctx, h))


@scenario("producer", "durable, unnamed: SIGKILL at a random moment", "every batch acked before the kill is in "
          "the table, whole (at-least-once: an unacked batch may or may not be)", full=10)
def _unnamed(ctx: Context) -> Run:
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    try:
        table = new_table(client)
        proc = producer(ctx, uri, table, None)
        ctx.fault(proc, "sigkill", 0.5, 1.5)
        ctx.exited(proc, "the producer")
        lines = proc.stdout.read().split()
        acked = max([int(lines[i + 1]) for i, w in enumerate(lines) if w == "acked"], default=0)
        held, partial = table_batches(ctx.warehouse(), table)
        if partial:
            raise wrong_error(f"batches held partly: {partial[:5]}")
        lost = sum(ROWS for s in range(acked) if held[("anonymous", s)] == 0)
        return Run(detail=f"{acked} acked, {len(held)} held", lost=lost,
                   duplicated=sum(n - ROWS for n in held.values() if n > ROWS))
    finally:
        client.close()


SERVER_KILLS_SHORT, SERVER_KILLS_FULL = 5, 20


@scenario("server", "4 named producers in-process through repeated server SIGKILLs (CI: 5 a run, full: 20), "
          "restarted on the same port", "each producer's sink reconnects, asks producer_state and resends only what "
          "the table lacks: every batch exactly once and whole, producer_state each producer's last seq, a reconnect "
          "per kill", short=1, full=3)
def _server_kills(ctx: Context) -> Run:
    """The server SIGKILLed at random points (after a random number of further acks, the producers
    live) and restarted on the same port with a 50 ms commit interval; each producer keeps two
    batches unacked, so the pushing is paced by commits and kills land mid-stream."""
    kills = SERVER_KILLS_SHORT if ctx.short else SERVER_KILLS_FULL
    per_producer, rows = 100, 200
    port = ctx.free_port()
    server = ctx.own_server("--commit-interval-ms", "50", port=port)
    client = Client(server.uri, timeout=10)
    table = new_table(client)
    sinks = [client.paimon_sink(table, producer=f"p{i}", reconnect_timeout=60, max_unacked=2) for i in range(4)]
    errors: list[BaseException] = []

    def produce(i: int) -> None:
        try:
            for seq in range(per_producer):
                sinks[i].write(batch(f"p{i}", seq, rows))
            sinks[i].close()
        except BaseException as e:  # noqa: BLE001 - a producer's failure is the run's wrong error
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    for kill in range(kills):
        target = sum(s.acked for s in sinks) + ctx.rnd.randint(1, 12)
        ctx.wait_for(lambda: sum(s.acked for s in sinks) >= target or errors, f"acks before kill {kill}", timeout=60)
        if errors:
            raise wrong_error(f"a producer failed before kill {kill}: {errors[0]!r}")
        if not any(t.is_alive() for t in threads):
            raise wrong_error(f"the producers finished before kill {kill}: the kills did not land mid-stream")
        ctx.kill(server.proc)
        ctx.exited(server.proc, "the SIGKILLed server")
        server = ctx.own_server("--commit-interval-ms", "50", port=port)
    for t in threads:
        t.join(120)
    if errors:
        raise wrong_error(f"a producer failed: {errors[0]!r}")
    if any(t.is_alive() for t in threads):
        raise hang("a producer still writing 120 s after the last kill")
    states = [client.producer_state(table, f"p{i}") for i in range(4)]
    client.close()
    if states != [per_producer - 1] * 4:
        raise wrong_error(f"producer_state {states}, not each producer's last seq {per_producer - 1}")
    reconnects = sum(s.reconnects for s in sinks)
    if reconnects < kills:
        raise wrong_error(f"{reconnects} reconnects for {kills} kills: the producers did not see the kills")
    _, lost, duplicated = named_batches_held(ctx.warehouse(), table, 4, per_producer, rows)
    return Run(detail=f"{kills} kills, {reconnects} reconnects", lost=lost, duplicated=duplicated)
