"""One warehouse, several servers (separate processes whose commits race through the filesystem),
and a staged job whose server dies during its commit:
- a named producer fails over between two live servers at random moments, abandoning its stream
  on one without waiting for acks and resuming on the other from producer_state: every batch once;
- the table is dropped and created again through one server while producers write through the
  other: the new table holds exactly what streams opened on it had acked, each once, and nothing
  of a stream opened on the old table; the producers' errors name the drop;
- a staged job's server SIGKILLed at a random moment around `commit_staged`, restarted, and the
  commit asked again as Spark's batch writer asks: the outcome reported must be true, and running
  the job again on "nothing was committed" (and only then) never doubles it.
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import threading
import time
import uuid

import pyarrow as pa
import pyarrow.flight as flight
from pypaimon import CatalogFactory

from chaos.harness import HANG_S, Context, Run, hang, scenario, wrong_error
from chaos.ingest_faults import ROWS, named_batches_held, new_table, table_batches
from flight_server.wire import names
from flight_server.wire.actions import StagedCommit
from flight_server.wire.errors import (
    Cancelled,
    FlightPaimonError,
    NotFound,
    OutcomeUnknown,
    TimedOut,
    Unavailable,
    WrongState,
    from_flight,
)
from producers import Client
from producers.examples.events import SCHEMA, batch
from producers.paimon_sink import retryable
from tests.process import ServerProcess


def two_servers(ctx: Context, *args: tuple[str, ...]) -> list[ServerProcess]:
    """Servers over the run's warehouse, one per tuple of extra flags, started side by side."""
    started: dict[int, ServerProcess | BaseException] = {}

    def start(i: int) -> None:
        try:
            started[i] = ctx.own_server(*args[i])
        except BaseException as e:  # noqa: BLE001 - raised below, in the run's thread
            started[i] = e

    threads = [threading.Thread(target=start, args=(i,), daemon=True) for i in range(len(args))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i in range(len(args)):
        if not isinstance(started.get(i), ServerProcess):
            raise wrong_error(f"server {i} did not start: {started.get(i)!r}")
    return [started[i] for i in range(len(args))]


# -- a named producer fails over between two servers ------------------------------------------


@scenario("shared", "two servers: a named producer fails over at random", "two live servers over one warehouse; the "
          "producer lets go of its stream on one (connection cut, or failed in-band) without waiting for acks and "
          "resumes on the other from producer_state, 3-8 times: every batch in the table exactly once",
          short=1, full=20)
def _failover(ctx: Context) -> Run:
    intervals = [str(ctx.rnd.choice([20, 100, 300])) for _ in range(2)]  # commits at other paces: more races
    a, b = two_servers(ctx, ("--commit-interval-ms", intervals[0]), ("--commit-interval-ms", intervals[1]))
    client = Client(a.uri, timeout=30)
    try:
        table = new_table(client)
    finally:
        client.close()
    batches, switches = (30, 3) if ctx.short else (80, ctx.rnd.randint(3, 8))
    proc = ctx.python("-m", "chaos.producer", a.uri, f"paimon:{table}", "--producer", "p0", "--batches", str(batches),
                      "--rows", str(ROWS), "--rate", "50", "--failover", b.uri, "--switches", str(switches),
                      "--switch-seed", str(ctx.rnd.randrange(1 << 30)), "--switch-after", "0.05", "0.6")
    code = ctx.exited(proc, "the failing-over producer", timeout=120)
    out = proc.stdout.read().splitlines()
    if code != 0:
        raise wrong_error(f"the producer failed ({code}): {proc.stderr.read()[-400:]!r}; its last lines {out[-3:]}")
    held, lost, duplicated = named_batches_held(ctx.warehouse(), table, 1, batches)
    resent, left = 0, None  # batches sent to the server left that the next one's producer_state lacked
    for line in out:
        words = line.split()
        if words[0] == "left":
            left = int(words[3])
        elif words[0] == "opened" and left is not None:
            resent += left - (-1 if words[3] == "None" else int(words[3]))
    return Run(detail=f"{len(held)} batches held; commit intervals {intervals} ms; {resent} resent; {out[-1]}",
               lost=lost, duplicated=duplicated)


# -- a drop and create through one server while the other serves streams ---------------------


class Lines:
    """A producer process's JSON lines, collected as they come."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"bad": line[:200]})

    def acked(self) -> int:
        return max([x.get("acked", 0) for x in list(self.lines) if "sent" in x], default=0)


ALLOWED_DROP_ERRORS = ("table_dropped", "not_found")


def _drop_and_create_through(client: Client, table: str) -> int:
    """Drop the table (again while another server's writes race the delete, as the refusal asks)
    and create it anew; the drops it took."""
    for attempt in range(1, 6):  # noqa: B007 - returned after the loop
        try:
            client.drop_table(table)
            break
        except (flight.FlightError, pa.ArrowException, KeyError) as e:
            error = from_flight(e)
            if type(error) is not WrongState or "not wholly dropped" not in error.message:
                raise wrong_error(f"the drop failed: {error.code}: {error.message[:300]}") from None
    else:
        raise wrong_error("the drop was refused 5 times: another server kept writing into the table")
    try:
        client.create_table(table, SCHEMA)
    except (flight.FlightError, pa.ArrowException, KeyError) as e:
        error = from_flight(e)
        raise wrong_error(f"creating the table again failed: {error.code}: {error.message[:300]}") from None
    return attempt


@scenario("shared", "two servers: drop and create on one while the other serves streams", "producers write "
          "through A; the table is dropped and created through B; each stream opened on the old table fails with "
          "table_dropped or NOT_FOUND (never INTERNAL, no hang) and its producer opens a new one: the new table holds "
          "exactly the batches streams opened on it acked, each once, and no row of a stream opened on the old table",
          short=1, full=20)
def _drop_and_create(ctx: Context) -> Run:
    a, b = two_servers(ctx, (), ())
    ca, cb = Client(a.uri, timeout=30), Client(b.uri, timeout=30)
    try:
        table = new_table(ca)
        producers, batches = (2, 40) if ctx.short else (3, 80)
        procs = [Lines(ctx.python("-m", "chaos.producer", a.uri, f"paimon:{table}", "--producer", f"p{i}",
                                  "--batches", str(batches), "--rows", str(ROWS), "--rate", "25", "--on-drop",
                                  "reopen")) for i in range(producers)]
        ctx.wait_for(lambda: all(p.acked() >= 1 or p.proc.poll() is not None for p in procs),
                     "every producer's first ack", timeout=60)
        ctx.sleep_random(0.0, 1.0 if ctx.short else 2.0)
        drops = _drop_and_create_through(cb, table)
        created = time.monotonic()
        for i, p in enumerate(procs):
            code = ctx.exited(p.proc, f"producer p{i} after the drop", timeout=60)
            p.thread.join(HANG_S)
            if code != 0:
                raise wrong_error(f"producer p{i} failed ({code}): {p.lines[-2:]} {p.proc.stderr.read()[-300:]!r}")
        waited = time.monotonic() - created
        errors = collections.Counter()
        expected: dict[tuple[str, int], int] = {}
        old_tags: set[str] = set()
        for i, p in enumerate(procs):
            for x in p.lines:
                if "bad" in x:
                    raise wrong_error(f"producer p{i} printed {x['bad']!r}")
                for key in ("error", "open_refused"):
                    if key in x:
                        errors[x[key]] += 1
                        if x[key] not in ALLOWED_DROP_ERRORS:
                            raise wrong_error(f"producer p{i} got {x[key]}: {x.get('message')}")
            # Stream g0 opened on the old table (its first ack came before the drop); each later
            # one opened after its producer's stream failed on the drop, so on the new table (there
            # is one drop), and must not fail.
            old_tags.add(f"p{i}.g0")
            failed_new = [x for x in p.lines if "error" in x and x["gen"] >= 1]
            if failed_new:
                raise wrong_error(f"producer p{i}'s stream on the new table failed: {failed_new[0]}")
            done = [x for x in p.lines if "done" in x]
            if done and done[0]["done"] >= 1:
                start, end = done[0]["seqs"]
                expected.update({(f"p{i}.g{done[0]['done']}", s): ROWS for s in range(start, end)})
        held, partial = table_batches(ctx.warehouse(), table)
        if partial:
            raise wrong_error(f"batches held partly: {partial[:5]}")
        old = {k: n for k, n in held.items() if k[0] in old_tags}
        if old:
            raise wrong_error(f"the new table holds {sum(old.values())} rows of streams opened on the old table: "
                              f"{sorted(old)[:5]}")
        stray = {k: n for k, n in held.items() if k not in expected}
        if stray:
            raise wrong_error(f"the new table holds batches no stream on it acked: {sorted(stray)[:5]}")
        lost = sum(ROWS for k in expected if held[k] == 0)
        duplicated = sum(n - ROWS for n in held.values() if n > ROWS)
        return Run(detail=f"{len(expected)} batches expected in the new table, {len(held)} held; drops {drops}; "
                          f"errors {dict(errors)}; producers done {waited:.1f} s after the create",
                   lost=lost, duplicated=duplicated)
    finally:
        ca.close(), cb.close()


# -- a staged job's server SIGKILLed around commit_staged ------------------------------------

STAGE_PROPERTY = "flight-paimon.stage"
JOB_ROWS = 5000  # per task
LOST = (Unavailable, TimedOut, Cancelled)  # Spark's batch writer asks again after these (paimon_writer.LOST)


def _job_batches(job: int, task: int) -> list[pa.RecordBatch]:
    """Task `task` of job `job`: JOB_ROWS rows, producer column `job<job>`, ids unique in the job."""
    b = batch(f"job{job}", task, JOB_ROWS)
    return [b.slice(0, JOB_ROWS // 2), b.slice(JOB_ROWS // 2)]


def _stage_job(client: Client, table: str, job: int, tasks: int, stage: str) -> list[str]:
    """Stage every task of a job (and a speculative twin of one, which the commit must leave out);
    returns the attempts Spark would commit."""
    attempts = []
    for task in range(tasks):
        client.stage(table, stage, f"{task}-0", SCHEMA, _job_batches(job, task))
        attempts.append(f"{task}-0")
    client.stage(table, stage, f"{tasks - 1}-1", SCHEMA, _job_batches(job, tasks - 1))  # speculative: not committed
    return attempts


def _ask(client: Client, table: str, stage: str, attempts: list[str]):
    """commit_staged's answer: a StagedCommit, or the protocol's error."""
    try:
        return client.commit_staged(table, stage, attempts)
    except (flight.FlightError, pa.ArrowException, KeyError, OSError) as e:
        if retryable(e):  # pyarrow raises some UNAVAILABLEs as a bare OSError
            return Unavailable(str(e))
        return from_flight(e)


def _ask_until_definite(uri: str, table: str, stage: str, attempts: list[str], limit_s: float = 60.0):
    """As spark_reader.paimon_writer.commit_stage: a commit whose answer was lost is asked again,
    with backoff, until the server answers for certain (or `limit_s`: a hang)."""
    deadline, delay = time.monotonic() + limit_s, 0.05
    while True:
        client = Client(uri, timeout=30)
        try:
            answer = _ask(client, table, stage, attempts)
        finally:
            client.close()
        if not isinstance(answer, LOST):
            return answer
        if time.monotonic() + delay > deadline:
            raise hang(f"commit_staged of {stage} answered only {answer.code} for {limit_s:.0f} s after the restart")
        time.sleep(delay)  # as Spark's writer: a server restarting has nothing to wait on but time
        delay = min(delay * 2, 1.0)


def _stage_snapshots(warehouse: str, table: str, stage: str) -> tuple[list[int], int]:
    """(the kept snapshots whose stage property names `stage`, the earliest kept snapshot's id)."""
    manager = CatalogFactory.create({"warehouse": warehouse}).get_table(table).snapshot_manager()
    latest = manager.get_latest_snapshot()
    if latest is None:
        return [], 1
    found, earliest = [], latest.id
    for sid in range(latest.id, 0, -1):
        snap = manager.get_snapshot_by_id(sid)
        if snap is None:
            break
        earliest = sid
        if (snap.properties or {}).get(STAGE_PROPERTY) == stage:
            found.append(sid)
    return found, earliest


def _job_rows(warehouse: str, table: str, job: int) -> collections.Counter:
    """How many times the table holds each row id of job `job`."""
    t = CatalogFactory.create({"warehouse": warehouse}).get_table(table)
    rb = t.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    ids = [i for p, i in zip(data.column("producer").to_pylist(), data.column("id").to_pylist()) if p == f"job{job}"]
    return collections.Counter(ids)


def _wrong_outcome(detail: str):
    return wrong_error(f"wrong outcome reported: {detail}")


def _judge(ctx: Context, table: str, job: int, tasks: int, stage: str, answer) -> str:
    """Whether `answer` to a commit of `stage` is true of the table; a sentence naming it."""
    expected = {t * 1_000_000 + r for t in range(tasks) for r in range(JOB_ROWS)}
    found, earliest = _stage_snapshots(ctx.warehouse(), table, stage)
    rows = _job_rows(ctx.warehouse(), table, job)
    if len(found) > 1:
        raise _wrong_outcome(f"stage {stage} committed in {len(found)} snapshots: {found}")
    if isinstance(answer, StagedCommit):
        if found != [answer.snapshot] or answer.rows != len(expected) or answer.skipped:
            raise _wrong_outcome(f"{answer} but the snapshots holding the stage are {found}")
        if set(rows) != expected or any(n != 1 for n in rows.values()):
            raise _wrong_outcome(f"{answer} but the table holds {sum(rows.values())} rows of the job "
                                 f"({len(set(rows))} distinct of {len(expected)})")
        return "committed"
    if isinstance(answer, NotFound) and "nothing was committed" in answer.message:
        if found or rows:
            raise _wrong_outcome(f"'nothing was committed' but snapshot(s) {found} hold the stage and the table "
                                 f"{sum(rows.values())} rows of the job")
        return "nothing committed"
    if isinstance(answer, OutcomeUnknown):
        if earliest <= 1:  # every snapshot is kept: the table can tell
            raise _wrong_outcome(f"outcome_unknown though every snapshot since the first is kept (found {found})")
        return "unknown"
    if isinstance(answer, FlightPaimonError):
        raise _wrong_outcome(f"{answer.code}: {answer.message[:300]}")
    raise _wrong_outcome(f"{answer!r}")


def _staged_kill(ctx: Context) -> Run:
    port = ctx.free_port()
    server = ctx.own_server(port=port)
    uri = server.uri
    client = Client(uri, timeout=30)
    table = f"db.s{uuid.uuid4().hex[:8]}"
    client.create_table(table, SCHEMA, options={"write-only": "true"})  # every snapshot a commit: predictable
    for k in range(ctx.rnd.randint(0, 3)):  # snapshots before the job's: the restarted server walks back
        with client.paimon_sink(table, "before") as sink:
            sink.write(batch("before", k, 100), seq=k)
    tasks = ctx.rnd.randint(2, 4)
    job = 0
    stage = names.job_stage(int(time.time() * 1000), secrets.token_hex(8))
    attempts = _stage_job(client, table, job, tasks, stage)
    latest = client.latest_snapshot(table).snapshot_id or 0
    db, name = table.split(".")
    landing = os.path.join(ctx.warehouse(), f"{db}.db", name, "snapshot", f"snapshot-{latest + 1}")
    answers: list = []
    committing = threading.Thread(target=lambda: answers.append(_ask(client, table, stage, attempts)), daemon=True)
    how = ctx.rnd.choice(["before the commit is sent", "as the snapshot lands", "at a random moment",
                          "at a random moment"])  # the commit lands ~10-50 ms after it is sent
    if how == "before the commit is sent":
        ctx.kill(server.proc)
    began = time.monotonic()
    committing.start()
    if how == "as the snapshot lands":
        deadline = began + HANG_S
        while not os.path.exists(landing) and not answers and time.monotonic() < deadline:
            time.sleep(0.001)  # the kill's moment is the file's appearance: polled as closely as it can be
    elif how == "at a random moment":
        ctx.sleep_random(0.0, 0.06)
    ctx.kill(server.proc)
    at = time.monotonic() - began
    ctx.exited(server.proc, "the killed server")
    committing.join(HANG_S + 30)
    if committing.is_alive():
        raise hang("commit_staged did not return after its server was SIGKILLed")
    first = answers[0]
    ctx.own_server(port=port)
    client.close()
    outcomes = []
    if not isinstance(first, LOST):  # the answer came before the kill: it must be true
        outcomes.append(f"first answer {_judge(ctx, table, job, tasks, stage, first)}")
    again = _ask_until_definite(uri, table, stage, attempts)  # as Spark's writer (and again after a definite one)
    verdict = _judge(ctx, table, job, tasks, stage, again)
    if isinstance(first, StagedCommit) and again != first:
        raise _wrong_outcome(f"the first answer was {first}, the restarted server's {again}")
    outcomes.append(f"retry {verdict}")
    if verdict == "nothing committed":  # Spark fails the job; it is run again, as a new job
        client = Client(uri, timeout=30)
        try:
            rerun = names.job_stage(int(time.time() * 1000), secrets.token_hex(8))
            rerun_attempts = _stage_job(client, table, job, tasks, rerun)
            answer = _ask(client, table, rerun, rerun_attempts)
        finally:
            client.close()
        if not isinstance(answer, StagedCommit):
            raise wrong_error(f"the job run again did not commit: {answer!r}")
        outcomes.append(f"rerun {_judge(ctx, table, job, tasks, rerun, answer)}")
    rows = _job_rows(ctx.warehouse(), table, job)
    expected = tasks * JOB_ROWS
    lost = expected - len(rows) if verdict != "unknown" else 0
    duplicated = sum(n - 1 for n in rows.values() if n > 1)
    return Run(detail=f"killed {how} ({at:.3f} s into the commit; first answer "
                      f"{getattr(first, 'code', type(first).__name__)}): {', '.join(outcomes)}",
               lost=lost, duplicated=duplicated)


scenario("shared", "staged commit: server SIGKILLed at a random point of commit_staged, restarted, commit retried",
         "the commit asked again as Spark's batch writer asks: the outcome reported is true (committed in snapshot N "
         "with every row once; nothing committed with no row of the job; outcome unknown only when the table "
         "cannot tell; a wrong outcome reported counts as a wrong error), and the job run again only on nothing "
         "committed never doubles", short=1, full=20)(_staged_kill)
