"""Every name and schema `flight_cli list` prints works where the CLI takes one (issue 38 item 2)."""

from __future__ import annotations

import json

import pyarrow as pa

from producers import Client
from tests.paimon_tables import Warehouse, rows
from tests.process import ServerProcess
from tests.test_cli import cli

WIDE = "id:int64!, price:decimal128(10, 2), tags:list<item: string>, at:timestamp[us, tz=UTC], day:date32[day]"


def _listed(uri: str) -> dict[str, str]:
    out = cli("list", "--uri", uri)
    assert out.returncode == 0, out.stderr
    return {name: columns for name, _, columns in (line.split("\t") for line in out.stdout.splitlines())}


def test_the_schema_list_prints_registers_the_same_table_and_dotted_push_names_work_everywhere(server_process):
    uri = server_process.uri
    assert cli("register", "x.y", "--schema", WIDE, "--uri", uri).returncode == 0
    printed = _listed(uri)["push:x.y"]
    assert printed == WIDE  # `list` prints it as --schema takes it
    assert cli("register", "copy", "--schema", printed, "--uri", uri).returncode == 0
    client = Client(uri, timeout=10)
    assert client.info("copy").schema.equals(client.info("x.y").schema)
    with client.register_streaming_table("dots.in.name", pa.schema([("id", pa.int64())])) as sink:
        sink.write(pa.record_batch({"id": [1, 2, 3]}))
    tailed = cli("tail", "push:dots.in.name", "--from", "earliest", "-e", "--format", "jsonl", "--uri", uri)
    assert tailed.returncode == 0 and [json.loads(r)["id"] for r in tailed.stdout.splitlines()] == [1, 2, 3], tailed.stderr
    stats = cli("stats", "push:x.y", "--uri", uri)
    assert stats.returncode == 0 and json.loads(stats.stdout)["push"]["x.y"]["partitions"]["0"]["state"] == "open"
    for name in ("push:x.y", "push:copy", "push:dots.in.name"):
        dropped = cli("drop", name, "--uri", uri)
        assert dropped.returncode == 0, (name, dropped.stderr)
    assert _listed(uri) == {}


def test_bad_names_and_schemas_are_usage_errors_in_one_line(server_process):
    uri = server_process.uri
    cases = [
        (["register", "t", "--schema", "a:int64,a:string"], "names column 'a' twice"),
        (["register", "line\nbreak", "--schema", "a:int64"], "no control characters such as NUL or newline"),
        (["register", "nul\x01", "--schema", "a:int64"], "no control characters"),
        (["create", "db." + "t" * 300, "--schema", "a:int64"], "is too long"),
        (["create", "db.t", "--schema", "a:int64,b:string,a:double"], "names column 'a' twice"),
    ]
    for args, words in cases:
        out = cli(*args, "--uri", uri)
        assert out.returncode == 2 and words in out.stderr, (args, out.returncode, out.stderr)
        assert "Traceback" not in out.stderr and "Internal" not in out.stderr and out.stderr.count("\n") == 1
    assert _listed(uri) == {}


def test_stats_of_a_paimon_table_is_read_from_the_table_and_survives_a_restart(warehouse):
    wh = Warehouse(warehouse)
    table = wh.create("orders", buckets=2)
    for i in range(3):
        wh.commit(table, rows(i * 10, 10))
    wh.catalog.get_table(table).create_tag("nightly", 2)
    seen = []
    for _ in range(2):  # a server that never wrote it, then a restarted one: the same numbers
        with ServerProcess(warehouse) as server:
            for name in ("paimon:db.orders", "db.orders"):
                out = cli("stats", name, "--uri", server.uri)
                assert out.returncode == 0, out.stderr
                seen.append(json.loads(out.stdout)["paimon"]["db.orders"])
            text = cli("stats", "db.orders", "--format", "text", "--uri", server.uri).stdout
    held = seen[0]
    assert all(s == held for s in seen), seen
    assert (held["snapshots"], held["earliest_snapshot"], held["latest_snapshot"], held["records"]) == (3, 1, 3, 30)
    assert held["buckets"] == 2 and held["data_files"] >= 2 and held["data_bytes"] > 0
    assert held["tags"] == {"nightly": 2} and held["latest_commit_kind"] == "APPEND"
    assert text.startswith("paimon:db.orders (append table)") and "3 kept (1..3)" in text and "nightly (snapshot 2)" in text
    with ServerProcess(warehouse) as server:
        missing = cli("stats", "db.nope", "--uri", server.uri)
        assert missing.returncode == 3 and "Paimon table 'db.nope' does not exist" in missing.stderr, missing.stderr


def test_the_example_producers_and_the_cli_honour_flight_paimon_uri(server_process):
    import subprocess
    import sys

    from tests.process import ROOT, child_env

    env = {**child_env(), "FLIGHT_PAIMON_URI": server_process.uri}
    run = lambda *argv: subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,  # noqa: E731
                                       cwd=ROOT, timeout=60)
    assert run("-m", "flight_cli", "register", "env", "--schema", "id:int64,name:string,ts:timestamp[us]"
               ).returncode == 0
    produced = run("-m", "producers.examples.counter", "env", "--batches", "2", "--rows", "3")
    assert produced.returncode == 0, produced.stderr
    stats = json.loads(run("-m", "flight_cli", "stats", "push:env").stdout)
    assert stats["push"]["env"]["partitions"]["0"]["rows_in"] == 6
