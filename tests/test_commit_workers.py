"""A table's writes and group commits in worker processes (`serve --commit-processes`,
ingest/commit_workers.py): the exactly-once rules of a shared table hold as in one process (the
check runs in the server, before each attempt the worker makes), a table altered by another tool
is written with the schema its batches were conformed to, and a worker killed mid-stream loses
and doubles nothing, whether it held written rows or was committing (real servers on loopback
ports, real pypaimon tables, real processes killed)."""

from __future__ import annotations

import os
import signal

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages
from flight_server.wire.errors import from_flight
from producers import Client
from tests import test_schema_evolution as evolution
from tests import test_shared_tables as shared
from tests.conftest import RunningServer, wait_for
from tests.test_ingest import SCHEMA

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _commits_in_a_worker(monkeypatch):
    monkeypatch.setattr(RunningServer, "defaults", {"commit_processes": 1})


# The shared-table rules again, every commit made by a worker process.
two_servers = shared.two_servers
test_a_resend_through_another_server_is_acked_and_not_written_again = \
    shared.test_a_resend_through_another_server_is_acked_and_not_written_again
test_batches_waiting_in_one_servers_commit_and_resent_through_another_land_once = \
    shared.test_batches_waiting_in_one_servers_commit_and_resent_through_another_land_once
test_a_drop_and_create_through_another_server_fails_the_open_stream_and_writes_nothing_new = \
    shared.test_a_drop_and_create_through_another_server_fails_the_open_stream_and_writes_nothing_new
test_a_rollback_by_another_tool_is_seen_by_the_running_server = \
    shared.test_a_rollback_by_another_tool_is_seen_by_the_running_server
# The worker's writers write the schema the server conformed the batches to, across an ALTER.
test_a_stream_opened_before_an_alter_goes_on_and_its_rows_read_with_the_new_schema = \
    evolution.test_a_stream_opened_before_an_alter_goes_on_and_its_rows_read_with_the_new_schema
test_a_column_another_tool_added_is_written_by_the_next_stream_without_a_restart = \
    evolution.test_a_column_another_tool_added_is_written_by_the_next_stream_without_a_restart


def test_rows_a_killed_worker_held_written_are_never_acked_and_land_once_when_resent(warehouse):
    """The writes run in the worker: rows it wrote but did not commit die with it. The next write
    after the kill fails the stream (commit_raced: the producer resumes), the table holds none of
    its batches, and the resend lands each batch once."""
    server = RunningServer(warehouse, commit_interval_ms=60_000, commit_bytes=16 << 20)  # 2 MiB chunks
    client = Client(server.uri, timeout=60)
    workers = server.server.ingest.commit_workers
    try:
        client.create_table("db.t", SCHEMA, options=shared.WRITE_ONLY)
        shared.send(client, "db.t", "other", [100])  # the first commit after a quiet spell: the minute now runs
        stream = shared.OpenStream(client, "db.t", "p")

        def send_big(seq):
            stream.writer.write_with_metadata(shared.big(seq), pa.py_buffer(messages.batch_seq(seq)))
            stream.sent += 1

        send_big(0), send_big(1)
        wait_for(lambda: client.stats(table="db.t").paimon_writes["db.t"].written_batches == 2,
                 lambda: f"the worker to write 2 batches: {client.stats(table='db.t').paimon_writes['db.t']}")
        (pid,) = workers.pids()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: pid not in workers.pids(), "the server to see its worker gone")
        send_big(2), send_big(3)  # a chunk's worth: written at once, into the writer the kill took
        with pytest.raises(flight.FlightError) as failed:
            stream.end()
        error = from_flight(failed.value)
        assert error.code == "commit_raced" and "restarted" in str(error), str(error)
        assert client.producer_state("db.t", "p") is None, "nothing of the stream was committed"
        client.close(), server.stop()
        server = RunningServer(warehouse)  # commits every 100 ms: the resend is not held for a minute
        client = Client(server.uri, timeout=60)
        assert [a.seq for a in shared.send(client, "db.t", "p", [0, 1, 2, 3])] == [0, 1, 2, 3]
        assert shared.batches_in(client, "db.t") == {100: 50, 0: 50, 1: 50, 2: 50, 3: 50}
    finally:
        client.close()
        server.stop()


def test_commits_run_in_the_worker_and_a_killed_worker_loses_and_doubles_nothing(warehouse):
    server = RunningServer(warehouse)
    client = Client(server.uri, timeout=60)
    workers = server.server.ingest.commit_workers
    try:
        client.create_table("db.t", SCHEMA, options=shared.WRITE_ONLY)
        assert [a.seq for a in shared.send(client, "db.t", "p", [0, 1])] == [0, 1]
        first = workers.pids()
        assert len(first) == 1 and first[0] != os.getpid(), "the commit ran in a worker process"
        killed, last_kill = 0, 0
        with client.paimon_sink("db.t", producer="p") as sink:  # resumes from producer_state after a failure
            assert sink.last_seq == 1
            start = sink.last_seq + 1
            for seq in range(start, 60):
                sink.write(shared.rows(seq), seq=seq)
                # A worker runs (the first from the batches before the sink; later ones once a commit
                # started one again): killed, at most every 15 batches. Not waited for: the sink resends
                # what a failed commit held only as it writes on.
                if seq - last_kill >= 15 and workers.pids():
                    os.kill(workers.pids()[0], signal.SIGKILL)
                    killed, last_kill = killed + 1, seq
        assert killed >= 1
        wait_for(lambda: client.producer_state("db.t", "p") == 59, "the last batch to be committed")
        assert shared.batches_in(client, "db.t") == {b: 50 for b in range(60)}, "every batch once"
        assert workers.pids() and workers.pids() != first, "a new worker took over"
    finally:
        client.close()
        server.stop()
    assert not workers.pids(), "the server's close stopped its workers"


def test_a_group_commit_commits_as_its_user_and_is_checked_before_each_attempt(warehouse):
    """compat.GroupCommit, the one commit object of group commits (in a worker or in the server)."""
    from flight_server.paimon import compat
    from tests.paimon_tables import Warehouse
    from tests.paimon_tables import rows as table_rows

    wh = Warehouse(warehouse)
    table = wh.catalog.get_table(wh.create("g", buckets=-1))
    seen: list = []

    def check(latest, properties):
        seen.append(None if latest is None else latest.id)
        if properties.get("refuse"):
            raise RuntimeError("refused by the check")
        properties["checked"] = "yes"

    def written(start):
        writer = table.new_stream_write_builder().new_write()
        try:
            writer.write_arrow(table_rows(start, 5))
            return writer.prepare_commit(1)
        finally:
            writer.close()

    group = compat.GroupCommit(table, "user-1", check)
    try:
        assert group.commit(written(0), 7, {}) == 1
        assert group.commit(written(5), 8, {}) == 2
        assert seen == [None, 1], "checked against the latest snapshot each attempt lands on"
        assert compat.find_commit(table, "user-1", 8) == 2, "committed as the given user"
        assert table.snapshot_manager().get_latest_snapshot().properties["checked"] == "yes"
        with pytest.raises(RuntimeError, match="refused by the check"):
            group.commit(written(10), 9, {"refuse": "1"})
        assert table.snapshot_manager().get_latest_snapshot().id == 2, "a refused attempt writes no snapshot"
    finally:
        group.close()


def test_an_idle_server_stops_its_commit_workers_and_starts_one_at_the_next_commit(warehouse):
    server = RunningServer(warehouse, table_idle_ms=300)
    client = Client(server.uri, timeout=60)
    workers = server.server.ingest.commit_workers
    try:
        client.create_table("db.t", SCHEMA, options=shared.WRITE_ONLY)
        shared.send(client, "db.t", "p", [0])
        wait_for(lambda: not workers.pids(), "the idle server to stop its commit worker", timeout=60)
        assert [a.seq for a in shared.send(client, "db.t", "p", [0, 1])] == [0, 1]
        assert workers.started() == 2, "the next commit started a worker again (which may idle out again since)"
        assert shared.batches_in(client, "db.t") == {0: 50, 1: 50}
    finally:
        client.close()
        server.stop()
