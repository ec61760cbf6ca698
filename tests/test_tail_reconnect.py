"""`flight_cli tail` across server restarts (issue 48 item 2): kcat reconnects by itself, and so does
tail, within --reconnect-timeout, resuming exactly where it was: no row twice, none lost."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages
from flight_server.wire.requests import PaimonRequest
from producers import Client
from producers.follow_cursor import FollowCursor
from tests.conftest import ROOT, ServerProcess, child_env, wait_for
from tests.paimon_tables import rows

pytestmark = pytest.mark.timeout(180)


class Tail:
    """`flight_cli tail ... --format jsonl` as a child process; its stdout rows and stderr lines
    gathered by threads as they come."""

    def __init__(self, *argv: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", *argv, "--format", "jsonl"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                                     cwd=ROOT)
        self.rows: list[dict] = []
        self.errors: list[str] = []
        self._lines: queue.Queue = queue.Queue()
        for stream, into in ((self.proc.stdout, self.rows), (self.proc.stderr, self.errors)):
            threading.Thread(target=self._gather, args=(stream, into), daemon=True).start()

    def _gather(self, stream, into: list) -> None:
        for line in stream:
            into.append(json.loads(line) if into is self.rows else line.rstrip("\n"))

    def wait_rows(self, n: int, timeout: float = 60) -> list[dict]:
        def enough():
            if len(self.rows) >= n:
                return True
            assert self.proc.poll() is None, f"tail ended with {len(self.rows)} of {n} rows: {self.errors}"
            return False
        wait_for(enough, lambda: f"{n} rows from tail (got {len(self.rows)}; stderr {self.errors})", timeout)
        return self.rows

    def wait_stderr(self, text: str, timeout: float = 60) -> str:
        return wait_for(lambda: next((line for line in self.errors if text in line), None),
                        lambda: f"{text!r} on tail's stderr (got {self.errors})", timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def restart(server: ServerProcess, warehouse: str) -> ServerProcess:
    """The server SIGKILLed and started again on the same port."""
    port = server.uri.rsplit(":", 1)[1]
    server.stop()
    return ServerProcess(warehouse, "--port", port)


def ids(printed: list[dict]) -> list[int]:
    return sorted(r["id"] for r in printed)


@pytest.mark.parametrize("consumer", [None, "c1"])
def test_a_follow_resumes_after_a_restart_with_every_row_once(warehouse, paimon, consumer):
    table = paimon.create("t", buckets=2)
    paimon.commit(table, rows(0, 10))
    server = ServerProcess(warehouse)
    tail = Tail(table, "--uri", server.uri, "--reconnect-timeout", "120",
                *(["--consumer-id", consumer] if consumer else []))
    try:
        tail.wait_rows(10)
        server = restart(server, warehouse)
        paimon.commit(table, rows(10, 5))  # while tail reconnects: not lost
        tail.wait_stderr("reconnected to")
        paimon.commit(table, rows(15, 5))
        printed = tail.wait_rows(20)
        assert ids(printed) == list(range(20)), ids(printed)  # none twice, none lost
        assert {r["_snapshot"] for r in printed if r["id"] >= 10} == {2, 3}
        assert any("reconnecting to " + server.uri in line for line in tail.errors), tail.errors
        if consumer:  # the consumer's progress went on across the restart: everything printed is committed
            client = Client(server.uri)
            try:
                wait_for(lambda: client.consumer_progress(table, consumer) == 4, "the consumer's commit of 3", 60)
            finally:
                client.close()
        paimon.commit(table, rows(20, 1))
        assert ids(tail.wait_rows(21)) == list(range(21))
    finally:
        tail.stop()
        server.stop()


def test_a_follow_opened_again_mid_snapshot_skips_the_rows_it_printed(server, client, paimon):
    """The cursor against a real server: a follow's full read broken off after its first batch,
    opened again where the cursor says, hands out the rest of that snapshot and the next, once."""
    table = paimon.create("big", buckets=-1)
    paimon.commit(table, rows(0, 150_000))  # three batches of up to 64k rows in one endpoint

    def follow(start: str) -> flight.FlightStreamReader:
        cmd = PaimonRequest(table, follow=True, start=start, poll_interval_ms=50).to_json()
        fi = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)), options=client.options())
        assert len(fi.endpoints) == 1
        return client.flight.do_get(fi.endpoints[0].ticket, options=client.options(60))

    cursor = FollowCursor(1, "snapshot-full:1")
    handed: list[int] = []
    first = follow(cursor.start)
    chunk = first.read_chunk()
    assert 0 < chunk.data.num_rows < 150_000
    handed += cursor.admit(0, chunk.data, chunk.app_metadata).column("id").to_pylist()
    first.cancel()  # the stream breaks off mid-snapshot

    assert cursor.resume_start() == "snapshot-full:1"  # no done mark yet: the same full read again
    cursor.reopened(1)
    second = follow(cursor.resume_start())
    paimon.commit(table, rows(150_000, 3))
    while True:
        chunk = second.read_chunk()
        kept = cursor.admit(0, chunk.data, chunk.app_metadata)
        if kept is not None and kept.num_rows:
            handed += kept.column("id").to_pylist()
        if messages.read_mark(chunk.app_metadata).done == 2:
            break
    second.cancel()
    assert sorted(handed) == list(range(150_003))
    assert cursor.resume_start() == "snapshot:3"  # done 1 and 2: a third opening starts after them


def test_a_push_viewer_says_the_restarted_servers_table_is_new(warehouse):
    """SIGTERM fails the viewed partition ("the server is shutting down"), which the server's health
    tells from a producer's failure; the restarted server's table is a new one, viewed from its start."""
    schema = pa.schema([("id", pa.int64())])
    server = ServerProcess(warehouse)
    client = Client(server.uri)
    sink = client.register_streaming_table("pv", schema, capacity=4)  # held open: the partition goes on
    sink.write(pa.record_batch({"id": [1, 2]}, schema=schema))
    tail = Tail("push:pv", "--from", "earliest", "--uri", server.uri)
    try:
        tail.wait_rows(2)
        port = server.uri.rsplit(":", 1)[1]
        server.proc.terminate()
        assert server.proc.wait(60) == 0
        tail.wait_stderr("reconnecting to")
        client.close()
        server = ServerProcess(warehouse, "--port", port)
        client = Client(server.uri)
        sink = client.register_streaming_table("pv", schema, capacity=4)
        sink.write(pa.record_batch({"id": [3]}, schema=schema))
        printed = tail.wait_rows(3)
        assert [(r["id"], r["_seq"]) for r in printed] == [(1, 0), (2, 0), (3, 0)]
        assert "push table 'pv' is memory: viewing the new table from the oldest batch it holds" in \
            tail.wait_stderr("reconnected to")
    finally:
        tail.stop()
        client.close()
        server.stop()


def test_past_the_reconnect_timeout_tail_ends_with_exit_code_1_naming_the_server(warehouse, paimon):
    table = paimon.create("t", buckets=1)
    paimon.commit(table, rows(0, 3))
    server = ServerProcess(warehouse)
    tail = Tail(table, "--uri", server.uri, "--reconnect-timeout", "1")
    try:
        tail.wait_rows(3)
        server.stop()
        assert tail.proc.wait(60) == 1
        message = tail.wait_stderr("could not reconnect")
        assert f"could not reconnect to {server.uri} within 1 s (--reconnect-timeout)" in message, tail.errors
    finally:
        tail.stop()


def test_reconnect_timeout_0_ends_at_once_as_before(warehouse, paimon):
    table = paimon.create("t", buckets=1)
    paimon.commit(table, rows(0, 3))
    server = ServerProcess(warehouse)
    tail = Tail(table, "--uri", server.uri, "--reconnect-timeout", "0")
    try:
        tail.wait_rows(3)
        server.stop()
        assert tail.proc.wait(60) == 1
        tail.wait_stderr(" rows in ")  # its last line
        assert not any("reconnecting" in line for line in tail.errors), tail.errors
        assert any("unavailable" in line.lower() or "socket closed" in line.lower() for line in tail.errors)
    finally:
        tail.stop()


def test_messages_of_a_follow_carry_the_marks_the_cursor_reads():
    """The cursor reads the wire's own marks: a done mark moves it past whole snapshots."""
    cursor = FollowCursor(2, "snapshot:1")
    batch = pa.record_batch({"id": [1, 2]})
    assert cursor.admit(0, batch, pa.py_buffer(messages.snapshot_mark(1))) is batch
    cursor.admit(0, batch.slice(0, 0), pa.py_buffer(messages.done_mark(1)))
    assert cursor.resume_start() == "snapshot:1"  # endpoint 1 has sent nothing yet
    cursor.admit(1, batch.slice(0, 0), pa.py_buffer(messages.done_mark(1)))
    assert cursor.resume_start() == "snapshot:2"
    cursor.reopened(2)
    assert cursor.admit(0, batch, pa.py_buffer(messages.snapshot_mark(1))) is None  # snapshot 1 is done
