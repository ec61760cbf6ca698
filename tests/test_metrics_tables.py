"""/metrics stays bounded however many tables a server has: per-table series only for tables active
within --metrics-table-window, at most --metrics-max-tables of them, server-wide totals always."""

from __future__ import annotations

import re
import sys

import pytest

from flight_server.wire import names
from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests import zygote
from tests.conftest import ROOT, RunningServer, child_env, wait_for
from tests.process import ServerProcess
from tests.test_metrics import scrape

ROWS = 5  # a push table's one batch


def tables_named(m: dict) -> set[str]:
    """The tables any series names."""
    return {value for _, labels in m for key, value in labels if key == "table"}


def push_tables(client: Client, names_: list[str]) -> None:
    """Register each push table and write one batch into it (held until read)."""
    for name in names_:
        with client.register_streaming_table(name, SCHEMA, capacity=4) as sink:
            sink.write(make_batch(0, ROWS))


def read_all(client: Client, name: str) -> int:
    return client.flight.do_get(client.info(name).endpoints[0].ticket, options=client.options()).read_all().num_rows


@pytest.mark.timeout(180)
def test_per_table_series_go_when_their_tables_idle_past_the_window_and_the_totals_stay(warehouse):
    from producers.examples.events import SCHEMA as EVENTS
    from producers.examples.events import batch

    now = [1000.0]
    running = RunningServer(warehouse, metrics=True, metrics_table_window_ms=600_000)
    running.server.metrics.tables.clock = lambda: now[0]  # the window's clock, moved by the test
    _, url = running.server.metrics.serve_http("127.0.0.1", 0)
    client = Client(running.uri, timeout=30)
    try:
        pushed = [f"t{i:03d}" for i in range(240)]
        push_tables(client, pushed)
        read, holding = pushed[:160], pushed[160:]
        assert sum(read_all(client, name) for name in read) == len(read) * ROWS
        paimon = ["db.p0", "db.p1", "db.p2"]
        for table in paimon:
            client.create_table(table, EVENTS)
            with client.paimon_sink(table, producer="p") as sink:
                for seq in range(2):
                    sink.write(batch("p", seq, 10))
        commits = sum(client.action(names.LATEST_SNAPSHOT, {"table": t})["snapshot_id"] for t in paimon)
        # Maintenance that does something makes a table active: let its rounds end first.
        wait_for(lambda: not any(client.stats(t).maintenance[t].due for t in paimon), "the maintenance rounds",
                 timeout=60)

        m = scrape(url)
        assert tables_named(m) == set(pushed) | set(paimon)
        row = lambda name, d, kind="push": m[("flight_paimon_table_rows_total",  # noqa: E731
                                             (("direction", d), ("kind", kind), ("table", name)))]
        assert {row(name, "in") for name in pushed} == {ROWS} and {row(name, "out") for name in read} == {ROWS}
        assert {row(t, "in", "paimon") for t in paimon} == {20}
        assert m[("flight_paimon_active_tables", (("kind", "push"),))] == 240
        assert m[("flight_paimon_active_tables", (("kind", "paimon"),))] == 3
        assert m[("flight_paimon_metrics_omitted_tables", ())] == 0
        totals = {key: v for key, v in m.items() if not dict(key[1]).get("table") and key[0].startswith(
            ("flight_paimon_rows", "flight_paimon_bytes", "flight_paimon_ingest", "flight_paimon_maintenance_")
        ) and not key[0].endswith(("_timestamp_seconds", "_ratio"))}
        assert totals[("flight_paimon_rows_total", (("direction", "in"), ("kind", "push")))] == 240 * ROWS
        assert totals[("flight_paimon_rows_total", (("direction", "out"), ("kind", "push")))] == 160 * ROWS
        assert totals[("flight_paimon_rows_total", (("direction", "in"), ("kind", "paimon")))] == 60
        assert totals[("flight_paimon_ingest_commits_total", ())] == commits
        assert totals[("flight_paimon_ingest_committed_rows_total", ())] == 60

        now[0] += 601  # the window passes with nothing moving
        after = scrape(url)
        # Only the push tables holding a batch are active still: their series stay, the rest go.
        assert tables_named(after) == set(holding)
        assert {after[("flight_paimon_table_push_queued_batches", (("partition", "0"), ("table", name)))]
                for name in holding} == {1}
        assert after[("flight_paimon_active_tables", (("kind", "push"),))] == 80
        assert after[("flight_paimon_active_tables", (("kind", "paimon"),))] == 0
        assert after[("flight_paimon_push_queued_batches", ())] == 80
        for key, value in totals.items():
            if key[0].startswith("flight_paimon_maintenance_"):  # rounds may have run since: never fewer
                assert after[key] >= value, key
            else:
                assert after[key] == value, key

        # Active again, a table's series come back counting from 0 (a counter reset); the totals go on.
        with client.paimon_sink("db.p1", producer="p") as sink:
            sink.write(batch("p", 2, 7))
        again = scrape(url)
        assert again[("flight_paimon_table_rows_total", (("direction", "in"), ("kind", "paimon"), ("table", "db.p1")))] == 7
        assert again[("flight_paimon_table_ingest_committed_rows_total", (("table", "db.p1"),))] == 7
        assert again[("flight_paimon_rows_total", (("direction", "in"), ("kind", "paimon")))] == 67
        assert again[("flight_paimon_ingest_committed_rows_total", ())] == 67
        assert tables_named(again) == set(holding) | {"db.p1"}
        # A dropped table's counts stay in the server-wide counters: they never go down.
        ingested = again[("flight_paimon_maintenance_ingested_bytes_total", ())]
        assert ingested > 0
        client.drop_table("db.p0")
        assert scrape(url)[("flight_paimon_maintenance_ingested_bytes_total", ())] >= ingested
    finally:
        client.close()
        assert running.stop()


@pytest.mark.timeout(120)
def test_the_cap_leaves_later_tables_to_the_totals_names_them_and_frees_places_as_tables_go(warehouse):
    with ServerProcess(warehouse, "--metrics-port", "0", "--metrics-max-tables", "50") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=30)
        pushed = [f"t{i:03d}" for i in range(120)]
        push_tables(client, pushed)
        m = scrape(url)
        assert tables_named(m) == set(pushed[:50])  # the first 50 to be active
        assert m[("flight_paimon_metrics_omitted_tables", ())] == 70
        assert m[("flight_paimon_active_tables", (("kind", "push"),))] == 120
        assert m[("flight_paimon_rows_total", (("direction", "in"), ("kind", "push")))] == 120 * ROWS
        assert m[("flight_paimon_push_queued_batches", ())] == 120
        for name in pushed[:10]:
            client.drop(name)
        m = scrape(url)  # the held tables are active at each scrape: ten of the omitted take the places
        assert len(tables_named(m)) == 50 and tables_named(m) <= set(pushed[10:])
        assert m[("flight_paimon_metrics_omitted_tables", ())] == 60
        client.close()
        server.stop()
        log = server.proc.stderr.read()
    warnings = [line for line in log.splitlines() if "metrics_table_omitted" in line]
    assert len(warnings) == 1 and "t050" in warnings[0] and "--metrics-max-tables" in warnings[0], log[-2000:]


@pytest.mark.timeout(60)
def test_a_window_of_0_keeps_only_the_server_wide_series(warehouse):
    with ServerProcess(warehouse, "--metrics-port", "0", "--metrics-table-window", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=30)
        push_tables(client, ["a", "b", "c"])
        assert read_all(client, "a") == ROWS
        m = scrape(url)
        assert tables_named(m) == set() and not [name for name, _ in m if name.startswith("flight_paimon_table_")]
        assert m[("flight_paimon_rows_total", (("direction", "in"), ("kind", "push")))] == 3 * ROWS
        assert m[("flight_paimon_rows_total", (("direction", "out"), ("kind", "push")))] == ROWS
        assert m[("flight_paimon_push_queued_batches", ())] == 2
        assert m[("flight_paimon_active_tables", (("kind", "push"),))] == 0
        client.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flag, value, says", [
    ("--metrics-table-window", "-5s", "argument --metrics-table-window: '-5s' is not a duration"),
    ("--metrics-table-window", "soon", "argument --metrics-table-window: 'soon' is not a duration"),
    ("--metrics-max-tables", "-1", "argument --metrics-max-tables: '-1' is negative; pass 0 or more"),
])
def test_bad_metrics_flags_are_refused_naming_the_flag(warehouse, flag, value, says):
    out = zygote.run([sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--warehouse", warehouse,
                          "--metrics-port", "0", f"{flag}={value}"], capture_output=True, text=True, timeout=60,
                         env=child_env(), cwd=ROOT)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
