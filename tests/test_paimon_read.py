"""Bounded Paimon reads through a real server: full, pinned, delta, projection, filter, changelog."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest

from flight_server.server import FlightPaimonServer
from tests.paimon_tables import Warehouse, command, info, read_all, rows, sort_rows


@pytest.fixture
def wh(warehouse):
    return Warehouse(warehouse)


def path(table: str) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_path("paimon", table)


def test_append_table_full_read_equals_pypaimon_with_one_endpoint_per_bucket(wh, client):
    t = wh.create("orders", buckets=4)
    for i in range(3):
        wh.commit(t, rows(i * 1000, 1000))
    fi, got = read_all(client, path(t))
    ref = wh.read(t)
    assert len(fi.endpoints) == 4
    assert fi.total_records == 3000
    assert got.schema == ref.schema
    assert sort_rows(got) == sort_rows(ref)


def test_unaware_bucket_table_full_read_equals_pypaimon(wh, client):
    t = wh.create("logs", buckets=-1)
    for i in range(3):
        wh.commit(t, rows(i * 500, 500))
    fi, got = read_all(client, path(t))
    assert len(fi.endpoints) >= 1
    assert sort_rows(got) == sort_rows(wh.read(t))


def test_primary_key_table_read_is_merged_like_pypaimon(wh, client):
    t = wh.create("users", buckets=2, primary_keys=["id"])
    wh.commit(t, rows(0, 1000, "a"))
    wh.commit(t, rows(500, 1000, "b"))  # 500 keys updated, 500 new
    wh.commit(t, rows(0, 10, "c"))
    fi, got = read_all(client, path(t))
    ref = wh.read(t)
    assert len(fi.endpoints) == 2
    assert got.num_rows == 1500
    assert got.schema == ref.schema  # primary-key columns come back not null
    assert sort_rows(got) == sort_rows(ref)
    names = dict(zip(got.column("id").to_pylist(), got.column("name").to_pylist()))
    assert names[0] == "c0" and names[600] == "b600" and names[100] == "a100"


def test_partitioned_primary_key_table_read_equals_pypaimon(wh, client):
    t = wh.create("sales", buckets=3, primary_keys=["id", "region"], partition_keys=["region"])
    wh.commit(t, rows(0, 900, "a"))
    wh.commit(t, rows(300, 900, "b"))
    fi, got = read_all(client, path(t))
    assert len(fi.endpoints) == 3
    assert sort_rows(got) == sort_rows(wh.read(t))
    assert got.num_rows == 1200


def test_command_full_read_equals_path_read(wh, client):
    t = wh.create("orders", buckets=2)
    wh.commit(t, rows(0, 100))
    _, by_path = read_all(client, path(t))
    _, by_cmd = read_all(client, command({"table": t}))
    assert sort_rows(by_path) == sort_rows(by_cmd)


def test_pinned_snapshot_reads_the_table_as_of_that_snapshot(wh, client):
    t = wh.create("orders", buckets=2)
    s1 = wh.commit(t, rows(0, 100))
    s2 = wh.commit(t, rows(100, 100))
    fi = info(client, command({"table": t, "snapshot": s1}))
    wh.commit(t, rows(200, 100))  # a commit between planning and reading changes nothing
    got = pa.Table.from_batches(
        [c.data for ep in fi.endpoints for c in client.flight.do_get(ep.ticket, options=client.options())],
        schema=fi.schema)
    assert sort_rows(got) == sort_rows(wh.read(t, s1))
    _, at_s2 = read_all(client, command({"table": t, "snapshot": s2}))
    assert sorted(at_s2.column("id").to_pylist()) == list(range(200))


def test_latest_read_is_pinned_when_planned(wh, client):
    t = wh.create("orders", buckets=2)
    wh.commit(t, rows(0, 100))
    fi = info(client, path(t))
    wh.commit(t, rows(100, 100))
    got = [c.data for ep in fi.endpoints for c in client.flight.do_get(ep.ticket, options=client.options())]
    assert sum(b.num_rows for b in got) == 100


def test_plans_with_one_pin_read_the_snapshot_the_first_read(wh, client):
    """The tasks of one Spark action each plan; a pin makes them agree on the snapshot."""
    t = wh.create("orders", buckets=2)
    wh.commit(t, rows(0, 100))
    _, first = read_all(client, command({"table": t, "pin": "tok:1"}))
    wh.commit(t, rows(100, 100))
    _, same_pin = read_all(client, command({"table": t, "pin": "tok:1", "buckets": [1]}))
    _, next_pin = read_all(client, command({"table": t, "pin": "tok:2"}))
    assert first.num_rows == 100
    assert set(same_pin.column("id").to_pylist()) <= set(range(100)) and same_pin.num_rows > 0
    assert next_pin.num_rows == 200
    for bad in ({"table": t, "pin": "a b"}, {"table": t, "pin": "x", "snapshot": 1}, {"table": t, "pin": 7}):
        with pytest.raises(pa.ArrowInvalid, match="'pin'"):
            info(client, command(bad))


def test_delta_holds_exactly_the_rows_of_snapshots_after_a_up_to_b(wh, client):
    t = wh.create("orders", buckets=4)
    snaps = [wh.commit(t, rows(i * 100, 100)) for i in range(5)]
    assert snaps == [1, 2, 3, 4, 5]
    fi, got = read_all(client, command({"table": t, "from_snapshot": 2, "to_snapshot": 4}))
    assert len(fi.endpoints) == 4
    assert fi.total_records == 200
    assert sorted(got.column("id").to_pylist()) == list(range(200, 400))
    _, empty = read_all(client, command({"table": t, "from_snapshot": 3, "to_snapshot": 3}))
    assert empty.num_rows == 0
    _, from_zero = read_all(client, command({"table": t, "from_snapshot": 0, "to_snapshot": 1}))
    assert sorted(from_zero.column("id").to_pylist()) == list(range(100))


def test_primary_key_delta_holds_every_version_committed_in_range(wh, client):
    t = wh.create("users", buckets=2, primary_keys=["id"])
    wh.commit(t, rows(0, 10, "a"))
    wh.commit(t, rows(0, 10, "b"))
    wh.commit(t, rows(0, 10, "c"))
    _, got = read_all(client, command({"table": t, "from_snapshot": 1, "to_snapshot": 3}))
    assert sorted(got.column("name").to_pylist()) == sorted([f"b{i}" for i in range(10)] + [f"c{i}" for i in range(10)])


def test_projection_and_filter_return_the_right_rows_and_fewer_bytes(wh, client):
    t = wh.create("orders", buckets=4)
    for i in range(4):
        wh.commit(t, rows(i * 2500, 2500))
    full_info, full = read_all(client, path(t))
    cmd = {"table": t, "columns": ["id", "amount"],
           "filter": [["id", ">=", 9000], ["region", "in", ["eu", "us"]], ["name", "is_not_null"]]}
    fi, got = read_all(client, command(cmd))
    expected = full.filter(pc.and_(pc.greater_equal(full["id"], 9000), pc.is_in(full["region"], pa.array(["eu", "us"]))))
    assert got.schema.names == ["id", "amount"]
    assert fi.schema == got.schema
    assert sort_rows(got) == sort_rows(expected.select(["id", "amount"]))
    assert got.nbytes < full.nbytes / 10
    _, proj_only = read_all(client, command({"table": t, "columns": ["id"]}))
    assert proj_only.num_rows == full.num_rows and proj_only.nbytes < full.nbytes / 3


def test_filter_operators_match_arrow_compute(wh, client):
    t = wh.create("orders", buckets=2)
    data = rows(0, 300)
    data = data.set_column(1, "name", pa.array([None if i % 10 == 0 else f"n{i}" for i in range(300)]))
    wh.commit(t, data)
    cases = {
        "=": (["id", "=", 7], pc.equal(data["id"], 7)),
        "!=": (["region", "!=", "eu"], pc.not_equal(data["region"], "eu")),
        "<": (["amount", "<", 10.0], pc.less(data["amount"], 10.0)),
        "<=": (["id", "<=", 3], pc.less_equal(data["id"], 3)),
        ">": (["id", ">", 290], pc.greater(data["id"], 290)),
        "is_null": (["name", "is_null"], pc.is_null(data["name"])),
        "is_not_null": (["name", "is_not_null"], pc.is_valid(data["name"])),
    }
    for op, (cond, mask) in cases.items():
        _, got = read_all(client, command({"table": t, "filter": [cond]}))
        assert sorted(got.column("id").to_pylist()) == sorted(data.filter(mask).column("id").to_pylist()), op


def test_changelog_adds_a_leading_row_kind_column(wh, client):
    t = wh.create("users", buckets=2, primary_keys=["id"])
    wh.commit(t, rows(0, 20))
    fi, got = read_all(client, command({"table": t, "changelog": True}))
    assert got.schema.names[0] == "_row_kind"
    assert fi.schema == got.schema
    assert set(got.column("_row_kind").to_pylist()) == {"+I"}
    assert got.num_rows == 20


def test_bucket_selection_reads_only_those_buckets(wh, client):
    t = wh.create("orders", buckets=4)
    wh.commit(t, rows(0, 400))
    fi, got = read_all(client, command({"table": t, "buckets": [1, 3]}))
    assert len(fi.endpoints) == 2
    per_bucket = {}
    for b in range(4):
        _, part = read_all(client, command({"table": t, "buckets": [b]}))
        per_bucket[b] = set(part.column("id").to_pylist())
    assert set(got.column("id").to_pylist()) == per_bucket[1] | per_bucket[3]
    assert sum(len(v) for v in per_bucket.values()) == 400


def test_batches_hold_at_least_64k_rows(wh, client):
    t = wh.create("big", buckets=1)
    wh.commit(t, rows(0, 100_000))
    fi = info(client, path(t))
    sizes = [c.data.num_rows for c in client.flight.do_get(fi.endpoints[0].ticket, options=client.options())]
    assert sum(sizes) == 100_000
    assert len(sizes) == 2 and sizes[0] >= 65536  # whole batches: one of at least 64k rows, then the rest


def test_tickets_are_served_by_any_server_over_the_same_warehouse(wh, warehouse):
    t = wh.create("orders", buckets=2)
    wh.commit(t, rows(0, 50))
    servers = [FlightPaimonServer("grpc://127.0.0.1:0", ticket_key=b"k" * 32, warehouse=warehouse) for _ in range(2)]
    try:
        a, b = (flight.FlightClient(s.uri) for s in servers)
        opts = flight.FlightCallOptions(timeout=10)
        fi = a.get_flight_info(path(t), options=opts)
        got = [c.data for ep in fi.endpoints for c in b.do_get(ep.ticket, options=opts)]
        assert sum(x.num_rows for x in got) == 50
    finally:
        for s in servers:
            s.shutdown()


def test_latest_snapshot_action_and_list_flights(wh, client):
    t = wh.create("orders", buckets=3)
    assert client.action("latest_snapshot", {"table": t}) == {"snapshot_id": None, "earliest_snapshot_id": None}
    wh.commit(t, rows(0, 10))
    wh.commit(t, rows(10, 10))
    assert client.action("latest_snapshot", {"table": t}) == {"snapshot_id": 2, "earliest_snapshot_id": 1}
    listed = {tuple(p.decode() for p in f.descriptor.path): f for f in client.flight.list_flights(options=client.options())}
    entry = listed[("paimon", t)]
    assert entry.schema.names == ["id", "name", "amount", "region"]
    assert b'"buckets": 3' in entry.app_metadata and b'"latest_snapshot": 2' in entry.app_metadata


def test_empty_table_reads_no_rows_with_its_schema(wh, client):
    t = wh.create("orders", buckets=2)
    fi, got = read_all(client, path(t))
    assert len(fi.endpoints) == 2
    assert got.num_rows == 0 and got.schema.names == ["id", "name", "amount", "region"]


def test_snapshot_pins_are_bounded_and_forget_idle_ones():
    from flight_server.paimon.pins import SnapshotPins

    pins = SnapshotPins(max_pins=2, idle_seconds=3600)
    assert pins.resolve("db.t", "a", 5) == 5 and pins.resolve("db.t", "a", 9) == 5
    pins.resolve("db.t", "b", 6)
    pins.resolve("db.t", "c", 7)  # the least recently used ("a") makes room
    assert pins.resolve("db.t", "a", 8) == 8 and pins.resolve("db.u", "c", 1) == 1
    idle = SnapshotPins(idle_seconds=-1)  # every pin is past its idle time at the next call
    idle.resolve("db.t", "a", 1)
    assert idle.resolve("db.t", "a", 2) == 2
