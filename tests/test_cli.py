"""flight_cli from a shell: serve, register, an example producer, tail, list, stats."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT, child_env


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flight_server.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=ROOT)


def test_serve_register_produce_tail_list_stats(server_process):
    uri = server_process.uri
    reg = cli("register", "orders", "--schema", "id:int64,name:string,ts:timestamp[us]", "--capacity", "4", "--uri", uri)
    assert reg.returncode == 0, reg.stderr
    assert json.loads(reg.stdout) == {"name": "orders", "partitions": 1, "capacity": 4}

    producer = subprocess.Popen(
        [sys.executable, "-m", "producers.examples.counter", "orders", "--uri", uri, "--batches", "6", "--rows", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    tail = cli("tail", "push:orders", "--format", "jsonl", "--uri", uri)
    assert producer.wait(30) == 0, producer.stderr.read()
    assert tail.returncode == 0, tail.stderr
    rows = [json.loads(line) for line in tail.stdout.splitlines()]
    assert [r["id"] for r in rows] == list(range(12))
    assert rows[3]["name"] == "row-3"
    assert "12 rows" in tail.stderr

    listing = cli("list", "--uri", uri)
    assert listing.returncode == 0 and "push/orders" in listing.stdout and "id:int64" in listing.stdout
    stats = json.loads(cli("stats", "orders", "--uri", uri).stdout)
    part = stats["push"]["orders"]["partitions"]["0"]
    assert (part["state"], part["rows_in"], part["rows_out"]) == ("eof", 12, 12)


def test_tail_limit_and_table_format(server_process):
    uri = server_process.uri
    assert cli("register", "t", "--schema", "id:int64,name:string,ts:timestamp[us]", "--uri", uri).returncode == 0
    producer = subprocess.Popen(
        [sys.executable, "-m", "producers.examples.counter", "t", "--uri", uri, "--batches", "1000", "--rate", "100"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    try:
        tail = cli("tail", "push:t", "--limit", "7", "--uri", uri)
        assert tail.returncode == 0, tail.stderr
        lines = tail.stdout.splitlines()
        assert lines[0].split(" | ") == ["id", "name", "ts"]
        assert [int(line.split(" | ")[0]) for line in lines[1:]] == list(range(7))
    finally:
        producer.kill()
        producer.wait(10)


def test_cli_errors_are_one_clear_line(server_process):
    bad = cli("register", "t", "--schema", "id:int65", "--uri", server_process.uri)
    assert bad.returncode == 2 and "Unknown column type 'int65'" in bad.stderr
    missing = cli("stats", "nope", "--uri", server_process.uri)
    assert missing.returncode != 0 and "'nope' is not registered" in missing.stderr
    assert "Traceback" not in missing.stderr
