"""Resources follow the active tables: every table's writes and commits run on the server's two
bounded pools of threads; a table's durable-write committer (its writers, its lanes' pins) is
closed once unused for the server's table idle timeout, and the table's next stream opens a new
one, exactly-once unchanged (a real server on a loopback port, real
pypaimon tables)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from producers import Client
from tests.conftest import RunningServer, wait_for
from tests.test_ingest import SCHEMA
from tests.test_shared_tables import WRITE_ONLY, batches_in, send

pytestmark = pytest.mark.timeout(180)

TABLES = 20


def test_tables_written_once_give_their_committers_back_on_bounded_threads_and_resume_exactly_once(warehouse):
    before = set(threading.enumerate())
    server = RunningServer(warehouse, table_idle_ms=300, write_pool=2, commit_threads=3)
    client = Client(server.uri, timeout=60)
    try:
        for i in range(TABLES):
            client.create_table(f"db.t{i}", SCHEMA, options=WRITE_ONLY)

        def ingest_threads() -> list[str]:  # the server's writer and commit pools
            return sorted(t.name for t in set(threading.enumerate()) - before if t.name.startswith(("commit-", "write-")))

        assert ingest_threads() == ["commit-0", "commit-1", "commit-2", "write-0", "write-1"]
        for i in range(TABLES):
            send(client, f"db.t{i}", "p", [0, 1])
        assert ingest_threads() == ["commit-0", "commit-1", "commit-2", "write-0", "write-1"], \
            "the tables' writes and commits run on the server's pools, not threads of their own"
        wait_for(lambda: not client.stats().paimon_writes, "every idle table's committer to close", timeout=60)
        pins = server.server.ingest.writer_pool
        wait_for(lambda: pins.pinned() == 0, lambda: f"the closed committers' lanes to unpin ({pins.pinned()} left)",
                 timeout=60)
        # The table's next stream opens a new committer, which reads the producer map from the table.
        assert client.producer_state("db.t3", "p") == 1
        acks = send(client, "db.t3", "p", [0, 1, 2])  # a resend of 0-1, and one new batch
        assert [a.seq for a in acks] == [0, 1, 2]
        assert batches_in(client, "db.t3") == {0: 50, 1: 50, 2: 50}
    finally:
        client.close()
        server.stop()


def test_a_stream_that_meets_its_committer_being_evicted_takes_the_next_one(warehouse):
    """Streams open and end while the idle timeout is shorter than the gap between them."""
    server = RunningServer(warehouse, table_idle_ms=1)
    client = Client(server.uri, timeout=60)
    try:
        client.create_table("db.t", SCHEMA, options=WRITE_ONLY)
        for seq in range(30):
            assert [a.seq for a in send(client, "db.t", "p", [seq])] == [seq]
        assert batches_in(client, "db.t") == {b: 50 for b in range(30)}
        assert client.producer_state("db.t", "p") == 29
    finally:
        client.close()
        server.stop()


def test_nothing_holds_an_evicted_tables_committer(warehouse):
    """Once evicted, a table's committer (its pypaimon table, writers, producer map) is garbage:
    no pool, lane, job or callback of the server keeps it, so its memory is free for the next
    tables (docs/benchmarks_ingest.md, "What the serving process keeps after the idle time")."""
    server = RunningServer(warehouse, table_idle_ms=300, write_pool=2, commit_threads=2)
    client = Client(server.uri, timeout=60)
    try:
        names = [f"db.t{i}" for i in range(3)]
        for name in names:
            client.create_table(name, SCHEMA, options=WRITE_ONLY)
            send(client, name, "p", [0])
        ingest = server.server.ingest
        with ingest._lock:
            committers = [weakref.ref(c) for c in ingest._committers.values()]
        assert len(committers) == len(names)
        wait_for(lambda: not client.stats().paimon_writes, "every idle table's committer to close", timeout=60)

        def collected() -> bool:
            gc.collect()
            return all(ref() is None for ref in committers)

        wait_for(collected, lambda: f"{sum(ref() is not None for ref in committers)} evicted committer(s) "
                 f"to be garbage; held by {[type(r).__name__ for ref in committers if ref() is not None for r in gc.get_referrers(ref())]}",
                 timeout=60)
    finally:
        client.close()
        server.stop()

def test_past_max_open_tables_the_least_recently_used_idle_committers_close_early(warehouse):
    """With --max-open-tables 3 and an idle timeout of an hour, 8 tables written one after another
    leave 3 committers open (the most recently used), and an evicted table's producer resumes
    exactly-once from the map its next committer reads back."""
    server = RunningServer(warehouse, table_idle_ms=3_600_000, max_open_tables=3)
    client = Client(server.uri, timeout=60)
    try:
        names = [f"db.t{i}" for i in range(8)]
        for name in names:
            client.create_table(name, SCHEMA, options=WRITE_ONLY)
            send(client, name, "p", [0, 1])
        wait_for(lambda: len(client.stats().paimon_writes) <= 3,
                 lambda: f"at most 3 committers open (open: {sorted(client.stats().paimon_writes)})", timeout=60)
        assert set(client.stats().paimon_writes) <= set(names[-4:]), "the most recently used stay open"
        assert client.producer_state("db.t0", "p") == 1
        acks = send(client, "db.t0", "p", [0, 1, 2])  # a resend of 0-1 into an evicted table, and one new batch
        assert [a.seq for a in acks] == [0, 1, 2]
        assert batches_in(client, "db.t0") == {0: 50, 1: 50, 2: 50}
    finally:
        client.close()
        server.stop()


def test_serve_refuses_max_open_tables_below_one(tmp_path):
    from tests.test_cli_serve import cli

    out = cli("serve", "--port", "0", "--warehouse", str(tmp_path / "w"), "--max-open-tables", "0")
    assert out.returncode == 2 and "--max-open-tables (0) must be 1 or more" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_serve_takes_the_table_idle_timeout_in_paimons_duration_grammar():
    from flight_cli.parser import build_parser

    args = build_parser().parse_args(["serve", "--table-idle-timeout", "30 s"])
    assert args.table_idle_timeout == 30_000
    assert build_parser().parse_args(["serve"]).table_idle_timeout == 60_000
