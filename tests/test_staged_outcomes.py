"""A staged job's commit (Spark's df.write) whose answer was lost never doubles the job, and a stage
belongs to the principal that staged it (issue 44, items 3 and 4): real `flight_cli serve`
processes SIGKILLed as the job's snapshot lands and started again, a real server whose committer
is held by a commit ahead of the job's (as a long compaction commit holds it), real pypaimon
tables, an --auth file of real principals."""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from contextlib import closing

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.ingest.staging import CLOCK_SKEW_MS, STAGE_PROPERTY
from flight_server.wire import names
from flight_server.wire.actions import StagedCommit
from flight_server.wire.errors import (
    NotFound,
    OutcomeUnknown,
    PermissionDenied,
    Unavailable,
    WrongState,
    from_flight,
)
from producers import Client
from producers.examples.events import SCHEMA
from tests.conftest import wait_for
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(240)


def batch(ids) -> pa.RecordBatch:
    ids = list(ids)
    return pa.record_batch([pa.array([f"p{i % 3}" for i in ids]), pa.array([i // 1000 for i in ids], pa.int64()),
                            pa.array(ids, pa.int64())], schema=SCHEMA)


def refused(fn, *args):
    """The protocol's error a call ended with (it must end with one)."""
    try:
        fn(*args)
    except (flight.FlightError, pa.ArrowException, KeyError) as e:
        return from_flight(e)
    raise AssertionError(f"{fn.__name__} succeeded; an error was expected")


def snapshot_file(warehouse: str, table: str, n: int) -> str:
    db, name = table.split(".")
    return os.path.join(warehouse, f"{db}.db", name, "snapshot", f"snapshot-{n}")


def ids(client, table: str) -> list[int]:
    """The ids the table holds, read with the client's own token."""
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), options=client.options())
    rows = pa.concat_tables([client.flight.do_get(e.ticket, client.options()).read_all() for e in info.endpoints])
    return sorted(rows.column("id").to_pylist())


def job_id() -> str:
    return names.job_stage(int(time.time() * 1000), secrets.token_hex(8))


def test_a_commit_whose_server_was_killed_as_its_snapshot_landed_is_answered_from_the_snapshot(warehouse):
    """The outside review's repro: the server SIGKILLed as the job's snapshot lands, started again,
    the commit retried: it answered "not staged on this server ... run the job again" with every
    row in the table (doing so doubled the job). Now the retry (its attempts in another order)
    answers the snapshot, an abort is refused naming it, and the rows are in the table once."""
    stage = job_id()
    first = ServerProcess(warehouse)
    try:
        with closing(Client(first.uri, timeout=60)) as c:
            c.create_table("db.k", SCHEMA, options={"write-only": "true"})
            c.stage("db.k", stage, "0-0", SCHEMA, [batch(range(0, 5000)), batch(range(5000, 10000))])
            c.stage("db.k", stage, "0-1", SCHEMA, [batch(range(9999, -1, -1))])  # a speculative twin
            c.stage("db.k", stage, "1-0", SCHEMA, [batch(range(10000, 20000))])
            answers: list = []

            def commit():
                try:
                    answers.append(c.commit_staged("db.k", stage, ["0-0", "1-0"]))
                except Exception as e:  # noqa: BLE001 - the answer lost with the server: what the test is about
                    answers.append(from_flight(e))

            committing = threading.Thread(target=commit, daemon=True)
            committing.start()
            wait_for(lambda: os.path.exists(snapshot_file(warehouse, "db.k", 1)) or answers,
                     "the job's snapshot to land", timeout=60)
            first.proc.kill()  # as the snapshot lands: the answer may be on its way or never sent
            committing.join(60)
    finally:
        first.stop()
    assert os.path.exists(snapshot_file(warehouse, "db.k", 1)), f"the commit did not land: {answers}"
    with ServerProcess(warehouse) as again, closing(Client(again.uri, timeout=60)) as c:
        retried = c.commit_staged("db.k", stage, ["1-0", "0-0"])  # the same attempts, as a set
        assert retried == StagedCommit(1, 20000, False), retried
        assert [a for a in answers if isinstance(a, StagedCommit)] in ([], [retried])
        assert ids(c, "db.k") == list(range(20000)), "the job's rows, once"
        other = refused(c.commit_staged, "db.k", stage, ["0-1", "1-0"])
        assert isinstance(other, WrongState) and "committed in snapshot 1 with another set of attempts" in other.message
        aborted = refused(c.abort_staged, "db.k", stage)
        assert isinstance(aborted, WrongState) and "committed in snapshot 1" in aborted.message, aborted
        assert c.latest_snapshot("db.k").snapshot_id == 1 and ids(c, "db.k") == list(range(20000))


def test_a_stage_the_server_lost_is_reported_absent_only_when_the_snapshots_prove_it(warehouse):
    """After a restart the server holds no stage: "nothing was committed: run the job again" only
    when every snapshot since the job began is kept (the table never expired one, or the job id
    says it began after the kept snapshots); else a typed error saying the outcome is unknown and
    naming the snapshot property to look for (it said "run the job again" whatever it knew)."""
    first = ServerProcess(warehouse)
    try:
        with closing(Client(first.uri, timeout=60)) as c:
            c.create_table("db.u", SCHEMA, options={"write-only": "true"})
            c.stage("db.u", "t1-never", "0-0", SCHEMA, [batch(range(10))])
            for i in range(3):
                with c.paimon_sink("db.u") as sink:
                    sink.write(batch(range(100 + 10 * i, 110 + 10 * i)))
    finally:
        first.stop()  # SIGKILL: the stage is lost with the process
    with ServerProcess(warehouse) as again, closing(Client(again.uri, timeout=60)) as c:
        proven = refused(c.commit_staged, "db.u", "t1-never", ["0-0"])  # snapshot 1 is kept: every one is
        assert isinstance(proven, NotFound) and "nothing was committed: run the job again" in proven.message, proven
        c.expire_snapshots("db.u", retain_max=1, retain_min=1)
        assert c.latest_snapshot("db.u").earliest_snapshot_id == 3
        after_kept = names.job_stage(int(time.time() * 1000) + CLOCK_SKEW_MS, "late")  # began after snapshot 3
        for stage in ("spark-job-7", job_id()):  # no start time; one before the kept snapshot's clock margin
            unknown = refused(c.commit_staged, "db.u", stage, ["0-0"])
            assert isinstance(unknown, OutcomeUnknown), unknown
            assert f"property {STAGE_PROPERTY!r} is {stage!r}" in unknown.message and "unknown" in unknown.message
            assert "run the job again" not in unknown.message and "Traceback" not in unknown.message
        proven = refused(c.commit_staged, "db.u", after_kept, ["0-0"])
        assert isinstance(proven, NotFound) and "nothing was committed" in proven.message, proven
        assert c.abort_staged("db.u", "spark-job-7").attempts == 0  # nothing here, and no kept snapshot holds it


def test_an_abort_or_a_retry_during_the_commit_waits_for_it_and_names_its_snapshot(server, client, warehouse):
    """A driver's deadline passed during a long commit, then Spark's abort(): it answered (0, 0)
    and the commit landed anyway. Now an abort waits for the commit in flight (bounded: past the
    bound it says the outcome is not known yet) and, once it landed, refuses naming the snapshot;
    a retried commit during it waits and gets the first commit's answer."""
    client.create_table("db.a", SCHEMA, options={"write-only": "true"})
    stage = job_id()
    client.stage("db.a", stage, "0-0", SCHEMA, [batch(range(0, 50))])
    client.stage("db.a", stage, "1-0", SCHEMA, [batch(range(50, 100))])
    committer = server.server.ingest.committer("db.a")
    held, release = threading.Event(), threading.Event()

    def hold_the_committer():  # a commit ahead of the job's (as a long compaction commit is)
        held.set()
        release.wait(120)

    holder = threading.Thread(target=committer.between_commits, args=(hold_the_committer, 180), daemon=True)
    holder.start()
    assert held.wait(60), "the committer was not held"
    answers: dict = {}

    def ask(key, fn, *args):
        with closing(Client(server.uri, timeout=120)) as c:
            try:
                answers[key] = fn(c)(*args)
            except Exception as e:  # noqa: BLE001 - compared below
                answers[key] = from_flight(e)

    try:
        first = threading.Thread(target=ask, args=("commit", lambda c: c.commit_staged, "db.a", stage, ["0-0", "1-0"]))
        first.start()
        wait_for(lambda: client.stats("db.a").staged.get("db.a", {}).get(stage, None) is not None
                 and client.stats("db.a").staged["db.a"][stage].committing, "the job's commit to begin", timeout=60)
        server.server.ingest.staging.in_flight_wait_s = 0.5
        early = refused(client.abort_staged, "db.a", stage)
        assert isinstance(early, Unavailable) and "being committed now" in early.message, early  # not (0, 0)
        server.server.ingest.staging.in_flight_wait_s = 60.0
        waiting = [threading.Thread(target=ask, args=("abort", lambda c: c.abort_staged, "db.a", stage)),
                   threading.Thread(target=ask, args=("retry", lambda c: c.commit_staged, "db.a", stage,
                                                      ["1-0", "0-0"]))]
        for t in waiting:
            t.start()
    finally:
        release.set()
    for t in (first, *waiting):
        t.join(120)
    assert answers["commit"] == StagedCommit(1, 100, False), answers
    assert answers["retry"] == answers["commit"], answers
    assert isinstance(answers["abort"], WrongState) and "committed in snapshot 1" in answers["abort"].message, answers
    assert ids(client, "db.a") == list(range(100))


# -- stages belong to their principal ------------------------------------------------------------

TOKENS = {name: secrets.token_urlsafe(24) for name in ("etl", "other", "reader")}


@pytest.fixture
def principals(tmp_path):
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": [
        {"name": "etl", "token": TOKENS["etl"], "grants": [{"tables": "db.*", "allow": ["read", "write", "admin"]}]},
        {"name": "other", "token": TOKENS["other"], "grants": [{"tables": "db.*", "allow": ["read", "write"]}]},
        {"name": "reader", "token": TOKENS["reader"], "grants": [{"tables": "db.*", "allow": ["read"]}]},
    ]}))
    return str(auth)


def test_a_stage_is_committed_aborted_and_seen_only_by_its_principal(warehouse, principals):
    """With --auth a principal with write on the table committed half of another's stage, whose
    own commit then failed with 10 of its 20 rows in the table; a read-only principal saw stage
    ids through stats. Now another principal's commit, abort or attempt is PERMISSION_DENIED
    naming it and the stage (also after a restart: the snapshot names the principal), and stats
    shows stage ids only to principals that may write the table."""
    stage = job_id()
    first = ServerProcess(warehouse, "--auth", principals)
    try:
        c = {who: Client(first.uri, timeout=60, token=token) for who, token in TOKENS.items()}
        c["etl"].create_table("db.p", SCHEMA, options={"write-only": "true"})
        c["etl"].stage("db.p", stage, "0-0", SCHEMA, [batch(range(10))])
        c["etl"].stage("db.p", stage, "1-0", SCHEMA, [batch(range(10, 20))])
        for what, fn, args in (("commit", c["other"].commit_staged, ("db.p", stage, ["0-0"])),
                               ("abort", c["other"].abort_staged, ("db.p", stage)),
                               ("stage an attempt into", c["other"].stage,
                                ("db.p", stage, "2-0", SCHEMA, [batch(range(20, 30))]))):
            error = refused(fn, *args)
            assert isinstance(error, PermissionDenied), (what, error)
            assert f"Principal 'other' may not {what} stage {stage!r}" in error.message, error.message
        assert c["reader"].stats().staged == {} and c["reader"].stats("db.p").staged == {}
        assert c["reader"].stats(table="db.p").staged == {}
        assert c["other"].stats().staged["db.p"][stage].attempts == 2  # it may write the table
        done = c["etl"].commit_staged("db.p", stage, ["0-0", "1-0"])
        assert (done.rows, done.skipped) == (20, False) and ids(c["etl"], "db.p") == list(range(20))
        again = refused(c["other"].commit_staged, "db.p", stage, ["0-0", "1-0"])
        assert isinstance(again, PermissionDenied) and repr(stage) in again.message
        for client in c.values():
            client.close()
    finally:
        first.stop()
    with ServerProcess(warehouse, "--auth", principals) as restarted:
        c = {who: Client(restarted.uri, timeout=60, token=token) for who, token in TOKENS.items()}
        try:
            after = refused(c["other"].commit_staged, "db.p", stage, ["0-0", "1-0"])
            assert isinstance(after, PermissionDenied) and "Principal 'other'" in after.message, after
            assert c["etl"].commit_staged("db.p", stage, ["0-0", "1-0"]) == done
            assert ids(c["etl"], "db.p") == list(range(20))
        finally:
            for client in c.values():
                client.close()
