"""`flight_cli serve --metrics-port`: Prometheus /metrics, /healthz and the health action, from a real process."""

from __future__ import annotations

import re
import urllib.request

import pyarrow.flight as flight
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flight_server.cli.process import ServerProcess
from flight_server.wire import names
from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests.conftest import wait_for
from tests.paimon_tables import Follower, Warehouse, command, rows


def scrape(url: str) -> dict[tuple, float]:
    """Every sample of /metrics as {(name, sorted label items): value}."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.timeout(120)
def test_metrics_show_rows_bytes_rpcs_and_queues_and_healthz_answers(warehouse):
    wh = Warehouse(warehouse)
    wh.commit(wh.create("orders", buckets=2), rows(0, 100))
    with ServerProcess(warehouse, "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=10)
        pushed = [make_batch(i * 7, 7) for i in range(10)]
        with client.register_streaming_table("clicks", SCHEMA, capacity=16) as sink:
            for batch in pushed:
                sink.write(batch)
        client.register("waiting", SCHEMA, capacity=16)
        with client.sink("waiting") as sink:
            sink.write(make_batch(0, 3))  # held, unread: queued bytes
        got = client.flight.do_get(client.info("clicks").endpoints[0].ticket, options=client.options()).read_all()
        assert got.num_rows == 70
        fi = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.orders"), options=client.options())
        assert sum(client.flight.do_get(ep.ticket).read_all().num_rows for ep in fi.endpoints) == 100
        with pytest.raises(KeyError):
            client.stats("ghost")
        # A follow that looks for new snapshots once a minute: two commits later it is 2 behind.
        follow = command({"table": "db.orders", "follow": True, "start": "earliest", "poll_interval_ms": 60000})
        follower = Follower(client, client.flight.get_flight_info(follow, options=client.options()).endpoints[0])
        wait_for(lambda: follower.done == 1, "the follow to send snapshot 1 and wait")
        followed = sum(b.num_rows for _, b in follower.drain_for(0.1))
        assert 0 < followed < 100  # this endpoint's bucket
        wh.commit("db.orders", rows(100, 10))
        wh.commit("db.orders", rows(110, 10))

        m = scrape(url)
        assert m[("flight_paimon_paimon_follow_lag_snapshots", (("table", "db.orders"),))] == 2
        assert m[("flight_paimon_paimon_open_follows", ())] == 1
        follower.cancel()
        nbytes = sum(b.nbytes for b in pushed)
        push = lambda metric, d: m[(metric, (("direction", d), ("kind", "push"), ("table", "clicks")))]  # noqa: E731
        assert (push("flight_paimon_rows_total", "in"), push("flight_paimon_rows_total", "out")) == (70, 70)
        assert (push("flight_paimon_bytes_total", "in"), push("flight_paimon_bytes_total", "out")) == (nbytes, nbytes)
        paimon_out = m[("flight_paimon_rows_total", (("direction", "out"), ("kind", "paimon"), ("table", "db.orders")))]
        assert paimon_out == 100 + followed
        rpcs = lambda method, status: m.get(("flight_paimon_rpcs_total", (("method", method), ("status", status))), 0)  # noqa: E731
        assert rpcs("do_put", "OK") == 2 and rpcs("do_get", "OK") == 3  # the follow is still open
        assert rpcs("do_action", "NOT_FOUND") == 1 and rpcs("get_flight_info", "OK") >= 3
        assert m[("flight_paimon_rpc_duration_seconds_count", (("method", "do_put"),))] == 2
        queued = m[("flight_paimon_push_queued_bytes", (("partition", "0"), ("table", "waiting")))]
        assert queued == make_batch(0, 3).nbytes
        assert m[("flight_paimon_push_queued_bytes", (("partition", "0"), ("table", "clicks")))] == 0
        assert m[("flight_paimon_open_streams", (("method", "do_get"),))] == 1  # the follow

        health = urllib.request.urlopen(url + "/healthz", timeout=10)
        assert health.status == 200 and health.read() == b"ok\n"
        status = client.action(names.HEALTH)
        assert status["status"] == "serving" and status["push_tables"] == 2 and status["uptime_s"] > 0

        # A dropped push table's series go with it (a server cycling tables keeps none of them).
        client.drop("clicks")
        after = scrape(url)
        assert not [key for key in after if ("table", "clicks") in key[1]]
        assert after[("flight_paimon_rows_total", (("direction", "out"), ("kind", "paimon"), ("table", "db.orders")))] \
            == paimon_out
        client.close()


@pytest.mark.timeout(60)
def test_metrics_count_durable_writes_and_their_group_commits(warehouse):
    from producers.examples.events import SCHEMA as EVENTS, batch

    with ServerProcess(warehouse, "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=10)
        client.create_table("db.events", EVENTS)
        with client.paimon_sink("db.events", producer="p") as sink:
            for seq in range(5):
                sink.write(batch("p", seq, 10))
        latest = client.action(names.LATEST_SNAPSHOT, {"table": "db.events"})["snapshot_id"]
        m = scrape(url)
        label = (("table", "db.events"),)
        assert m[("flight_paimon_ingest_committed_rows_total", label)] == 50
        assert m[("flight_paimon_ingest_commits_total", label)] == latest  # one snapshot per group commit
        assert m[("flight_paimon_ingest_commit_seconds_count", label)] == latest
        assert m[("flight_paimon_rows_total", (("direction", "in"), ("kind", "paimon"), ("table", "db.events")))] == 50
