"""N servers over one warehouse: endpoints spread over the advertised servers, readers fail over."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from producers import Client
from tests.conftest import ROOT, child_env
from tests.paimon_tables import Warehouse, rows
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(240)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def do_gets(log_path) -> int:
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    return sum(1 for line in lines if line.get("rpc") == "do_get" and line["event"] == "rpc_done")


@pytest.fixture
def two_servers(warehouse, tmp_path, monkeypatch):
    """Servers A and B over one warehouse with one ticket key, each advertising both."""
    monkeypatch.setenv("FLIGHT_PAIMON_TICKET_KEY", "shared-key-of-this-test")
    ports = [free_port(), free_port()]
    uris = [f"grpc://127.0.0.1:{p}" for p in ports]
    advertise = [a for u in uris for a in ("--advertise", u)]
    servers = []
    for name, port in zip("ab", ports):
        log = tmp_path / f"server-{name}.log"
        proc = ServerProcess(warehouse, "--port", str(port), *advertise, stderr=open(log, "w"))
        proc.log_path = log
        servers.append(proc)
    yield servers
    for s in servers:
        s.stop()


def test_endpoints_list_every_server_rotated_and_push_endpoints_only_their_own(two_servers, warehouse):
    a, b = two_servers
    wh = Warehouse(warehouse)
    wh.commit(wh.create("spread", buckets=4), rows(0, 400))
    client = Client(a.uri, timeout=10)
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.spread"),
                                         options=client.options())
    firsts = [e.locations[0].uri.decode() for e in info.endpoints]
    assert firsts == [a.uri, b.uri, a.uri, b.uri]
    assert all(len(e.locations) == 2 for e in info.endpoints)
    client.register("local", pa.schema([("x", pa.int64())]), partitions=2)
    assert [[loc.uri.decode() for loc in e.locations] for e in client.info("local").endpoints] == [[a.uri]] * 2


def test_spark_tasks_read_from_both_servers_and_fail_over_when_one_is_killed(spark, two_servers, warehouse):
    from spark_reader import FlightPaimonDataSource

    spark.dataSource.register(FlightPaimonDataSource)
    a, b = two_servers
    wh = Warehouse(warehouse)
    wh.commit(wh.create("orders", buckets=4), rows(0, 4000))
    df = spark.read.format("flight-paimon").option("uri", a.uri).option("table", "db.orders").load()
    assert sorted(r.id for r in df.select("id").collect()) == list(range(4000))
    assert do_gets(a.log_path) == 2 and do_gets(b.log_path) == 2  # 4 buckets, 2 tasks each

    a.stop()  # SIGKILL: the endpoints that list A first fail over to B
    df = spark.read.format("flight-paimon").option("uri", b.uri).option("table", "db.orders").load()
    assert sorted(r.id for r in df.select("id").collect()) == list(range(4000))
    assert do_gets(b.log_path) == 2 + 4

    # flight_cli tail fails over the same way
    out = subprocess.run([sys.executable, "-m", "flight_cli", "tail", "db.orders", "--uri", b.uri,
                          "--from", "latest-full", "--format", "jsonl", "--limit", "4000"],
                         capture_output=True, text=True, timeout=120, env=child_env(), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert sorted(json.loads(line)["id"] for line in out.stdout.splitlines()) == list(range(4000))


def test_a_read_resumes_on_the_next_server_after_the_rows_it_has_when_its_server_dies_mid_stream(two_servers, warehouse):
    from producers.client import EndpointReader, locations_of

    a, b = two_servers
    wh = Warehouse(warehouse)
    wh.commit(wh.create("big", buckets=1), rows(0, 600_000))
    client = Client(a.uri, timeout=30)
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.big"), options=client.options())
    (endpoint,) = info.endpoints
    reader = EndpointReader(locations_of(endpoint, a.uri), endpoint.ticket, client.credentials, resume=True)
    chunks = iter(reader)
    got = [next(chunks).data]
    assert reader.uri == a.uri
    a.stop()  # SIGKILL mid-stream: what gRPC had not yet delivered is lost with it
    got += [c.data for c in chunks]
    assert reader.uri == b.uri and reader.failovers == 1
    ids = pa.Table.from_batches(got).column("id").to_pylist()
    assert len(ids) == 600_000 and sorted(ids) == list(range(600_000))  # every row once
