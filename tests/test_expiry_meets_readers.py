"""Snapshot expiry against consumers and reads in progress: a consumer commit an expiry run could
miss is refused or kept, and a read whose snapshot expires under it ends NOT_FOUND naming it
(real servers on loopback ports, real pypaimon tables, expiry paused mid-run by an Event)."""

from __future__ import annotations

import threading
import time

import pytest

from flight_server.maintenance.store import TableStore
from flight_server.paimon.scope import Scope
from flight_server.wire import names
from tests.conftest import wait_for
from tests.paimon_tables import Follower, Warehouse, command, info, read_all, rows

pytestmark = pytest.mark.timeout(120)

POLL = {"poll_interval_ms": 20}


@pytest.fixture
def wh(warehouse):
    return Warehouse(warehouse)


def table_with_snapshots(wh: Warehouse, n: int) -> str:
    t = wh.create("t", buckets=2)
    for i in range(n):
        wh.commit(t, rows(i * 10, 10))
    return t


def expire_all_but_latest(client, table: str) -> dict:
    return client.expire_snapshots(table, retain_max=1, retain_min=1, older_than=int(time.time() * 1000) + 60_000)


def snapshot_exists(wh: Warehouse, table: str, sid: int) -> bool:
    from flight_server.paimon import compat

    return compat.snapshot(wh.catalog.get_table(table).snapshot_manager(), sid) is not None


class PausedExpiry:
    """Expiry by the `expire_snapshots` action, paused at its first snapshot file deletion until
    `release()`: a synchronisation point inside the real run (nothing is replaced)."""

    def __init__(self, monkeypatch, client, table: str):
        self.deleting, self.released = threading.Event(), threading.Event()
        original = TableStore.delete

        def delete(store, path):
            if "/snapshot/snapshot-" in path and not self.deleting.is_set():
                self.deleting.set()
                assert self.released.wait(60), "the test never released the paused expiry"
            return original(store, path)

        monkeypatch.setattr(TableStore, "delete", delete)
        self.result, self.error = None, None
        self.thread = threading.Thread(target=self._run, args=(client, table), daemon=True)
        self.thread.start()
        wait_for(self.deleting.is_set, "the expiry run to reach its first deletion", timeout=60)

    def _run(self, client, table):
        try:
            self.result = expire_all_but_latest(client, table)
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self) -> dict:
        self.released.set()
        self.thread.join(60)
        assert not self.thread.is_alive() and self.error is None, self.error
        return self.result


def consumer_commit(client, table: str, next_snapshot: int) -> None:
    client.action(names.CONSUMER_COMMIT, {"table": table, "consumer_id": "c", "next_snapshot": next_snapshot})


def test_a_consumer_commit_during_an_expiry_run_is_refused_naming_the_snapshot_or_kept(monkeypatch, wh, client):
    t = table_with_snapshots(wh, 6)
    paused = PausedExpiry(monkeypatch, client, t)  # it is expiring snapshots 1..5
    outcome: dict = {}

    def commit():
        try:
            consumer_commit(client, t, 3)
            outcome["ok"] = True
        except BaseException as e:  # noqa: BLE001 - asserted below
            outcome["error"] = e

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    paused.finish()
    committer.join(60)
    assert not committer.is_alive()
    progress = client.action(names.CONSUMER_PROGRESS, {"table": t, "consumer_id": "c"})["next_snapshot"]
    if outcome.get("ok"):  # answered: the run saw it and kept snapshot 3
        assert snapshot_exists(wh, t, 3), "consumer_commit answered, then expiry removed its next snapshot"
        assert progress == 3
    else:
        error = outcome["error"]
        assert isinstance(error, KeyError), repr(error)  # NOT_FOUND
        assert "snapshot 3 has expired" in str(error) and "'c'" in str(error)
        assert progress is None, "a refused commit left the consumer on a snapshot that is gone"


def test_a_consumer_commit_naming_an_expired_snapshot_is_not_found_naming_it(wh, client):
    t = table_with_snapshots(wh, 4)
    expire_all_but_latest(client, t)
    with pytest.raises(KeyError, match="snapshot 2 has expired"):
        consumer_commit(client, t, 2)
    consumer_commit(client, t, 4)  # the kept one, and the next to come, are fine
    consumer_commit(client, t, 5)


def test_a_plan_whose_chosen_snapshot_expired_before_planning_is_not_found_naming_it(wh, client):
    t = table_with_snapshots(wh, 3)
    read_all(client, command({"table": t, "pin": "job-1"}))  # the pin chose snapshot 3
    wh.commit(t, rows(100, 10))
    expire_all_but_latest(client, t)
    with pytest.raises(KeyError) as e:
        info(client, command({"table": t, "pin": "job-1"}))
    assert "Snapshot 3" in str(e.value) and "expired" in str(e.value) and "plan the read again" in str(e.value)


def test_a_follows_first_full_read_whose_files_expire_ends_not_found_naming_the_snapshot(monkeypatch, wh, client):
    t = table_with_snapshots(wh, 3)
    reading, go_on = threading.Event(), threading.Event()
    original = Scope.batches

    def batches(scope, splits, meta=None):  # paused after planning, before the first file is opened
        if splits and not reading.is_set():
            reading.set()
            assert go_on.wait(60)
        yield from original(scope, splits, meta)

    monkeypatch.setattr(Scope, "batches", batches)
    fi = info(client, command({"table": t, "follow": True, "start": "latest-full", **POLL}))
    follower = Follower(client, fi.endpoints[0])
    wait_for(reading.is_set, "the follow's full read of snapshot 3 to start", timeout=60)
    assert client.compact(t).snapshots  # snapshot 4 replaces every file snapshot 3 reads ...
    expire_all_but_latest(client, t)  # ... and expiry deletes them with snapshot 3
    go_on.set()
    wait_for(lambda: follower.error is not None, "the follow to fail", timeout=60)
    assert isinstance(follower.error, KeyError), repr(follower.error)  # NOT_FOUND, not INTERNAL
    assert "Snapshot 3" in str(follower.error) and "expired while it was read" in str(follower.error)
    follower.cancel()


def test_a_follows_delta_of_a_snapshot_expired_between_finding_and_reading_it_is_not_found_naming_it(wh, client):
    """The follow found snapshot 2 (`compat.snapshot`, as its loop does) and then, before it plans
    and reads that snapshot's delta, the server's own compact and expire_snapshots remove it with
    its manifests and files: the delta ends NOT_FOUND naming snapshot 2, as every other read does."""
    from flight_server.paimon import compat, follow
    from flight_server.wire.errors import NotFound
    from flight_server.wire.requests import parse_command

    t = table_with_snapshots(wh, 3)
    table = wh.catalog.get_table(t)
    scope = Scope(table, parse_command({"table": t, "follow": True, "start": "earliest"}))
    planner = compat.new_delta_planner(scope.table, scope.predicate, None)
    try:
        identity = compat.table_identity(scope.table)
        found = compat.snapshot(scope.table.snapshot_manager(), 2)
        kept = list(follow.followed_delta(scope, planner, found, None, identity))  # while it is kept: its rows
        assert sum(b.num_rows for b, _ in kept) == 10
        assert client.compact(t).snapshots  # snapshot 4 replaces every file ...
        expire_all_but_latest(client, t)  # ... and expiry deletes snapshots 1-3 with their files
        assert not snapshot_exists(wh, t, 2)
        with pytest.raises(NotFound) as e:
            list(follow.followed_delta(scope, planner, found, None, identity))
        assert "Snapshot 2" in str(e.value) and "expired while it was read" in str(e.value)
        assert e.value.detail == {"table": t, "snapshot": 2}
    finally:
        compat.close_planner(planner)
