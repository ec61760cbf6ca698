"""The server SIGKILLed or SIGTERMed with 28 open streams of every kind, then restarted on the
same port over the same warehouse:
- 6 named producers writing durably into one Paimon table (they reconnect and resend what the
  table lacks: exactly-once);
- 6 `flight_cli tail --consumer-id` follows of that table (they reconnect by themselves when the
  server is back, within their --reconnect-timeout, and resume where they were: every row printed);
- 8 push-table producers and their 8 draining consumers (push tables are memory: their consumers
  must get an error, never a clean end short).
CI's short run opens 3 of each (15 streams, 12 processes besides the server: each process is ~1-2 s
of CPU to start on 2 cores).
"""

from __future__ import annotations

import collections
import json
import signal
import threading
import uuid

from chaos.harness import HANG_S, Context, Run, scenario, truncation, wrong_error
from chaos.ingest_faults import ROWS as DURABLE_ROWS
from chaos.ingest_faults import named_batches_held
from chaos.push_faults import ROWS as PUSH_ROWS
from chaos.push_faults import consumer_result
from producers import Client
from producers.examples.counter import SCHEMA as PUSH_SCHEMA
from producers.examples.events import SCHEMA as EVENTS_SCHEMA

NAMED, FOLLOWS, PUSHES = 6, 6, 8
SHORT = 3  # of each kind in CI's short run
DURABLE_BATCHES, PUSH_BATCHES = 40, 400


class Tail:
    """`flight_cli tail DB.TABLE --consumer-id C --format jsonl`; its printed ids collected."""

    def __init__(self, ctx: Context, uri: str, table: str, consumer: str, printed: collections.Counter):
        self.proc = ctx.python("-m", "flight_cli", "tail", table, "--uri", uri, "--consumer-id", consumer,
                               "--from", "earliest", "--poll-interval-ms", "50", "--format", "jsonl")
        self.printed = printed
        self.bad: list[str] = []  # printed lines that are not a row's JSON
        self.thread = threading.Thread(target=self._collect, daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        for line in self.proc.stdout:
            if not line.endswith("\n"):
                return  # the last line of a tail SIGKILLed mid-print (at the end of the run)
            try:
                self.printed[json.loads(line)["id"]] += 1
            except (ValueError, KeyError):
                self.bad.append(line[:200])


def _check_printed(tails: list[Tail]) -> None:
    bad = [line for tail in tails for line in tail.bad]
    if bad:
        raise wrong_error(f"a follow printed {len(bad)} line(s) that are not a row: {bad[0]!r}")


def _server_dies(ctx: Context, sig: int) -> Run:
    named_n, follows_n, pushes_n = (SHORT, SHORT, SHORT) if ctx.short else (NAMED, FOLLOWS, PUSHES)
    port = ctx.free_port()
    server = ctx.own_server("--shutdown-timeout", "2", port=port)
    uri = server.uri
    client = Client(uri, timeout=10)
    table = f"db.t{uuid.uuid4().hex[:8]}"
    client.create_table(table, EVENTS_SCHEMA)
    named = [ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", f"p{i}", "--batches",
                        str(DURABLE_BATCHES), "--rows", str(DURABLE_ROWS), "--rate", "10") for i in range(named_n)]
    printed: list[collections.Counter] = [collections.Counter() for _ in range(follows_n)]
    tails = [Tail(ctx, uri, table, f"c{i}", printed[i]) for i in range(follows_n)]
    pushes = []
    for i in range(pushes_n):
        name = f"push{i}"
        client.register(name, PUSH_SCHEMA, capacity=8)
        pushes.append((ctx.python("-m", "chaos.producer", uri, f"push:{name}", "--batches", str(PUSH_BATCHES),
                                  "--rows", str(PUSH_ROWS), "--rate", "50"),
                       ctx.python("-m", "chaos.consumer", uri, name)))
    client.close()
    # Every stream is open and moving (their processes take seconds to start on 2 cores) ...
    for proc in named + [p for p, _ in pushes]:
        ctx.started(proc, "a producer")
    for _, consumer in pushes:
        ctx.started(consumer, "a push consumer", first="reading")
    # A follow that never reached the server ends (a tail's first connection is not retried): each is
    # following once it printed a row.
    ctx.wait_for(lambda: all(printed), "every follow (tail) to print its first row", timeout=60)
    ctx.sleep_random(0.2, 2.0)  # ... and mid-way
    ctx.kill(server.proc, sig)
    ctx.exited(server.proc, "the server", timeout=2 + HANG_S)
    # Push consumers: an error, never a clean end with rows missing.
    for producer, consumer in pushes:
        ctx.exited(consumer, "a push consumer")
        result = consumer_result(consumer)
        if result["outcome"] == "complete" and (result["rows"] != PUSH_BATCHES * PUSH_ROWS or not result["in_order"]):
            raise truncation(f"a push consumer ended cleanly with {result['rows']} of {PUSH_BATCHES * PUSH_ROWS} rows")
        ctx.exited(producer, "a push producer")
    for tail in tails:  # kept running: each reconnects to the restarted server by itself
        if tail.proc.poll() is not None:
            raise wrong_error(f"a follow (tail) ended (exit code {tail.proc.returncode}) instead of reconnecting: "
                              f"{tail.proc.stderr.read().strip()[-400:]}")
    ctx.own_server("--shutdown-timeout", "2", port=port)
    for i, proc in enumerate(named):
        if ctx.exited(proc, f"named producer p{i} after the restart", timeout=60) != 0:
            raise wrong_error(f"named producer p{i} failed after the restart: {proc.stderr.read().strip().splitlines()[-1][-400:]}")
    held, lost, duplicated = named_batches_held(ctx.warehouse(), table, named_n, DURABLE_BATCHES, DURABLE_ROWS)
    every = {s * 1_000_000 + r for s in range(DURABLE_BATCHES) for r in range(DURABLE_ROWS)}  # ids of each producer
    expected = collections.Counter({i: named_n for i in every})
    ctx.wait_for(lambda: all(len(p) == len(every) and all(p[i] >= named_n for i in every) for p in printed),
                 "the follows to print every row", timeout=60)
    _check_printed(tails)
    missed = sum(1 for p in printed for i in every if p[i] < expected[i])
    redelivered = sum(n - named_n for p in printed for n in p.values() if n > named_n)
    return Run(detail=f"{len(held)} batches held; follows redelivered {redelivered} rows",
               lost=lost + missed, duplicated=duplicated, redelivered=redelivered)


scenario("server", "SIGKILL with 28 open streams, restart", "durable named producers: exactly-once; follows "
         "(tail --consumer-id) reconnect by themselves: every row; push consumers: an error, never a clean end short",
         short=1, full=5)(lambda ctx: _server_dies(ctx, signal.SIGKILL))
scenario("server", "SIGTERM with 28 open streams, restart", "the same; the server exits within its "
         "--shutdown-timeout (2 s) + 10 s", short=1, full=5)(lambda ctx: _server_dies(ctx, signal.SIGTERM))
