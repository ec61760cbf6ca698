"""Live follow reads: every committed row once, in commit order per bucket, resumable by consumer_id."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from structlog.testing import capture_logs

from flight_server.wire import messages
from producers import Client
from producers.client import FollowProgress
from tests.conftest import ServerProcess, wait_for
from tests.paimon_tables import (
    SCHEMA,
    Follower,
    Warehouse,
    command,
    info,
    read_all,
    rows,
)

POLL = {"poll_interval_ms": 50}


@pytest.fixture
def wh(warehouse):
    return Warehouse(warehouse)


def _ids(received) -> list[int]:
    return [i for _, b in received for i in b.column("id").to_pylist()]


def test_follow_started_before_commits_gets_every_row_once_in_commit_order(wh, client):
    t = wh.create("orders", buckets=2)
    fi = info(client, command({"table": t, "follow": True, **POLL}))  # no snapshot yet: waits for the first
    assert len(fi.endpoints) == 2
    followers = [Follower(client, ep) for ep in fi.endpoints]
    try:
        for i in range(5):
            wh.commit(t, rows(i * 100, 100))
        # A later snapshot: once both endpoints are done with it, nothing of snapshots 1..5 (a
        # duplicate) can still be on its way.
        wh.commit(t, rows(500, 100))
        received = []
        for f in followers:
            f.drain_until_done(6)
            snaps = [s for s, _ in f.received]
            assert snaps == sorted(snaps), "commit order within a bucket"
            for s, batch in f.received:  # snapshot s committed ids (s-1)*100 .. s*100-1
                assert all((s - 1) * 100 <= i < s * 100 for i in batch.column("id").to_pylist())
            received += _ids(f.received)
        assert sorted(received) == list(range(600))
    finally:
        for f in followers:
            f.cancel()


def test_follow_latest_full_then_deltas_with_bucket_filter_from_the_first_plan(wh, client):
    t = wh.create("orders", buckets=4)
    wh.commit(t, rows(0, 400))
    _, per_bucket = None, {}
    for b in range(4):
        bi = info(client, command({"table": t, "buckets": [b]}))
        per_bucket[b] = {i for ep in bi.endpoints for c in client.flight.do_get(ep.ticket, options=client.options())
                         for i in c.data.column("id").to_pylist()}
    fi = info(client, command({"table": t, "follow": True, "buckets": [2], **POLL}))
    assert len(fi.endpoints) == 1
    f = Follower(client, fi.endpoints[0])
    try:
        first = f.wait_rows(len(per_bucket[2]))
        assert set(_ids(first)) == per_bucket[2]  # the initial full plan is bucket-filtered too
        wh.commit(t, rows(0, 400, "again"))  # same ids land in the same buckets
        f.wait_rows(2 * len(per_bucket[2]))
        wh.commit(t, rows(1000, 400, "later"))  # snapshot 3: done with it, the follow has sent all of 1 and 2
        got = [(s, b) for s, b in f.drain_until_done(3) if s <= 2]
        assert sorted(_ids(got)) == sorted(list(per_bucket[2]) * 2)  # nothing twice, nothing of other buckets
        assert [s for s, _ in got][-1] == 2
    finally:
        f.cancel()


def test_follow_from_latest_skips_existing_rows_and_from_earliest_replays_all(wh, client):
    t = wh.create("orders", buckets=1)
    wh.commit(t, rows(0, 10))
    wh.commit(t, rows(10, 10))
    latest = Follower(client, info(client, command({"table": t, "follow": True, "start": "latest", **POLL})).endpoints[0])
    earliest = Follower(client, info(client, command({"table": t, "follow": True, "start": "earliest", **POLL})).endpoints[0])
    from_2 = Follower(client, info(client, command({"table": t, "follow": True, "start": "snapshot:2", **POLL})).endpoints[0])
    try:
        wh.commit(t, rows(20, 10))
        assert sorted(_ids(latest.wait_rows(10))) == list(range(20, 30))
        assert [s for s, _ in earliest.wait_rows(30)] == [1, 2, 3]
        assert sorted(_ids(from_2.wait_rows(20))) == list(range(10, 30))
    finally:
        for f in (latest, earliest, from_2):
            f.cancel()


def test_cancelled_follow_ends_its_server_stream(wh, client, server):
    t = wh.create("orders", buckets=2)
    fi = info(client, command({"table": t, "follow": True, **POLL}))
    with capture_logs() as logs:
        followers = [Follower(client, ep) for ep in fi.endpoints]
        wait_for(lambda: server.server.paimon.open_follows == 2, "both follows to open", timeout=5)
        wh.commit(t, rows(0, 10))
        for f in followers:
            f.cancel()
        wait_for(lambda: server.server.paimon.open_follows == 0, "both follows to end on the server", timeout=5)
        wait_for(lambda: len([e for e in logs if e.get("rpc") == "do_get"]) >= 2, "both do_gets' end logged",
                 timeout=5)
    # A follow ends only when its client closes it: the normal end, logged as such, not as a failure.
    ends = [e for e in logs if e.get("rpc") == "do_get"]
    assert [(e["event"], e["ended"]) for e in ends] == [("rpc_done", "the client closed the follow")] * 2


def test_killed_server_resumes_follow_from_the_consumers_committed_progress(wh, warehouse):
    t = wh.create("orders", buckets=2)
    wh.commit(t, rows(0, 100))
    cmd = command({"table": t, "follow": True, "consumer_id": "job1", "start": "earliest", **POLL})
    proc = ServerProcess(warehouse)
    client = Client(proc.uri, timeout=10)
    try:
        followers = [Follower(client, ep) for ep in info(client, cmd).endpoints]
        for i in range(1, 4):
            wh.commit(t, rows(i * 100, 100))
        for f in followers:
            f.drain_until_done(4)  # each endpoint has sent snapshots 1..4
        assert sorted(i for f in followers for i in _ids(f.received)) == list(range(400))
        # The consumer has processed snapshots 1..4 on both endpoints: it commits 5.
        progress = FollowProgress(len(followers))
        nxt = [progress.update(b, messages.done_mark(f.done)) for b, f in enumerate(followers)][-1]
        assert nxt == 5
        client.action("consumer_commit", {"table": t, "consumer_id": "job1", "next_snapshot": nxt})
        proc.proc.kill()  # SIGKILL: the server keeps nothing of its own
        proc.proc.wait(10)
        client.close()
        wh.commit(t, rows(400, 100))  # snapshot 5 lands while no server runs
        proc = ServerProcess(warehouse)
        client = Client(proc.uri, timeout=10)
        followers = [Follower(client, ep) for ep in info(client, cmd).endpoints]
        wh.commit(t, rows(500, 100))
        for f in followers:
            f.drain_until_done(6)  # all of snapshots 5 and 6, and whatever came before them
            assert {s for s, _ in f.received} <= {5, 6}, "resumed exactly at the committed snapshot"
        assert sorted(i for f in followers for i in _ids(f.received)) == list(range(400, 600))
        for f in followers:
            f.cancel()
    finally:
        client.close()
        proc.stop()


def test_follow_of_a_primary_key_table_with_changelog_row_kinds(wh, client):
    t = wh.create("users", buckets=1, primary_keys=["id"])
    fi = info(client, command({"table": t, "follow": True, "changelog": True, **POLL}))
    assert fi.schema.names[0] == "_row_kind"
    f = Follower(client, fi.endpoints[0])
    try:
        wh.commit(t, rows(0, 5, "a"))
        wh.commit(t, rows(0, 5, "b"))
        got = f.wait_rows(10)
        assert [s for s, _ in got] == [1, 2]
        assert got[1][1].column("name").to_pylist() == [f"b{i}" for i in range(5)]
        assert set(got[1][1].column("_row_kind").to_pylist()) == {"+I"}
    finally:
        f.cancel()


def test_server_shutdown_ends_follow_with_an_error(wh, warehouse):
    from tests.conftest import RunningServer

    t = wh.create("orders", buckets=1)
    running = RunningServer(warehouse)
    client = Client(running.uri, timeout=10)
    try:
        f = Follower(client, info(client, command({"table": t, "follow": True, **POLL})).endpoints[0])
        wait_for(lambda: running.server.paimon.open_follows == 1, "the follow to start")
        running.server.close_streams("test shutdown")
        f.thread.join(10)
        assert isinstance(f.error, flight.FlightError) and "shutting down" in str(f.error)
    finally:
        client.close()
        running.stop()


def test_consumer_actions_record_progress_a_follow_resumes_from(wh, client, warehouse):
    t = wh.create("events", buckets=-1)  # one endpoint: the follow uses the consumer id as given
    for i in range(3):
        wh.commit(t, rows(i * 10, 10))
    assert client.action("consumer_progress", {"table": t, "consumer_id": "spark-1"}) == {"next_snapshot": None}
    assert client.action("consumer_commit", {"table": t, "consumer_id": "spark-1", "next_snapshot": 3}) == {}
    assert client.action("consumer_progress", {"table": t, "consumer_id": "spark-1"}) == {"next_snapshot": 3}
    # Paimon's own consumer file, where Paimon's expiry and connectors look for it.
    assert wh.catalog.get_table(t).consumer_manager().consumer("spark-1").next_snapshot == 3
    # A follow with that consumer id starts at snapshot 3, whatever its start position says.
    follower = Follower(client, info(client, command(
        {"table": t, "follow": True, "start": "earliest", "consumer_id": "spark-1", **POLL})).endpoints[0])
    try:
        wh.commit(t, rows(30, 10))
        got = follower.wait_rows(20)
        assert [s for s, _ in got] == [3, 4] and sorted(_ids(got)) == list(range(20, 40))
    finally:
        follower.cancel()


def test_consumer_actions_refuse_bad_input_and_record_nothing(wh, client):
    t = wh.create("events", buckets=1)
    wh.commit(t, rows(0, 10))
    cases = [
        ({"table": t, "consumer_id": "c", "next_snapshot": 3}, "past the latest snapshot \\+ 1 \\(2\\)"),
        ({"table": t, "consumer_id": "c", "next_snapshot": 0}, "'next_snapshot' must be an integer >= 1"),
        ({"table": t, "consumer_id": "c", "next_snapshot": "2"}, "'next_snapshot' must be an integer >= 1"),
        ({"table": t, "consumer_id": "../x", "next_snapshot": 1}, "'consumer_id' '../x' must be 1-128 characters"),
        ({"table": t, "next_snapshot": 1}, "needs 'consumer_id'"),
        ({"table": "orders", "consumer_id": "c", "next_snapshot": 1}, "is not 'DB.TABLE'"),
    ]
    for body, message in cases:
        with pytest.raises(pa.ArrowInvalid, match=message):
            client.action("consumer_commit", body)
    assert client.action("consumer_progress", {"table": t, "consumer_id": "c"}) == {"next_snapshot": None}
    with pytest.raises(KeyError, match="'db.nope' does not exist"):
        client.action("consumer_progress", {"table": "db.nope", "consumer_id": "c"})


def test_consumer_progress_is_written_whole_and_a_torn_file_is_a_clear_error(wh, client, warehouse):
    import pathlib

    t = wh.create("events", buckets=-1)
    for i in range(3):
        wh.commit(t, rows(i * 10, 10))
    for n in (2, 3, 4):
        client.action("consumer_commit", {"table": t, "consumer_id": "c1", "next_snapshot": n})
    folder = pathlib.Path(warehouse) / "db.db" / "events" / "consumer"
    assert sorted(p.name for p in folder.iterdir()) == ["consumer-c1"]  # renamed over: no file beside it
    assert (folder / "consumer-c1").read_text() == '{"nextSnapshot": 4}'
    # What an in-place overwrite left when the server died between truncating and writing.
    (folder / "consumer-c1").write_text("")
    with pytest.raises(Exception, match="progress file of consumer 'c1' .*cannot be read.*delete it") as e:
        client.action("consumer_progress", {"table": t, "consumer_id": "c1"})
    assert "Traceback" not in str(e.value)
    with pytest.raises(flight.FlightError, match="progress file of consumer 'c1'"):
        info(client, command({"table": t, "follow": True, "consumer_id": "c1", **POLL}))
    (folder / "consumer-c1").unlink()
    assert client.action("consumer_progress", {"table": t, "consumer_id": "c1"}) == {"next_snapshot": None}


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_a_table_whose_changelog_nothing_writes_fails_its_follows_and_deltas_saying_why(wh, client, producer):
    """changelog-producer lookup / full-compaction: compaction writes the changelog, and nothing
    compacts a table written by pypaimon, so its follows and deltas would stay empty forever."""
    t = wh.create("users", buckets=1, primary_keys=["id"], options={"changelog-producer": producer})
    plain = Follower(client, info(client, command({"table": t, "follow": True, "start": "earliest", **POLL})).endpoints[0])
    rows_kinds = Follower(client, info(client, command({"table": t, "follow": True, "changelog": True, **POLL})).endpoints[0])
    wh.commit(t, rows(0, 5, "a"))
    for f in (plain, rows_kinds):
        f.thread.join(30)
        assert not f.thread.is_alive(), "the follow waited on, empty"
        assert isinstance(f.error, flight.FlightError) and f"changelog-producer {producer!r}" in str(f.error), f.error
        assert "snapshot 1 committed rows without it" in str(f.error)
    with pytest.raises(flight.FlightError, match="compaction"):
        read_all(client, command({"table": t, "from_snapshot": 0, "to_snapshot": 1}))
    with pytest.raises(pa.ArrowInvalid, match=f"changelog-producer {producer!r}"):
        client.create_table("db.other", SCHEMA, primary_keys=["id"], options={"changelog-producer": producer})
    with pytest.raises(pa.ArrowInvalid, match="deletion-vectors.merge-on-read"):
        client.create_table("db.dv", SCHEMA, primary_keys=["id"], options={"deletion-vectors.enabled": "true"})
