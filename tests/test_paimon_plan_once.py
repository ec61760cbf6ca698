"""Plan once: get_flight_info pins each endpoint's splits in its ticket, so do_get reads no manifest.

Shown the hard way: after planning, the table's manifest directory is moved away; a pinned ticket
still reads every row, and a ticket whose plan was too large to pin (it plans again) cannot.
"""

from __future__ import annotations

import contextlib
import json
import os

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.paimon import warehouse as paimon_warehouse
from tests.paimon_tables import Warehouse, rows, sort_rows

pytestmark = pytest.mark.timeout(180)


@contextlib.contextmanager
def manifests_gone(warehouse: str, table: str):
    """The table's manifests (and manifest lists) out of reach while inside."""
    db, name = table.split(".")
    path = os.path.join(warehouse, f"{db}.db", name, "manifest")
    os.rename(path, path + ".away")
    try:
        yield
    finally:
        os.rename(path + ".away", path)


def read_all(client, info) -> pa.Table:
    return pa.concat_tables([client.flight.do_get(e.ticket, options=client.options(60)).read_all()
                             for e in info.endpoints])


def test_do_get_of_a_table_with_50_commits_reads_no_manifest(client, warehouse, monkeypatch):
    wh = Warehouse(warehouse)
    table = wh.create("history", buckets=4)
    for i in range(50):  # a history of many manifests (pypaimon's commits slow as it grows: 200 took ~25 s of CPU)
        wh.commit(table, rows(i * 5, 5))
    descriptor = flight.FlightDescriptor.for_path("paimon", table)
    info = client.flight.get_flight_info(descriptor, options=client.options())
    assert json.loads(info.app_metadata) == {"snapshot": 50} and len(info.endpoints) == 4
    with manifests_gone(warehouse, table):
        got = read_all(client, info)
    assert sort_rows(got) == sort_rows(wh.read(table))

    # A plan too large for a ticket pins only the snapshot: its reader plans again, from manifests.
    monkeypatch.setattr(paimon_warehouse, "MAX_PINNED_BYTES", 0)
    info = client.flight.get_flight_info(descriptor, options=client.options())
    with manifests_gone(warehouse, table), pytest.raises(flight.FlightError):
        read_all(client, info)
    assert sort_rows(read_all(client, info)) == sort_rows(wh.read(table))


def test_a_delta_of_a_primary_key_table_is_planned_once_too(client, warehouse):
    wh = Warehouse(warehouse)
    table = wh.create("deltas", buckets=2, primary_keys=["id"])
    for i in range(20):
        wh.commit(table, rows(i * 10, 10, tag=f"v{i}"))
    command = json.dumps({"table": table, "from_snapshot": 5, "to_snapshot": 15})
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(command), options=client.options())
    assert info.total_records == 100
    with manifests_gone(warehouse, table):
        got = read_all(client, info)
    assert sorted(got.column("id").to_pylist()) == list(range(50, 150))
