"""`flight_cli tail` as kcat: -e ends once caught up; --from takes Paimon's scan.mode names (issue 38 item 3)."""

from __future__ import annotations

import json
import time

import pytest

from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests.paimon_tables import Warehouse, rows
from tests.test_cli import cli


def _ids(out) -> list[int]:
    assert out.returncode == 0, out.stderr
    return sorted(json.loads(line)["id"] for line in out.stdout.splitlines())


@pytest.mark.timeout(180)
def test_e_exits_once_caught_up_whatever_the_limit(warehouse, server_process):
    wh = Warehouse(warehouse)
    table = wh.create("orders", buckets=2)
    for i in range(3):
        wh.commit(table, rows(i * 4, 4))
    uri = ["--format", "jsonl", "--uri", server_process.uri]
    assert _ids(cli("tail", table, "-e", "--limit", "20", *uri)) == list(range(12))  # Paimon's default: latest-full
    assert _ids(cli("tail", table, "--from", "earliest", "-e", *uri)) == list(range(12))
    assert _ids(cli("tail", table, "--from", "latest", "-e", *uri)) == []  # nothing new since the start
    assert _ids(cli("tail", table, "--snapshot-id", "2", "-e", *uri)) == list(range(4, 12))  # default: from-snapshot
    wh.catalog.create_database("db", True)
    empty = wh.create("empty", buckets=1)
    assert _ids(cli("tail", empty, "-e", *uri)) == []
    client = Client(server_process.uri, timeout=10)
    with client.register_streaming_table("held", SCHEMA, capacity=8) as sink:
        for i in range(3):
            sink.write(make_batch(i * 2, 2))
    client.register("idle", SCHEMA)
    assert _ids(cli("tail", "push:held", "--from", "earliest", "-e", *uri)) == list(range(6))
    assert _ids(cli("tail", "push:idle", "--from", "earliest", "-e", *uri)) == []
    assert _ids(cli("tail", "push:idle", "-e", *uri)) == []


def test_from_timestamp_reads_the_commits_at_or_after_it(warehouse, server_process):
    wh = Warehouse(warehouse)
    table = wh.create("orders", buckets=1)
    wh.commit(table, rows(0, 3))
    t = wh.catalog.get_table(table)
    second_ms = t.snapshot_manager().get_snapshot_by_id(1).time_millis + 1
    while time.time() * 1000 <= second_ms:  # the next commit lands after that millisecond
        pass
    wh.commit(table, rows(3, 3))
    uri = ["--format", "jsonl", "-e", "--uri", server_process.uri]
    assert _ids(cli("tail", table, "--from", "from-timestamp", "--timestamp", str(second_ms), *uri)) == [3, 4, 5]
    assert _ids(cli("tail", table, "--timestamp", str(second_ms), *uri)) == [3, 4, 5]  # Paimon's default picks it
    assert _ids(cli("tail", table, "--from", "from-timestamp", "--timestamp", "1h", *uri)) == list(range(6))


def test_tail_mistakes_name_the_flag_and_suggest_the_mode(server_process):
    uri = ["--uri", server_process.uri]
    cli("create", "db.t", "--schema", "id:int64", *uri)
    for args, words in [
        (["--from", "lates"], "--from 'lates' is not one of default, latest, latest-full, full, earliest, from-snapshot, "
                              "from-snapshot-full, from-timestamp; did you mean 'latest'?"),
        (["--from", "from-snapshot"], "--from from-snapshot needs --snapshot-id N"),
        (["--from", "from-timestamp"], "--from from-timestamp needs --timestamp TIME"),
        (["--from", "latest", "--snapshot-id", "3"], "--snapshot-id goes with --from from-snapshot"),
        (["--timestamp", "yesterday-ish"], "--timestamp 'yesterday-ish' is not epoch ms"),
    ]:
        out = cli("tail", "db.t", *args, *uri)
        assert out.returncode == 2 and words in out.stderr, (args, out.returncode, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    Client(server_process.uri, timeout=10).register("t", SCHEMA)
    out = cli("tail", "push:t", "--from", "earliset", *uri)
    assert out.returncode == 2 and "did you mean 'earliest'?" in out.stderr, out.stderr
