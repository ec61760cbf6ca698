"""Grants as the project's own producers and readers meet them: a write-only principal uses
`Client.sink` and `paimon_sink`; `get_schema` outside a principal's grants is PERMISSION_DENIED."""

from __future__ import annotations

import json
import secrets

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire.actions import PartitionOffsets
from flight_server.wire.errors import PermissionDenied, from_flight
from producers import Client
from producers.examples.events import SCHEMA, batch
from tests.paimon_tables import Warehouse, rows
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(120)

TOKENS = {name: secrets.token_urlsafe(24) for name in ("admin", "writer", "reader")}
PUSH_SCHEMA = pa.schema([("id", pa.int64())])


def serve_secured(tmp_path, warehouse: str):
    """A server process with the three principals, push table orders and Paimon tables db.events
    (empty) and db.secret (5 rows); yields a client per principal."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": [
        {"name": "admin", "token": TOKENS["admin"], "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
        {"name": "writer", "token": TOKENS["writer"], "grants": [{"tables": "orders", "allow": ["write"]},
                                                                 {"tables": "db.events", "allow": ["write"]}]},
        {"name": "reader", "token": TOKENS["reader"], "grants": [{"tables": "db.events", "allow": ["read"]}]},
    ]}))
    Warehouse(warehouse).commit(Warehouse(warehouse).create("secret", buckets=1), rows(0, 5))
    server = ServerProcess(warehouse, "--auth", str(auth))
    clients = {who: Client(server.uri, timeout=10, token=token) for who, token in TOKENS.items()}
    clients["admin"].register("orders", PUSH_SCHEMA, capacity=8)
    clients["admin"].create_table("db.events", SCHEMA)
    yield clients
    for c in clients.values():
        c.close()
    server.stop()


@pytest.fixture
def secured(tmp_path, warehouse):
    yield from serve_secured(tmp_path, warehouse)


@pytest.fixture(scope="module")
def secured_read_only(tmp_path_factory):
    """One such server for the module's tests that only read and are refused (a server process
    starts in seconds): they change nothing another test sees."""
    tmp = tmp_path_factory.mktemp("secured")
    (tmp / "warehouse").mkdir()
    yield from serve_secured(tmp, str(tmp / "warehouse"))


def test_a_write_only_principal_uses_the_projects_own_producers(secured):
    writer, admin = secured["writer"], secured["admin"]
    with writer.sink("orders", 0) as sink:
        sink.write(pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=PUSH_SCHEMA))
    got = [b for ep in admin.info("orders").endpoints for b in admin.read_endpoint(ep, timeout=10)]
    assert sum(b.num_rows for b in got) == 3
    with writer.paimon_sink("db.events", producer="w1") as sink:
        sink.write(batch("w1", 0, 10))
    assert writer.producer_state("db.events", "w1") == 0
    info = admin.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.events"), admin.options())
    assert sum(admin.flight.do_get(ep.ticket, admin.options()).read_all().num_rows for ep in info.endpoints) == 10


@pytest.mark.parametrize("who, path", [
    ("writer", ("paimon", "db.secret")), ("writer", ("push", "elsewhere")), ("reader", ("push", "orders")),
    ("reader", ("paimon", "db.missing")), ("writer", ("paimon", "db.missing")),
])
def test_get_schema_outside_the_grants_is_refused_naming_principal_and_table(secured_read_only, who, path):
    """Refused before the table is looked up (a missing table is not told from a hidden one).
    pyarrow's Python servers cannot give GetSchema a Flight status (its `_get_schema` callback, unlike
    the others, does not turn a FlightError into one): the refusal arrives as UNKNOWN whose detail
    is the code `permission_denied` (never a traceback), which `from_flight` reads."""
    c = secured_read_only[who]
    with pytest.raises(pa.ArrowException) as e:
        c.flight.get_schema(flight.FlightDescriptor.for_path(*path), c.options())
    assert ". Detail: Python exception: permission_denied" in str(e.value) and "Traceback" not in str(e.value)
    error = from_flight(e.value)
    assert isinstance(error, PermissionDenied)
    assert f"Principal {who!r} may not read" in error.message and repr(path[1]) in error.message


def test_offsets_take_the_read_grant_as_stats_does(secured):
    """A push table's offsets are read as its stats are: a write-only principal is refused naming
    the grant; one that may read gets them."""
    with pytest.raises(flight.FlightUnauthorizedError, match=r"Principal 'writer' may not read table 'orders' "
                                                             r"\(action 'offsets'\): it holds no 'read' grant"):
        secured["writer"].offsets("orders")
    assert secured["admin"].offsets("orders") == {"0": PartitionOffsets(0, 0, "open")}
