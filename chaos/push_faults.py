"""Push tables: producers killed, stopped, timed out, ending badly; consumers cancelling, killed,
racing and stalled. The reader must get every row to a clean end, or an error naming the cause."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid

import pyarrow.flight as flight

from chaos.harness import HANG_S, Context, Run, hang, scenario, truncation, wrong_error
from chaos.producer import ERROR
from producers import Client
from producers.examples.counter import SCHEMA

BATCHES, ROWS = 40, 1000
BROKE = ("broke", "without its end marker")  # a producer that died without ending cleanly


class Drain:
    """A thread draining partition 0 of a push table (single scan): ids, then a clean end or an error."""

    def __init__(self, client: Client, table: str, pause: float = 0):
        self.ids: list[int] = []
        self.pause = pause
        self.error: str | None = None
        self.reader = None
        self._client, self._table = client, table
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.reader = self._client.flight.do_get(self._client.info(self._table).endpoints[0].ticket,
                                                     options=self._client.options(None))
            for chunk in self.reader:
                self.ids += chunk.data.column("id").to_pylist()
                time.sleep(self.pause)
        except flight.FlightError as e:
            self.error = str(e).splitlines()[0] if str(e) else type(e).__name__

    def finished(self, ctx: Context, what: str = "the consumer") -> None:
        self.thread.join(HANG_S)
        if self.thread.is_alive():
            if self.reader is not None:
                self.reader.cancel()
            raise hang(f"{what} had not ended {HANG_S:.0f} s after the fault")


def judge(ids: list[int], error: str | None, expected: list[int], causes: tuple[str, ...]) -> Run:
    """A clean end must hold every row; an error must come after a prefix and name a cause."""
    if error is None:
        if ids != expected:
            raise truncation(f"a clean end after {len(ids)} of {len(expected)} rows")
        return Run(detail="clean end, every row")
    if ids != expected[:len(ids)]:
        raise wrong_error(f"rows before the error are not the producer's first {len(ids)}")
    if not any(c in error for c in causes):
        raise wrong_error(f"the error does not name the cause ({' or '.join(causes)}): {error}")
    return Run(detail="error naming the cause")


def new_table(client: Client, capacity: int = 8) -> str:
    name = f"t{uuid.uuid4().hex[:8]}"
    client.register(name, SCHEMA, capacity=capacity)
    return name


def producer(ctx: Context, uri: str, table: str, *args: str, batches: int = BATCHES, rows: int = ROWS):
    return ctx.python("-m", "chaos.producer", uri, f"push:{table}", "--batches", str(batches), "--rows", str(rows),
                      *args)


def reading_consumer(ctx: Context, uri: str, table: str):
    """A consumer process (10 ms per batch) that has read its first batch."""
    consumer = ctx.python("-m", "chaos.consumer", uri, table, "--pause", "0.01")
    ctx.started(consumer, "the consumer process", first="reading")
    return consumer


def consumer_result(consumer) -> dict:
    """The JSON line a consumer process prints last (after it exited)."""
    lines = consumer.stdout.read().strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        raise wrong_error(f"the consumer ended without its result ({lines[-1:]!r}): "
                          f"{consumer.stderr.read()[-300:]}") from None


def expected_ids(batches: int) -> list[int]:
    return list(range(batches * ROWS))


def _producer_fault(ctx: Context, fault: str) -> Run:
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    try:
        table = new_table(client)
        drain = Drain(client, table)
        batches, extra = BATCHES, []
        if fault == "deadline":
            extra = ["--deadline", f"{ctx.rnd.uniform(0.2, 0.8):.3f}"]
        elif fault in ("plain-close", "error"):
            batches = ctx.rnd.randint(0, BATCHES)
            extra = ["--end", fault]
        proc = producer(ctx, uri, table, "--rate", "100", *extra, batches=batches)
        if fault in ("sigkill", "sigstop"):
            # Once it has attached: a table no producer ever attached to rightly waits for one.
            ctx.started(proc, "the producer")
            ctx.fault(proc, fault, 0.0, 0.5)  # it sends for 0.4 s
        ctx.exited(proc, "the producer")
        drain.finished(ctx)
        causes = {"error": (ERROR,), "plain-close": ("without its end marker",)}.get(fault, BROKE)
        return judge(drain.ids, drain.error, expected_ids(batches), causes)
    finally:
        client.close()


for _fault, _what in [("sigkill", "SIGKILL at a random moment"), ("sigstop", "SIGSTOP, then SIGKILL"),
                      ("deadline", "its call deadline passes mid-stream"),
                      ("plain-close", "half-closes without the end marker"),
                      ("error", "fails in-band after a random number of batches")]:
    scenario("producer", f"push: {_what}",
             "the reader gets every row to a clean end, or an error naming the cause; never a clean end short")(
        lambda ctx, f=_fault: _producer_fault(ctx, f))


def _blocked_producer(ctx: Context, how: str) -> Run:
    """A producer blocked on a full partition (capacity 4, 200 batches of 300 KB: more than gRPC's
    window can hold in flight to the consumer); the consumer goes away."""
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    try:
        table = new_table(client, capacity=4)
        proc = producer(ctx, uri, table, batches=200, rows=10 * ROWS)
        if how == "cancel":
            drain = Drain(client, table, pause=0.01)  # 200 batches take 2 s: the cancel comes mid-way
            ctx.wait_for(lambda: len(drain.ids) > 0, "the first batch")
            ctx.sleep_random(0, 0.3)
            drain.reader.cancel()
            drain.thread.join(HANG_S)
        else:
            consumer = reading_consumer(ctx, uri, table)
            ctx.sleep_random(0, 0.5)
            ctx.kill(consumer)
        rc = ctx.exited(proc, "the blocked producer")
        out, err = proc.communicate()
        state = client.stats(table).push[table].partitions["0"].state
        if rc == 0 and state == "eof":
            # The server had sent every batch before the cancel reached it: they sat in the
            # consumer's gRPC buffers. A single scan commits what it sends (docs/protocol.md).
            return Run(detail="every batch was sent before the cancel arrived")
        if rc == 0:
            raise wrong_error(f"the producer finished cleanly although its consumer went away mid-read ({state})")
        if "cancel" not in err:
            raise wrong_error(f"the producer's error does not say the consumer cancelled: {err.strip()[-300:]}")
        second = Drain(client, table)
        second.finished(ctx, "a second scan")
        if second.error is None:
            raise truncation(f"a second scan ended cleanly with {len(second.ids)} rows after the first was cancelled")
        return Run(detail="producer ended with the consumer's cancel; a second scan gets an error")
    finally:
        client.close()


scenario("consumer", "push: cancel mid-read", "the blocked producer ends within 10 s with an error saying the "
         "consumer cancelled; a later scan gets an error, never a clean end")(lambda ctx: _blocked_producer(ctx, "cancel"))
scenario("consumer", "push: SIGKILL while producers are blocked", "the same as a cancel")(
    lambda ctx: _blocked_producer(ctx, "kill"))


@scenario("consumer", "push: two consumers racing", "one reads every row to a clean end, the other gets "
          "'already consumed'")
def _racing(ctx: Context) -> Run:
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    try:
        table = new_table(client)
        proc = producer(ctx, uri, table, "--rate", "200")
        a, b = Drain(client, table), Drain(client, table)
        ctx.exited(proc, "the producer", timeout=HANG_S + 5)
        a.finished(ctx)
        b.finished(ctx)
        done = [d for d in (a, b) if d.error is None]
        refused = [d for d in (a, b) if d.error is not None]
        if len(done) != 1:
            raise wrong_error(f"{len(done)} of 2 racing scans ended cleanly: {[d.error for d in refused]}")
        if "already consumed" not in refused[0].error:
            raise wrong_error(f"the losing scan's error: {refused[0].error}")
        return judge(done[0].ids, None, expected_ids(BATCHES), ())
    finally:
        client.close()


@scenario("consumer", "push: stalled consumer (SIGSTOP)", "the producer's call deadline bounds its wait "
          "(nothing else does: a full partition waits for its reader); the consumer, resumed, gets an error")
def _stalled(ctx: Context) -> Run:
    uri = ctx.server().uri
    client = Client(uri, timeout=10)
    try:
        table = new_table(client, capacity=4)
        deadline = ctx.rnd.uniform(1.0, 3.0)
        proc = producer(ctx, uri, table, "--deadline", f"{deadline:.3f}", batches=200)
        consumer = reading_consumer(ctx, uri, table)
        ctx.kill(consumer, signal.SIGSTOP)
        rc = ctx.exited(proc, "the producer blocked by a stalled consumer", timeout=deadline + HANG_S)
        if rc == 0:
            raise wrong_error("the producer finished although its consumer was stopped")
        ctx.kill(consumer, signal.SIGCONT)
        ctx.exited(consumer, "the resumed consumer")
        result = consumer_result(consumer)
        ids = list(range(result["rows"])) if result["in_order"] else [-1]
        return judge(ids, result.get("error"), expected_ids(200), BROKE)
    finally:
        client.close()
