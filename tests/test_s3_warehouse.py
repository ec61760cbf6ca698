"""A warehouse on an S3-compatible object store (moto's server, started here) works like a directory."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from pypaimon import CatalogFactory, Schema

from flight_server.paimon.compat import catalog_options
from producers import Client
from tests import zygote
from tests.conftest import ROOT, child_env, wait_for
from tests.paimon_tables import SCHEMA, commit_arrow, rows, sort_rows
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(240)

BUCKET = "fp-warehouse"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server on a free loopback port, with one bucket; its options as the server takes them."""
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test-key",
                          aws_secret_access_key="test-secret", region_name="us-east-1")

    def up() -> bool:
        try:
            client.list_buckets()
            return True
        except Exception:  # noqa: BLE001 - not listening yet
            return False

    try:
        wait_for(up, "moto's S3 server", timeout=30)
        client.create_bucket(Bucket=BUCKET)
        yield {"s3.endpoint": endpoint, "s3.region": "us-east-1", "s3.access-key": "test-key",
               "s3.secret-key": "test-secret", "s3.path-style-access": "true"}
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def warehouse_uri(s3):
    """Tables written with pypaimon straight into the bucket: append, primary-key, partitioned."""
    uri = f"s3://{BUCKET}/wh"
    catalog = CatalogFactory.create(catalog_options(uri, s3))
    catalog.create_database("db", True)
    specs = {"db.events": dict(options={"bucket": "4", "bucket-key": "id"}),
             "db.keyed": dict(primary_keys=["id"], partition_keys=["region"], options={"bucket": "2"})}
    for name, spec in specs.items():
        catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, **spec), False)
        commit_arrow(catalog.get_table(name), rows(0, 300))
        commit_arrow(catalog.get_table(name), rows(200, 300, tag="w"))
    return uri


def reference(s3, uri: str, table: str, snapshot: int | None = None) -> pa.Table:
    t = CatalogFactory.create(catalog_options(uri, s3)).get_table(table)
    if snapshot is not None:
        t = t.copy({"scan.snapshot-id": str(snapshot)})
    rb = t.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


@pytest.fixture(scope="module")
def server(s3, warehouse_uri):
    options = [a for k, v in s3.items() for a in ("--warehouse-option", f"{k}={v}")]
    proc = ServerProcess(warehouse_uri, *options)
    yield proc
    proc.stop()


def read(client: Client, descriptor: flight.FlightDescriptor) -> pa.Table:
    info = client.flight.get_flight_info(descriptor, options=client.options())
    return pa.concat_tables([client.flight.do_get(e.ticket, options=client.options(60)).read_all()
                             for e in info.endpoints])


@pytest.mark.parametrize("table", ["db.events", "db.keyed"])
def test_snapshot_pinned_snapshot_delta_projection_and_filter_read_as_from_a_directory(server, s3, warehouse_uri, table):
    client = Client(server.uri, timeout=30)
    full = read(client, flight.FlightDescriptor.for_path("paimon", table))
    assert sort_rows(full) == sort_rows(reference(s3, warehouse_uri, table))
    pinned = read(client, flight.FlightDescriptor.for_command(json.dumps({"table": table, "snapshot": 1})))
    assert sort_rows(pinned) == sort_rows(reference(s3, warehouse_uri, table, 1))
    delta = read(client, flight.FlightDescriptor.for_command(json.dumps(
        {"table": table, "from_snapshot": 1, "to_snapshot": 2})))
    assert sorted(delta.column("id").to_pylist()) == list(range(200, 500))
    narrow = read(client, flight.FlightDescriptor.for_command(json.dumps(
        {"table": table, "columns": ["id", "region"], "filter": [["id", ">=", 450], ["region", "=", "eu"]]})))
    expected = [i for i in range(450, 500) if i % 3 == 0]
    assert narrow.column_names == ["id", "region"] and sorted(narrow.column("id").to_pylist()) == expected


def test_a_follow_sees_new_commits_and_a_durable_write_lands_in_the_bucket(server, s3, warehouse_uri):
    client = Client(server.uri, timeout=30)
    client.create_table("db.ingested", SCHEMA)
    with client.paimon_sink("db.ingested", producer="p1") as sink:
        sink.write(rows(0, 40))
    assert client.producer_state("db.ingested", "p1") == 0
    assert reference(s3, warehouse_uri, "db.ingested").num_rows == 40

    out = subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", "db.ingested", "--uri", server.uri,
                            "--from", "latest-full", "--format", "jsonl", "--limit", "70"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    first = [json.loads(out.stdout.readline()) for _ in range(40)]  # the full scan of snapshot 1
    with client.paimon_sink("db.ingested", producer="p2") as sink:  # then a commit the follow must see
        sink.write(rows(100, 30))
    stdout, stderr = out.communicate(timeout=120)
    assert out.returncode == 0, stderr
    later = [json.loads(line) for line in stdout.splitlines()]
    assert sorted(r["id"] for r in first) == list(range(40))
    assert sorted(r["id"] for r in later) == list(range(100, 130)) and {r["_snapshot"] for r in later} == {2}


def test_a_warehouse_that_cannot_be_opened_is_one_clear_line(s3):
    options = [a for k, v in {**s3, "s3.endpoint": "::not a url::"}.items() for a in ("--warehouse-option", f"{k}={v}")]
    out = zygote.run([sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--warehouse",
                          f"s3://{BUCKET}/wh", *options],
                         capture_output=True, text=True, timeout=120, env=child_env(), cwd=ROOT)
    assert out.returncode == 2 and "cannot open warehouse s3://" in out.stderr and "--warehouse-option" in out.stderr, \
        out.stderr
