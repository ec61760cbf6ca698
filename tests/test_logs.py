"""What the server's log lines name: each action's table, a bug's call, a refused token's peer; and a
viewer ended by Ctrl-C is no failure."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import grpc
import pyarrow.flight as flight
import pytest
from structlog.testing import capture_logs

from flight_server import actions
from flight_server.auth import AuthConfig
from flight_server.wire import names
from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests.conftest import ROOT, RunningServer, child_env, wait_for
from tests.paimon_tables import rows


def test_every_action_on_a_table_logs_its_table_whether_it_succeeds_or_fails(server, client, paimon):
    paimon.commit(paimon.create("orders", buckets=1), rows(0, 10))
    with capture_logs() as logs:
        client.register("clicks", SCHEMA)
        client.stats("clicks")
        client.action(names.LATEST_SNAPSHOT, {"table": "db.orders"})
        with pytest.raises(KeyError):
            client.action(names.LATEST_SNAPSHOT, {"table": "db.ghost"})
        with pytest.raises(ValueError):  # INVALID_ARGUMENT
            client.action(names.COMPACT, {"table": "db.orders", "partitions": "nope"})
        client.drop("clicks")
        client.action(names.HEALTH)
    lines = [(e["action"], e.get("table"), e["event"]) for e in logs if e.get("rpc") == "do_action"]
    assert lines == [
        ("register", "clicks", "rpc_done"), ("stats", "clicks", "rpc_done"),
        ("latest_snapshot", "db.orders", "rpc_done"), ("latest_snapshot", "db.ghost", "rpc_failed"),
        ("compact", "db.orders", "rpc_failed"), ("drop", "clicks", "rpc_done"),
        ("health", None, "rpc_done"),  # the one action of no table
    ]


def test_a_bug_is_logged_naming_the_rpc_the_action_the_table_and_the_peer(server, client, monkeypatch):
    def buggy(ctx, body):
        return {"value": {}["no such key"]}

    monkeypatch.setitem(actions.HANDLERS, names.LATEST_SNAPSHOT, buggy)
    with capture_logs() as logs:
        with pytest.raises(flight.FlightInternalError):
            client.action(names.LATEST_SNAPSHOT, {"table": "db.orders"})
    [bug] = [e for e in logs if e["event"] == "unexpected_error"]
    assert (bug["rpc"], bug["action"], bug["table"], bug["log_level"]) == ("do_action", "latest_snapshot",
                                                                            "db.orders", "error")
    assert bug["peer"].startswith(("ipv4:127.0.0.1:", "ipv6:[::1]:")), bug["peer"]
    assert isinstance(bug["exc_info"], KeyError)


def test_a_refused_token_is_logged_with_the_peer_and_no_call_gets_past_it(warehouse):
    token = "reader-token-0123456789"
    auth = AuthConfig.parse({"principals": [
        {"name": "reader", "token": token, "grants": [{"tables": "*", "allow": ["read"]}]}]})
    running = RunningServer(warehouse, auth=auth)
    try:
        with capture_logs() as logs:
            for who in (None, "not-a-known-token-at-all"):
                c = Client(running.uri, timeout=10, token=who)
                for call in (c.stats, lambda: list(c.flight.list_flights(options=c.options())),
                             lambda: c.register("x", SCHEMA),
                             lambda: c.flight.list_actions(options=c.options())):
                    with pytest.raises(flight.FlightUnauthenticatedError):
                        call()
                c.close()
            with grpc.insecure_channel(running.uri.removeprefix("grpc://")) as ch:  # the ninth RPC, as on the wire
                handshake = ch.stream_stream("/arrow.flight.protocol.FlightService/Handshake")
                with pytest.raises(grpc.RpcError) as e:
                    list(handshake(iter([b""]), timeout=10))
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert running.server.push.tables() == []  # no register got through
        refused = [e for e in logs if e["event"] == "rpc_unauthenticated"]
        in_handler = [e for e in refused if e["rpc"] != "handshake"]
        assert {e["rpc"] for e in in_handler} == {"do_action", "list_flights", "list_actions"} and len(in_handler) == 8
        assert all(e["peer"].startswith(("ipv4:127.0.0.1:", "ipv6:[::1]:")) and e["log_level"] == "warning"
                   for e in in_handler), in_handler
        # Refused in the middleware (before pyarrow reads a first message), where pyarrow tells no peer.
        assert [e["peer"] for e in refused if e["rpc"] == "handshake"] == [None]
        assert not [e for e in logs if e["event"] in ("rpc_done", "rpc_failed")]  # refused before any handler
        assert token not in repr(logs)
        ok = Client(running.uri, timeout=10, token=token)
        assert ok.stats().push is not None
        ok.close()
    finally:
        running.stop()


@pytest.mark.timeout(120)
def test_a_viewer_ended_by_ctrl_c_is_logged_as_done_not_as_a_warning(server, client):
    client.register("t", SCHEMA, capacity=64)
    with capture_logs() as logs, client.sink("t") as sink:  # the producer stays: the view waits for more
        for i in range(5):
            sink.write(make_batch(i * 3, 3))
        viewer = subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", "push:t", "--from", "earliest",
                                   "--format", "jsonl", "--uri", server.uri], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
        try:
            for _ in range(15):  # every row held: it is viewing, and waits for more
                assert viewer.stdout.readline()
            viewer.send_signal(signal.SIGINT)
            _, err = viewer.communicate(timeout=60)
        finally:
            viewer.kill()
        assert viewer.returncode == 0 and re.fullmatch(r"\d+ rows in \d+\.\d\ds\n", err), err  # no traceback
        wait_for(lambda: [e for e in logs if e.get("rpc") == "do_get"], "the view's log line")
    [line] = [e for e in logs if e.get("rpc") == "do_get"]
    assert (line["event"], line["log_level"], line["ended"]) == ("rpc_done", "info", "the client closed the view")
    assert (line["table"], line["view"], line["rows"]) == ("t", "earliest", 15)
