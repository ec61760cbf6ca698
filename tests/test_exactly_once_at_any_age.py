"""Exactly-once at any table age: a named producer's last seq stays known to the table through
compaction, other writers' commits, expiry and restarts, so its resent batches are never written
twice (real servers on loopback ports, real pypaimon tables)."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.ingest.seqs import PROPERTY, RECORD_DIR
from flight_server.paimon import compat
from flight_server.wire import messages, names
from producers import Client
from tests.conftest import RunningServer
from tests.paimon_tables import Warehouse, commit_arrow
from tests.test_ingest import SCHEMA, put_raw, read, rows

pytestmark = pytest.mark.timeout(180)

BATCHES = 10
OPTIONS = {"bucket": "4", "bucket-key": "id"}


def write_batches(client, table: str, producer: str, seqs) -> list:
    """Each batch in its own stream (its own commit); returns the acks."""
    desc = flight.FlightDescriptor.for_command(json.dumps(names.write_command(table, producer)))
    return [put_raw(client, desc, [rows(s)], metadata=lambda _i, s=s: messages.batch_seq(s))[0] for s in seqs]


def resend_everything(client, table: str, producer: str) -> list:
    """The producer lost every ack and resends all its batches in one stream."""
    desc = flight.FlightDescriptor.for_command(json.dumps(names.write_command(table, producer)))
    return put_raw(client, desc, [rows(s) for s in range(BATCHES)], metadata=lambda i: messages.batch_seq(i))


def expire_all_but_latest(client, table: str) -> dict:
    return client.expire_snapshots(table, retain_max=1, retain_min=1, older_than=int(time.time() * 1000) + 60_000)


def carried_by(warehouse: str, table: str) -> list[int]:
    """The kept snapshots that carry a producer map."""
    manager = Warehouse(warehouse).catalog.get_table(table).snapshot_manager()
    snaps = [compat.snapshot(manager, i) for i in range(1, manager.get_latest_snapshot().id + 1)]
    return [s.id for s in snaps if s is not None and PROPERTY in (s.properties or {})]


def ids_of(client, table: str) -> list[int]:
    return read(client, table).column("id").to_pylist()


def restarted_resend_writes_nothing_twice(warehouse: str, table: str, extra_ids: set[int] = frozenset()) -> None:
    """A fresh server knows the producer's last seq; the resent batches are acked, none written again."""
    server = RunningServer(warehouse)
    try:
        client = Client(server.uri, timeout=30)
        assert client.producer_state(table, "p") == BATCHES - 1
        acks = resend_everything(client, table, "p")
        assert [a.seq for a in acks] == list(range(BATCHES))
        ids = ids_of(client, table)
        expected = {b * 1000 + i for b in range(BATCHES) for i in range(50)} | set(extra_ids)
        assert len(ids) == len(expected) and set(ids) == expected  # 0 duplicated, 0 lost
        client.close()
    finally:
        server.stop()


def test_an_idle_producer_past_retention_through_compaction_commits_and_a_restart_writes_nothing_twice(warehouse):
    first = RunningServer(warehouse)
    client = Client(first.uri, timeout=30)
    client.create_table("db.t", SCHEMA, options=OPTIONS)
    write_batches(client, "db.t", "p", range(BATCHES))
    client.compact("db.t")  # the maintainer may have compacted first: either way the latest is a compaction
    latest = Warehouse(warehouse).catalog.get_table("db.t").snapshot_manager().get_latest_snapshot()
    assert latest.commit_kind == "COMPACT"  # COMPACT commits carry no producer map
    expire_all_but_latest(client, "db.t")
    assert carried_by(warehouse, "db.t") == []  # every snapshot that carried the map is gone
    client.close()
    first.stop()
    restarted_resend_writes_nothing_twice(warehouse, "db.t")


def test_an_idle_producer_past_retention_through_an_outside_writers_commits_and_a_restart_writes_nothing_twice(
        warehouse):
    first = RunningServer(warehouse)
    client = Client(first.uri, timeout=30)
    client.create_table("db.t", SCHEMA, options=OPTIONS)
    write_batches(client, "db.t", "p", range(BATCHES))
    outside = Warehouse(warehouse).catalog.get_table("db.t")  # pypaimon itself, not through the server
    extra = set()
    for k in range(3):
        data = pa.Table.from_batches([rows(100 + k, 10)])
        extra.update(data.column("id").to_pylist())
        commit_arrow(outside, data)
    expire_all_but_latest(client, "db.t")
    assert carried_by(warehouse, "db.t") == []
    client.close()
    first.stop()
    restarted_resend_writes_nothing_twice(warehouse, "db.t", extra)


def test_a_map_only_in_snapshots_is_recorded_at_the_next_start_before_anything_expires(warehouse):
    """A table whose map lives only in its snapshots (a server killed before its maintenance round
    recorded it, or one from before the records): the next server that loads it records it, so
    an expiry after that loses nothing."""
    second = RunningServer(warehouse)
    try:
        c2 = Client(second.uri, timeout=30)
        c2.create_table("db.t", SCHEMA, options=OPTIONS)
        table = Warehouse(warehouse).catalog.get_table("db.t")
        builder = table.new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        writer.write_arrow(pa.Table.from_batches([rows(0, 5)]))
        commit.commit(writer.prepare_commit(), snapshot_properties={PROPERTY: json.dumps({"p": 41})})
        writer.close()
        commit.close()
        record_dir = os.path.join(warehouse, "db.db", "t", RECORD_DIR)
        assert not os.path.exists(record_dir)
        assert c2.producer_state("db.t", "p") == 41
        assert os.listdir(record_dir)  # recorded at the start that read the map from the snapshots
        for k in range(2):
            commit_arrow(table, pa.Table.from_batches([rows(200 + k, 5)]))
        expire_all_but_latest(c2, "db.t")
        assert carried_by(warehouse, "db.t") == []
        c2.close()
    finally:
        second.stop()
    third = RunningServer(warehouse)
    try:
        c3 = Client(third.uri, timeout=30)
        assert c3.producer_state("db.t", "p") == 41
        c3.close()
    finally:
        third.stop()
