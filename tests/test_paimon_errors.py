"""Bad Paimon requests get a clear error naming what is wrong, with the right wire code."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.requests import parse_command
from tests.paimon_tables import Warehouse, command, info, rows


@pytest.fixture
def table(warehouse):
    wh = Warehouse(warehouse)
    t = wh.create("orders", buckets=2)
    for i in range(3):
        wh.commit(t, rows(i * 10, 10))
    return t


def _error(client, cmd) -> tuple[type, str]:
    desc = command(cmd) if isinstance(cmd, dict) else cmd
    with pytest.raises((flight.FlightError, pa.ArrowException, KeyError)) as e:
        info(client, desc)
    return type(e.value), str(e.value).splitlines()[0]


def test_unknown_table_is_not_found_and_named(client, table):
    kind, msg = _error(client, {"table": "db.missing"})
    assert issubclass(kind, KeyError) and "'db.missing' does not exist" in msg
    kind, msg = _error(client, flight.FlightDescriptor.for_path("paimon", "nodb.t"))
    assert issubclass(kind, KeyError) and "'nodb.t' does not exist" in msg


def test_future_snapshot_is_named(client, table):
    kind, msg = _error(client, {"table": table, "snapshot": 7})
    assert issubclass(kind, KeyError) and "Snapshot 7" in msg and "latest is 3" in msg
    _, msg = _error(client, {"table": table, "from_snapshot": 1, "to_snapshot": 9})
    assert "Snapshot 9" in msg
    _, msg = _error(client, {"table": table, "follow": True, "start": "snapshot:9"})
    assert "snapshot 9" in msg


def test_expired_snapshot_is_named(client, table, warehouse):
    # pypaimon never expires snapshots; remove the first one the way expiration does.
    snap_dir = os.path.join(warehouse, "db.db", "orders", "snapshot")
    os.remove(os.path.join(snap_dir, "snapshot-1"))
    with open(os.path.join(snap_dir, "EARLIEST"), "w") as f:
        f.write("2")
    kind, msg = _error(client, {"table": table, "snapshot": 1})
    assert issubclass(kind, KeyError) and "Snapshot 1" in msg and "expired" in msg
    _, msg = _error(client, {"table": table, "from_snapshot": 0, "to_snapshot": 2})
    assert "Snapshot 1" in msg and "expired" in msg
    _, msg = _error(client, {"table": table, "follow": True, "start": "snapshot:1"})
    assert "snapshot 1" in msg and "expired" in msg


def test_filter_or_projection_on_a_missing_column_is_named(client, table):
    kind, msg = _error(client, {"table": table, "filter": [["nope", "=", 1]]})
    assert issubclass(kind, pa.ArrowInvalid) and "no column 'nope'" in msg and "filter" in msg
    _, msg = _error(client, {"table": table, "columns": ["id", "ghost"]})
    assert "no column 'ghost'" in msg
    _, msg = _error(client, {"table": table, "filter": [["id", "=", "seven"]]})
    assert "'seven'" in msg and "'id'" in msg


@pytest.mark.parametrize("cmd, needle", [
    ({"table": "orders"}, "'orders'"),
    ({"table": "db.orders", "snapshots": 1}, "'snapshots'"),
    ({"table": "db.orders", "snapshot": "3"}, "'snapshot'"),
    ({"table": "db.orders", "snapshot": 1, "follow": True}, "exclude"),
    ({"table": "db.orders", "from_snapshot": 3, "to_snapshot": 1}, "reversed"),
    ({"table": "db.orders", "to_snapshot": 1}, "'from_snapshot'"),
    ({"table": "db.orders", "filter": [["id", "~", 1]]}, "'~'"),
    ({"table": "db.orders", "filter": [["id", "in", 1]]}, "'in'"),
    ({"table": "db.orders", "filter": "id > 1"}, "'filter'"),
    ({"table": "db.orders", "start": "latest"}, "'start'"),
    ({"table": "db.orders", "follow": True, "start": "yesterday"}, "'yesterday'"),
    ({"table": "db.orders", "buckets": [-1]}, "'buckets'"),
    ({"table": "db.orders", "follow": True, "consumer_id": "a/b"}, "'consumer_id'"),
])
def test_malformed_command_names_the_bad_key(cmd, needle):
    with pytest.raises(InvalidRequest) as e:
        parse_command(cmd)
    assert needle in str(e.value)


def test_malformed_command_over_the_wire(client, table):
    kind, msg = _error(client, flight.FlightDescriptor.for_command(b"{not json"))
    assert issubclass(kind, pa.ArrowInvalid) and "JSON" in msg
    kind, msg = _error(client, {"table": table, "colums": ["id"]})
    assert issubclass(kind, pa.ArrowInvalid) and "'colums'" in msg
    kind, msg = _error(client, {"table": table, "buckets": [5]})
    assert "Bucket 5" in msg and "2 buckets" in msg


def test_forged_paimon_ticket_is_refused(client, table):
    fi = info(client, command({"table": table}))
    forged = flight.Ticket(fi.endpoints[0].ticket.ticket.replace(b"fp1.", b"fp1.x", 1))
    with pytest.raises(pa.ArrowInvalid, match="ticket"):
        list(client.flight.do_get(forged, options=client.options()))


def test_latest_snapshot_of_unknown_table_is_not_found(client, table):
    with pytest.raises(KeyError, match="'db.nope' does not exist"):
        client.action("latest_snapshot", {"table": "db.nope"})
    with pytest.raises(pa.ArrowInvalid, match="'table'"):
        client.action("latest_snapshot", {})


@pytest.mark.parametrize("name, needle", [
    ("db.t$snapshots", "system tables or branches"), ("db.t$branch_b1", "system tables or branches"),
    ("db.t\x00x", "control character"), ("d\x00b.t", "control character"), ("db.t\n", "control character"),
])
def test_reserved_and_unprintable_table_names_are_refused_before_anything_is_written(client, warehouse, name, needle):
    schema = pa.schema([("id", pa.int64())])
    with pytest.raises(pa.ArrowInvalid, match=needle):
        client.create_table(name, schema)
    with pytest.raises(pa.ArrowInvalid, match=needle):
        info(client, flight.FlightDescriptor.for_path("paimon", name))
    assert os.listdir(warehouse) == []  # not even the database was created


@pytest.mark.parametrize("consumer_id", [".", ".."])
def test_dot_consumer_ids_are_refused_as_invalid(client, table, consumer_id):
    with pytest.raises(pa.ArrowInvalid, match="not only dots"):
        client.action("consumer_commit", {"table": table, "consumer_id": consumer_id, "next_snapshot": 1})


def test_do_exchange_is_unimplemented_without_a_traceback(client):
    with pytest.raises(pa.ArrowNotImplementedError) as e:
        writer, reader = client.flight.do_exchange(flight.FlightDescriptor.for_path("x"), client.options())
        writer.done_writing()
        reader.read_all()
    assert "has no DoExchange" in str(e.value) and "Traceback" not in str(e.value)


def test_not_found_and_invalid_carry_their_code_not_a_traceback(client, table):
    """pyarrow's Python server writes the detail of a NOT_FOUND or INVALID_ARGUMENT status with
    `traceback.format_exception` (the server's traceback and paths); the server's one process-wide
    patch, flight_server.status.install_clean_details, makes it the error's code (the README says
    so): this fails if it is lost."""
    for cmd, kind, code in (({"table": "db.missing"}, KeyError, "not_found"),
                            ({"table": table, "colums": ["id"]}, pa.ArrowInvalid, "invalid")):
        with pytest.raises(kind) as e:
            info(client, command(cmd))
        text = str(e.value)
        assert f". Detail: Python exception: {code}" in text and "Traceback" not in text and ".py" not in text, text
