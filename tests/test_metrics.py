"""`flight_cli serve --metrics-port`: Prometheus /metrics, /healthz and the health action, from a real process."""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow.flight as flight
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flight_server.wire import names
from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests import zygote
from tests.conftest import ROOT, child_env, wait_for
from tests.paimon_tables import Follower, Warehouse, command, rows
from tests.process import ServerProcess


def scrape(url: str) -> dict[tuple, float]:
    """Every sample of /metrics as {(name, sorted label items): value}."""
    text = urllib.request.urlopen(url + "/metrics", timeout=60).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.timeout(120)
def test_metrics_show_rows_bytes_rpcs_and_queues_and_healthz_answers(warehouse):
    wh = Warehouse(warehouse)
    wh.commit(wh.create("orders", buckets=2), rows(0, 100))
    with ServerProcess(warehouse, "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=60)
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
        followed = sum(b.num_rows for _, b in follower.drain_until_done(1))  # snapshot 1's rows, then it waits
        assert 0 < followed < 100  # this endpoint's bucket
        wh.commit("db.orders", rows(100, 10))
        wh.commit("db.orders", rows(110, 10))

        m = scrape(url)
        assert m[("flight_paimon_table_follow_lag_snapshots", (("table", "db.orders"),))] == 2
        assert m[("flight_paimon_follow_lag_snapshots", ())] == 2  # server-wide: the furthest behind
        assert m[("flight_paimon_open_follows", ())] == 1
        follower.cancel()
        nbytes = sum(b.nbytes for b in pushed)
        push = lambda metric, d: m[(metric, (("direction", d), ("kind", "push"), ("table", "clicks")))]  # noqa: E731
        total = lambda metric, kind, d: m[(metric, (("direction", d), ("kind", kind)))]  # noqa: E731
        assert (push("flight_paimon_table_rows_total", "in"), push("flight_paimon_table_rows_total", "out")) == (70, 70)
        assert (push("flight_paimon_table_bytes_total", "in"), push("flight_paimon_table_bytes_total", "out")) == (nbytes, nbytes)
        assert total("flight_paimon_rows_total", "push", "in") == 73  # all push tables: clicks and waiting
        assert total("flight_paimon_bytes_total", "push", "out") == nbytes
        paimon_out = m[("flight_paimon_table_rows_total", (("direction", "out"), ("kind", "paimon"), ("table", "db.orders")))]
        assert paimon_out == 100 + followed == total("flight_paimon_rows_total", "paimon", "out")
        rpcs = lambda method, status: m.get(("flight_paimon_rpcs_total", (("method", method), ("status", status))), 0)  # noqa: E731
        assert rpcs("do_put", "OK") == 2 and rpcs("do_get", "OK") == 3  # the follow is still open
        assert rpcs("do_action", "NOT_FOUND") == 1 and rpcs("get_flight_info", "OK") >= 3
        assert m[("flight_paimon_rpc_duration_seconds_count", (("method", "do_put"),))] == 2
        queued = m[("flight_paimon_table_push_queued_bytes", (("partition", "0"), ("table", "waiting")))]
        assert queued == make_batch(0, 3).nbytes == m[("flight_paimon_push_queued_bytes", ())]
        assert m[("flight_paimon_table_push_queued_bytes", (("partition", "0"), ("table", "clicks")))] == 0
        assert m[("flight_paimon_open_streams", (("method", "do_get"),))] == 1  # the follow

        health = urllib.request.urlopen(url + "/healthz", timeout=60)
        assert health.status == 200 and health.read() == b"ok\n"
        status = client.action(names.HEALTH)
        assert status["status"] == "serving" and status["push_tables"] == 2 and status["uptime_s"] > 0

        # A viewer's rows are counted apart: it consumes nothing.
        view = client.view_info("waiting", "earliest").endpoints[0]
        assert client.flight.do_get(view.ticket, options=client.options()).read_all().num_rows == 3
        viewed = scrape(url)[("flight_paimon_table_rows_total", (("direction", "viewed"), ("kind", "push"),
                                                                 ("table", "waiting")))]
        assert viewed == 3

        # A dropped table's series go with it, whatever they count (a server cycling tables keeps none).
        client.drop("clicks")
        after = scrape(url)
        assert not [key for key in after if ("table", "clicks") in key[1]]
        assert after[("flight_paimon_table_rows_total", (("direction", "out"), ("kind", "paimon"), ("table", "db.orders")))] \
            == paimon_out
        assert after[("flight_paimon_rows_total", (("direction", "out"), ("kind", "push")))] == 70  # totals stay
        client.drop("waiting")
        wait_for(lambda: scrape(url)[("flight_paimon_open_follows", ())] == 0, "the cancelled follow to end")
        client.drop_table("db.orders")
        after = scrape(url)
        assert not [key for key in after if {("table", "waiting"), ("table", "db.orders")} & set(key[1])], after
        assert after[("flight_paimon_rpcs_total", (("method", "do_action"), ("status", "OK")))] > 0  # the rest stay
        client.close()


@pytest.mark.timeout(60)
def test_metrics_has_the_process_metrics_and_answers_404_off_its_two_paths(warehouse):
    with ServerProcess(warehouse, "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        m = scrape(url)
        assert m[("process_resident_memory_bytes", ())] > 0 and m[("process_open_fds", ())] > 0
        assert m[("process_cpu_seconds_total", ())] > 0 and m[("process_start_time_seconds", ())] > 0
        assert any(name == "python_info" for name, _ in m) and any(name.startswith("python_gc_") for name, _ in m)
        for path in ("/", "/nope", "/metrics/", "/healthz/x", "/favicon.ico"):
            status, body = get(url + path)
            assert (status, body) == (404, "Not found: this port serves /metrics and /healthz.\n"), path


def test_the_readme_lists_every_metric_family(warehouse):
    from tests.conftest import RunningServer

    running = RunningServer(warehouse, metrics=True)
    try:
        families = {f.name for f in running.server.metrics.registry.collect()}
    finally:
        running.stop()
    listed = readme_metric_names()
    # prometheus-client names a counter's family without its _total
    missing = sorted(f for f in families if f not in listed and f"{f}_total" not in listed)
    assert not missing and len(families) > 30, missing


def readme_metric_names() -> set[str]:
    table = (ROOT / "README.md").read_text().split("The metrics, for dashboards and alerts:", 1)[1]
    lines = table.strip().splitlines()
    table = "\n".join(lines[:next(i for i, line in enumerate(lines) if not line.strip())])
    return set(re.findall(r"`([a-z_]+)`", table))


def cli(*args: str, uri: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**child_env(), "FLIGHT_PAIMON_URI": uri}, cwd=ROOT)


@pytest.mark.timeout(180)
def test_every_series_a_busy_server_exposes_is_in_the_readme_by_prometheus_conventions(warehouse):
    """A server that served pushes, durable writes, follows and maintenance: each sample's name is
    in README's table (histograms by their family), none is a `_created` series, no name says
    `paimon` twice, the version is build_info's label, and every `tail -e` (it closes its follow)
    and viewer counts OK, not as a failed call."""
    from flight_server.wire.version import VERSION
    from producers.examples.events import SCHEMA as EVENTS
    from producers.examples.events import batch

    args = ("--metrics-port", "0", "--commit-interval-ms", "5", "--maintenance-interval-ms", "50")
    with ServerProcess(warehouse, *args) as server:
        assert f"flight-paimon {VERSION} serving {server.uri}" in server.first_line
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=60)
        client.create_table("db.e", EVENTS)
        with client.paimon_sink("db.e", producer="p", max_unacked=1) as sink:
            for seq in range(12):
                sink.write(batch("p", seq, 10))
        with client.register_streaming_table("clicks", SCHEMA, capacity=16) as sink:
            sink.write(make_batch(0, 3))
        for argv in (["tail", "db.e", "--from", "earliest", "-e"], ["tail", "db.e", "--limit", "5"],
                     ["tail", "push:clicks", "--from", "earliest", "--limit", "3"]):
            done = cli(*argv, uri=server.uri)
            assert done.returncode == 0, (argv, done.stderr)
        wait_for(lambda: client.stats("db.e").maintenance["db.e"].compactions > 0, "a compaction", timeout=60)
        health = client.health()
        assert health.version == VERSION and health.status == "serving"

        text = urllib.request.urlopen(url + "/metrics", timeout=60).read().decode()
        families = list(text_string_to_metric_families(text))
        m = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
        assert m[("flight_paimon_build_info", (("version", VERSION),))] == 1
        statuses = {labels: v for (name, labels), v in m.items() if name == "flight_paimon_rpcs_total"}
        assert statuses[(("method", "do_get"), ("status", "OK"))] >= 3, statuses
        assert not [labels for labels in statuses if ("status", "OK") not in labels], statuses
        assert m[("flight_paimon_open_follows", ())] == 0
        listed = readme_metric_names()
        histograms = {f.name for f in families if f.type in ("histogram", "summary")}
        for f in families:
            for sample in f.samples:
                assert not sample.name.endswith("_created"), sample.name
                assert sample.name.count("paimon") == 1 or not sample.name.startswith("flight_paimon"), sample.name
                family = f.name if f.name in histograms else sample.name
                assert family in listed, f"README's metric table lacks {family}"
        assert "flight_paimon_maintenance_write_amplification_ratio" in {n for n, _ in m}
        client.close()


@pytest.mark.timeout(60)
def test_metrics_count_durable_writes_and_their_group_commits(warehouse):
    from producers.examples.events import SCHEMA as EVENTS
    from producers.examples.events import batch

    with ServerProcess(warehouse, "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=60)
        client.create_table("db.events", EVENTS)
        with client.paimon_sink("db.events", producer="p") as sink:
            for seq in range(5):
                sink.write(batch("p", seq, 10))
        latest = client.action(names.LATEST_SNAPSHOT, {"table": "db.events"})["snapshot_id"]
        m = scrape(url)
        label = (("table", "db.events"),)
        assert m[("flight_paimon_table_ingest_committed_rows_total", label)] == 50
        assert m[("flight_paimon_table_ingest_commits_total", label)] == latest  # one snapshot per group commit
        assert m[("flight_paimon_table_ingest_commit_seconds_count", label)] == latest
        assert m[("flight_paimon_table_ingest_commit_seconds_sum", label)] > 0
        assert m[("flight_paimon_table_rows_total", (("direction", "in"), ("kind", "paimon"), ("table", "db.events")))] \
            == 50
        # the server-wide totals: one table here, so the same counts
        assert m[("flight_paimon_ingest_committed_rows_total", ())] == 50
        assert m[("flight_paimon_ingest_commits_total", ())] == m[("flight_paimon_ingest_commit_seconds_count", ())] \
            == latest
        assert m[("flight_paimon_rows_total", (("direction", "in"), ("kind", "paimon")))] == 50


def listening_address(port: int) -> str:
    """The address the socket listening on `port` is bound to, from Linux's /proc/net/tcp and tcp6
    (gRPC listens on IPv6 sockets: ::ffff:127.0.0.1 shows as 127.0.0.1, :: as "::")."""
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path("/proc/net", name).read_text().splitlines()[1:]:
            fields = line.split()
            host, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                # The kernel prints each 32-bit word of the address in host (little-endian) order.
                raw = b"".join(struct.pack("<I", int(host[i:i + 8], 16)) for i in range(0, len(host), 8))
                address = ipaddress.ip_address(socket.inet_ntop(family, raw))
                return str(getattr(address, "ipv4_mapped", None) or address)
    raise AssertionError(f"nothing listens on port {port}")


def outward_address() -> str | None:
    """This host's address towards other hosts (no packet is sent), None when it has only loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


def get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.timeout(60)
def test_the_metrics_port_listens_on_loopback_unless_told_otherwise(warehouse):
    with ServerProcess(warehouse, "--host", "0.0.0.0", "--insecure", "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        metrics_port, flight_port = int(url.rsplit(":", 1)[1]), int(server.uri.rsplit(":", 1)[1])
        assert listening_address(flight_port) in ("0.0.0.0", "::")  # every address, as --host asked
        assert listening_address(metrics_port) == "127.0.0.1" and url.startswith("http://127.0.0.1:")
        assert get(url + "/healthz") == (200, "ok\n")
        outward = outward_address()
        if outward is not None:  # from another host's side: the Flight port answers, the metrics port does not
            socket.create_connection((outward, flight_port), timeout=5).close()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((outward, metrics_port), timeout=5)
    # Another address for metrics is asked for, and like --host it needs --auth (or --insecure).
    out = zygote.run([sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--warehouse", warehouse,
                          "--metrics-port", "0", "--metrics-host", "0.0.0.0"], capture_output=True, text=True,
                         timeout=60, env=child_env(), cwd=ROOT)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "refusing to serve --metrics-host 0.0.0.0 without --auth" in out.stderr, out.stderr


@pytest.mark.timeout(60)
def test_with_auth_metrics_answer_only_a_principal_with_admin_on_every_table(warehouse, tmp_path):
    tokens = {"ops": "ops-token-0123456789", "reader": "reader-token-0123456789", "owner": "owner-token-0123456789"}
    auth = {"principals": [
        {"name": "ops", "token": tokens["ops"], "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
        {"name": "reader", "token": tokens["reader"], "grants": [{"tables": "*", "allow": ["read"]}]},
        {"name": "owner", "token": tokens["owner"], "grants": [{"tables": "orders*", "allow": ["admin"]}]},
    ]}
    (tmp_path / "auth.json").write_text(json.dumps(auth))
    with ServerProcess(warehouse, "--auth", str(tmp_path / "auth.json"), "--metrics-port", "0") as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        ops = Client(server.uri, timeout=60, token=tokens["ops"])
        with ops.register_streaming_table("secret_table", SCHEMA) as sink:
            sink.write(make_batch(0, 1))  # held: the table is active, so its series name it
        ops.close()
        status, body = get(url + "/metrics")
        assert status == 401 and "Authorization: Bearer TOKEN" in body and "secret_table" not in body, body
        status, body = get(url + "/metrics", "not-a-known-token-at-all")
        assert status == 401 and "not known" in body and "secret_table" not in body, body
        for who in ("reader", "owner"):  # read on every table, admin on some: neither may see every name
            status, body = get(url + "/metrics", tokens[who])
            assert status == 403 and f"Principal {who!r} may not read /metrics" in body, body
        status, body = get(url + "/metrics", tokens["ops"])
        assert status == 200 and 'flight_paimon_table_push_queued_batches{partition="0",table="secret_table"}' in body
        assert get(url + "/healthz") == (200, "ok\n")  # liveness probes need no token


@pytest.mark.timeout(120)
def test_metrics_show_each_maintained_tables_shape_and_what_maintenance_did(warehouse):
    from producers.examples.events import SCHEMA as EVENTS
    from producers.examples.events import batch

    args = ("--metrics-port", "0", "--commit-interval-ms", "5", "--maintenance-interval-ms", "50")
    with ServerProcess(warehouse, *args) as server:
        url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
        client = Client(server.uri, timeout=60)
        client.create_table("db.e", EVENTS, options={"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "4"})
        with client.paimon_sink("db.e", producer="p", max_unacked=1) as sink:
            for seq in range(20):
                sink.write(batch("p", seq, 10))
        wait_for(lambda: not client.stats("db.e").maintenance["db.e"].due, "the last maintenance round", timeout=60)
        state = client.stats("db.e").maintenance["db.e"]
        got = scrape(url)
        label = (("table", "db.e"),)
        assert got[("flight_paimon_table_snapshots", label)] == state.snapshots <= 4
        assert got[("flight_paimon_table_data_files", label)] == state.data_files < 5
        assert got[("flight_paimon_table_data_bytes", label)] == state.data_bytes > 0
        assert got[("flight_paimon_table_maintenance_compactions_total", label)] == state.compactions > 0
        assert got[("flight_paimon_table_maintenance_files_deleted_total", label)] == state.files_deleted > 0
        assert got[("flight_paimon_table_maintenance_ingested_bytes_total", label)] == state.ingested_bytes > 0
        assert got[("flight_paimon_table_maintenance_write_amplification_ratio", label)] == state.write_amplification == \
            round(state.compacted_bytes / state.ingested_bytes, 3) > 0
        assert got[("flight_paimon_table_maintenance_last_timestamp_seconds", (("step", "expiry"), ("table", "db.e")))] \
            == state.last_expiry.at_ms / 1000
        # server-wide: the same sums, one table here
        for key in ("compactions", "files_deleted", "ingested_bytes", "compacted_bytes", "expiries"):
            assert got[(f"flight_paimon_maintenance_{key}_total", ())] == getattr(state, key), key
        assert got[("flight_paimon_maintenance_last_timestamp_seconds", (("step", "expiry"),))] \
            == state.last_expiry.at_ms / 1000
        # Dropped, the table's series go, its maintenance's too.
        client.drop_table("db.e")
        assert not [key for key in scrape(url) if ("table", "db.e") in key[1]]
        client.close()


@pytest.mark.timeout(60)
def test_close_says_stopping_while_it_drains_then_joins_every_thread_and_closes_the_metrics_port(warehouse):
    import threading

    import pyarrow as pa

    from tests.conftest import RunningServer

    owned = ("write-", "commit-", "maintenance", "push-idle-watchdog", "metrics-http")
    before = set(threading.enumerate())
    running = RunningServer(warehouse, metrics=True)
    _, url = running.server.metrics.serve_http("127.0.0.1", 0)
    client = Client(running.uri, timeout=60)
    try:
        client.register("quiet", SCHEMA, idle_timeout_s=30)  # starts the idle watchdog
        table = pa.schema([pa.field("id", pa.int64(), nullable=False)])
        client.create_table("db.t", table)
        with client.paimon_sink("db.t", producer="p") as sink:  # starts the table's writer and commit threads
            sink.write(pa.record_batch([pa.array([1, 2], pa.int64())], schema=table))
        started = [t for t in set(threading.enumerate()) - before if t.name.startswith(owned)]
        assert {t.name.split("-")[0] for t in started} == {"write", "commit", "maintenance", "push", "metrics"}
        assert urllib.request.urlopen(url + "/healthz", timeout=60).read() == b"ok\n"

        running.server.close_streams("the test is stopping the server")  # close's first step: the drain begins
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + "/healthz", timeout=60)
        assert (refused.value.code, refused.value.read()) == (503, b"stopping\n")
        assert client.action(names.HEALTH)["status"] == "stopping"
    finally:
        client.close()
        stopped = running.stop()
    assert stopped, [t.name for t in started if t.is_alive()]
    assert [t.name for t in started if t.is_alive()] == []
    with pytest.raises(urllib.error.URLError):  # the port is closed
        urllib.request.urlopen(url + "/healthz", timeout=5)
