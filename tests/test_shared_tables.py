"""Exactly-once when the table is shared: two servers over one warehouse writing one named
producer, another server's drop and create, another tool's rollback (real servers on loopback
ports, real pypaimon tables)."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages, names
from flight_server.wire.errors import from_flight
from producers import Client
from tests.conftest import RunningServer, wait_for
from tests.paimon_tables import Warehouse
from tests.test_ingest import SCHEMA, put_raw, read, rows

pytestmark = pytest.mark.timeout(180)

WRITE_ONLY = {"write-only": "true"}  # every snapshot a group commit: the tests count them


def named(table: str, producer: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps(names.write_command(table, producer)))


def send(client, table: str, producer: str, seqs: list[int]) -> list:
    """One stream of the producer's batches `seqs` (batch number = seq); returns the acks."""
    return put_raw(client, named(table, producer), [rows(s) for s in seqs],
                   metadata=lambda i: messages.batch_seq(seqs[i]))


def batches_in(client, table: str) -> Counter:
    """How many rows of each batch number the table holds (a batch is 50 rows)."""
    return Counter(read(client, table).column("batch").to_pylist())


class OpenStream:
    """A named producer's stream held open: batches sent one at a time, acks read as they come."""

    def __init__(self, client, table: str, producer: str):
        self.writer, self.reader = client.flight.do_put(named(table, producer), SCHEMA)
        self.sent = 0

    def send(self, seq: int) -> None:
        self.writer.write_with_metadata(rows(seq), pa.py_buffer(messages.batch_seq(seq)))
        self.sent += 1

    def ack(self):
        return messages.read_ack(self.reader.read())

    def end(self) -> list:
        """The end marker, then every ack left; raises the stream's error."""
        self.writer.write_metadata(pa.py_buffer(messages.end(self.sent)))
        self.writer.done_writing()
        acks = []
        try:
            while (buf := self.reader.read()) is not None:
                acks.append(messages.read_ack(buf))
        finally:
            self.writer.close()
        return acks


@pytest.fixture
def two_servers(warehouse):
    a, b = RunningServer(warehouse), RunningServer(warehouse)
    ca, cb = Client(a.uri, timeout=60), Client(b.uri, timeout=60)
    yield ca, cb
    ca.close(), cb.close()
    a.stop(), b.stop()


def test_a_resend_through_another_server_is_acked_and_not_written_again(two_servers):
    ca, cb = two_servers
    ca.create_table("db.t", SCHEMA, options=WRITE_ONLY)
    send(cb, "db.t", "p", [0, 1, 2])
    send(ca, "db.t", "p", [3, 4, 5])
    acks = send(cb, "db.t", "p", [3, 4, 5])  # the producer lost A's acks and fails over to B
    assert [a.seq for a in acks] == [3, 4, 5]
    assert all(a.snapshot is not None for a in acks)
    assert batches_in(ca, "db.t") == {b: 50 for b in range(6)}
    assert ca.producer_state("db.t", "p") == cb.producer_state("db.t", "p") == 5


def big(seq: int) -> pa.RecordBatch:
    """A batch of 2 MiB: past A's --commit-bytes, it has A commit at once what it holds."""
    return pa.record_batch([pa.array(range(50), pa.int64()), pa.array([seq] * 50, pa.int64()),
                            pa.array(["x" * 42_000] * 50)], schema=SCHEMA)


def test_batches_waiting_in_one_servers_commit_and_resent_through_another_land_once(warehouse):
    """The producer's batches wait in A's group commit (A commits once a minute, or once 1 MiB
    waits); it fails over to B, which has not seen them, and resends them; then A gets the bytes
    that make it commit: the server that commits second (A) is refused."""
    a = RunningServer(warehouse, commit_interval_ms=60_000, commit_bytes=1 << 20)
    b = RunningServer(warehouse)
    ca, cb = Client(a.uri, timeout=60), Client(b.uri, timeout=60)
    try:
        ca.create_table("db.t", SCHEMA, options=WRITE_ONLY)
        send(ca, "db.t", "other", [100])  # the first commit after a quiet spell: A's minute now runs
        stream = OpenStream(ca, "db.t", "p")
        for seq in (0, 1, 2):
            stream.send(seq)
        def held_by_a():
            writes = ca.stats(table="db.t").paimon_writes["db.t"]
            return writes.queued_batches + writes.written_batches == 3
        wait_for(held_by_a, "A to hold the producer's batches, uncommitted")
        assert cb.producer_state("db.t", "p") is None  # B cannot know them
        outcomes = {}
        try:
            outcomes["b"] = [x.seq for x in send(cb, "db.t", "p", [0, 1, 2])]
        except flight.FlightError as e:
            outcomes["b"] = from_flight(e)
        stream.writer.write_with_metadata(big(3), pa.py_buffer(messages.batch_seq(3)))  # A commits now
        stream.sent += 1
        try:
            outcomes["a"] = [x.seq for x in stream.end()]
        except flight.FlightError as e:
            outcomes["a"] = from_flight(e)
        assert outcomes["b"] == [0, 1, 2], outcomes  # B committed first
        error = outcomes["a"]
        assert error.code == "commit_raced" and "'p'" in str(error) and "already" in str(error), outcomes
        assert batches_in(ca, "db.t") == {100: 50, 0: 50, 1: 50, 2: 50}
        assert ca.producer_state("db.t", "p") == cb.producer_state("db.t", "p") == 2
    finally:
        ca.close(), cb.close()
        a.stop(), b.stop()


def test_a_drop_and_create_through_another_server_fails_the_open_stream_and_writes_nothing_new(two_servers):
    ca, cb = two_servers
    ca.create_table("db.t", SCHEMA, options=WRITE_ONLY)
    stream = OpenStream(ca, "db.t", "p")
    stream.send(0)
    assert stream.ack().seq == 0
    cb.drop_table("db.t")
    cb.create_table("db.t", SCHEMA, options=WRITE_ONLY)
    for seq in (1, 2, 3):
        stream.send(seq)
    with pytest.raises(flight.FlightError) as failed:
        stream.end()
    error = from_flight(failed.value)
    assert "dropped" in str(error) and "'db.t'" in str(error), error
    assert read(cb, "db.t").num_rows == 0
    assert cb.latest_snapshot("db.t").snapshot_id is None
    assert ca.producer_state("db.t", "p") is None and cb.producer_state("db.t", "p") is None
    acks = send(ca, "db.t", "p", [0])  # the new table takes the producer's writes from scratch
    assert [x.seq for x in acks] == [0] and batches_in(cb, "db.t") == {0: 50}


def test_a_rollback_by_another_tool_is_seen_by_the_running_server(warehouse):
    server = RunningServer(warehouse)
    client = Client(server.uri, timeout=60)
    try:
        client.create_table("db.t", SCHEMA, options=WRITE_ONLY)
        for seq in range(10):
            send(client, "db.t", "p", [seq])  # snapshots 1-10, one batch each
        assert client.producer_state("db.t", "p") == 9
        Warehouse(warehouse).catalog.get_table("db.t").rollback_to(5)  # another tool: 5-9 are gone
        assert client.producer_state("db.t", "p") == 4
        acks = send(client, "db.t", "p", list(range(10)))  # the producer resends everything
        assert [a.seq for a in acks] == list(range(10))
        assert all(a.snapshot > 5 for a in acks[5:])  # written again, in new snapshots
        assert batches_in(client, "db.t") == {b: 50 for b in range(10)}
    finally:
        client.close()
        server.stop()


def test_a_drop_whose_delete_another_writer_raced_after_the_schema_went_still_drops(warehouse):
    """Found by chaos ("two servers: drop and create on one while the other serves streams", seed
    11, runs 2 and 3): the drop's first delete removed the table's schema, then failed (ENOTEMPTY)
    on a file the other server wrote meanwhile; the next attempt asked pypaimon to drop a table
    whose schema was gone, which is "not found", and the drop answered NOT_FOUND "does not exist"
    with the table's directory left behind. The attempts after the first delete the directory."""
    import errno
    import os
    import shutil

    from flight_server.paimon import compat

    catalog = compat.create_catalog(warehouse)
    catalog.create_database("db", True)
    compat.create_table(catalog, "db.t", SCHEMA, None, None, None)
    directory = os.path.join(warehouse, "db.db", "t")
    delete, calls = catalog.file_io.delete, []

    def raced(path, recursive=False):  # the first delete: the schema goes, then another writer's file
        calls.append(path)
        if len(calls) == 1:
            shutil.rmtree(os.path.join(directory, "schema"))
            raise OSError(errno.ENOTEMPTY, "Directory not empty", directory)
        return delete(path, recursive)

    catalog.file_io.delete = raced
    assert compat.drop_table(catalog, "db.t") is True
    assert len(calls) == 2 and not os.path.exists(directory)
    with pytest.raises(compat.NOT_FOUND_ERRORS):
        compat.drop_table(catalog, "db.t")  # a table that is not there is still NOT_FOUND
