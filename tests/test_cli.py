"""flight_cli from a shell: serve, register, an example producer, tail, list, stats."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests import zygote
from tests.conftest import ROOT, child_env, wait_for
from tests.paimon_tables import Warehouse, rows


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return zygote.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=ROOT)


def tail_process(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)


def viewers(client: Client, name: str) -> int:
    return client.stats(name).push[name].partitions["0"].viewers


def test_serve_register_produce_tail_list_stats(server_process):
    uri = server_process.uri
    reg = cli("register", "orders", "--schema", "id:int64,name:string,ts:timestamp[us]", "--capacity", "4", "--uri", uri)
    assert reg.returncode == 0, reg.stderr
    assert json.loads(reg.stdout) == {"name": "orders", "partitions": 1, "capacity": 4, "capacity_bytes": None,
                                      "writers": 1}
    client = Client(uri)
    tail = tail_process("push:orders", "--format", "jsonl", "--uri", uri)
    wait_for(lambda: viewers(client, "orders") == 1, "the tail to attach as a viewer")
    producer = zygote.popen(
        [sys.executable, "-m", "producers.examples.counter", "orders", "--uri", uri, "--batches", "6", "--rows", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    consumed = [r for b in client.read_endpoint(client.info("orders").endpoints[0], timeout=30)
                for r in b.column("id").to_pylist()]  # the real consumer
    assert producer.wait(30) == 0, producer.stderr.read()
    out, err = tail.communicate(timeout=30)
    assert tail.returncode == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert consumed == [r["id"] for r in rows] == list(range(12))  # the viewer saw what passed
    assert rows[3] == {"id": 3, "name": "row-3", "ts": rows[3]["ts"], "_partition": 0, "_seq": 1}
    assert "12 rows" in err and "rows/s" not in err  # the live rate is for terminals only

    listing = cli("list", "--uri", uri)
    assert listing.returncode == 0 and "push:orders" in listing.stdout and "id:int64" in listing.stdout
    stats = json.loads(cli("stats", "orders", "--uri", uri).stdout)
    part = stats["push"]["orders"]["partitions"]["0"]
    assert (part["state"], part["rows_in"], part["rows_out"], part["viewers"]) == ("eof", 12, 12, 0)


def test_tail_limit_and_table_format(server_process):
    uri = server_process.uri
    assert cli("register", "t", "--schema", "id:int64,name:string,ts:timestamp[us]", "--uri", uri).returncode == 0
    producer = zygote.popen(
        [sys.executable, "-m", "producers.examples.counter", "t", "--uri", uri, "--batches", "1000", "--rate", "100"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    try:
        tail = cli("tail", "push:t", "--from", "earliest", "--limit", "7", "--uri", uri)
        assert tail.returncode == 0, tail.stderr
        lines = tail.stdout.splitlines()
        assert lines[0].split() == ["id", "name", "ts", "_partition", "_seq"] and set(lines[1]) == {"─"}
        assert [int(line.split()[0]) for line in lines[2:]] == list(range(7))
        assert producer.poll() is None  # the viewer's end changed nothing for the producer
    finally:
        producer.kill()
        producer.wait(10)


def test_cli_errors_are_one_clear_line(server_process):
    bad = cli("register", "t", "--schema", "id:int65", "--uri", server_process.uri)
    assert bad.returncode == 2 and "Unknown column type 'int65'" in bad.stderr
    missing = cli("stats", "nope", "--uri", server_process.uri)
    assert missing.returncode != 0 and "'nope' is not registered" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_cli_user_mistakes_are_one_line_that_says_what_to_do(server_process, tmp_path):
    cases = [
        (["list", "--uri", "127.0.0.1:8815"], 2, "has no scheme; use grpc://127.0.0.1:8815"),
        (["stats", "--uri", "grpc://127.0.0.1:1"], 1, "is `flight_cli serve` running there?"),
        (["tail", "push:t", "--consumer-id", "c", "--uri", server_process.uri], 2, "is for Paimon tables"),
        (["tail", "nodots", "--uri", server_process.uri], 2, "is neither push:NAME nor DB.TABLE"),
        (["drop", "ghost", "--uri", server_process.uri], 3, "'ghost' is not registered"),  # 3: not found
        (["serve", "--port", server_process.uri.rsplit(":", 1)[1], "--warehouse", str(tmp_path / "never")], 2,
         "Address already in use; is another server running there?"),
    ]
    for args, code, words in cases:
        out = cli(*args)
        assert out.returncode == code and words in out.stderr, (args, out.returncode, out.stderr)
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "never").exists()  # a server that did not start created nothing


def test_cli_version_help_defaults_log_level_after_the_command_and_drop(server_process):
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("flight_cli 0.")
    helped = cli("register", "--help").stdout
    assert "(default: 16)" in helped and "FLIGHT_PAIMON_URI" in helped
    uri = server_process.uri
    assert cli("register", "t", "--schema", "id:int64", "--uri", uri, "--log-level", "debug").returncode == 0
    dropped = cli("drop", "t", "--uri", uri)
    assert dropped.returncode == 0 and json.loads(dropped.stdout) == {"dropped": "t"}
    assert "push:t" not in cli("list", "--uri", uri).stdout
    bad = cli("--log-level", "nonsense", "list")
    assert bad.returncode == 2 and "invalid choice: 'nonsense'" in bad.stderr and "Traceback" not in bad.stderr


def test_get_schema_and_list_flights_with_a_prefix_and_paimon_endpoints(client, warehouse):
    wh = Warehouse(warehouse)
    wh.commit(wh.create("orders", buckets=2), rows(0, 10))
    client.register("orders_push", SCHEMA, partitions=3)
    client.register("other", SCHEMA)
    got = client.flight.get_schema(flight.FlightDescriptor.for_path("push", "orders_push"), options=client.options())
    assert got.schema.equals(SCHEMA)
    paimon = client.flight.get_schema(flight.FlightDescriptor.for_command(
        json.dumps({"table": "db.orders", "columns": ["name", "id"]})), options=client.options())
    assert paimon.schema.names == ["name", "id"]
    with pytest.raises(KeyError, match="'nope' is not registered"):
        client.flight.get_schema(flight.FlightDescriptor.for_path("push", "nope"), options=client.options())
    listed = {"/".join(p.decode() for p in i.descriptor.path): i for i in client.flight.list_flights(b"orders")}
    assert set(listed) == {"push/orders_push"}
    listed = {"/".join(p.decode() for p in i.descriptor.path): i for i in client.flight.list_flights(b"db.")}
    assert set(listed) == {"paimon/db.orders"}
    entry = listed["paimon/db.orders"]
    assert len(entry.endpoints) == 2 and entry.total_records == 10  # one endpoint per bucket, rows known
    assert json.loads(entry.app_metadata)["latest_snapshot"] == 1


def test_example_producers_and_push_commands_explain_mistakes_in_one_line(server_process, tmp_path):
    uri = server_process.uri
    for argv, words in [
        (["-m", "producers.examples.counter", "typo", "--uri", uri], "counter: Push table 'typo' is not registered"),
        (["-m", "producers.examples.csv_file", "typo", str(tmp_path / "none.csv"), "--uri", uri], "csv_file: "),
    ]:
        out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                             timeout=60)
        assert out.returncode == 1 and words in out.stderr and "Traceback" not in out.stderr, out.stderr
    stats = cli("stats", "db.orders", "--uri", uri)  # a Paimon table's name: its stats, read from the table
    assert stats.returncode == 3 and "Paimon table 'db.orders' does not exist" in stats.stderr, stats.stderr


def test_a_counter_waiting_on_a_full_partition_says_so(server_process):
    uri = server_process.uri
    Client(uri).register("full", SCHEMA, capacity=2)
    producer = zygote.popen([sys.executable, "-m", "producers.examples.counter", "full", "--uri", uri,
                                 "--batches", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env(), cwd=ROOT)
    try:
        line = producer.stderr.readline()  # blocks until the counter explains its wait
        assert "waiting for the server to take the last batches" in line and "is a reader running?" in line
    finally:
        producer.kill()
        producer.wait(10)


def test_create_makes_a_paimon_table_for_durable_writes_and_explains_mistakes(server_process, tmp_path):
    uri = ["--uri", server_process.uri]
    out = cli("create", "db.orders", "--schema", "id:int64!,region:string,amount:double", "--primary-key", "id,region",
              "--partition-by", "region", "--buckets", "2", "--option", "file.format=parquet", *uri)
    assert out.returncode == 0, out.stderr
    created = json.loads(out.stdout)
    assert created["primary_keys"] == ["id", "region"] and created["partition_keys"] == ["region"]
    assert created["options"]["bucket"] == "2" and created["schema"].startswith("id: int64 not null")
    client = Client(server_process.uri, timeout=10)
    with client.paimon_sink("db.orders") as sink:
        sink.write(pa.table({"id": [1, 2], "region": ["eu", "us"], "amount": [1.5, 2.5]}))
    assert sink.acked == 1
    cases = [
        (["create", "db.orders", "--schema", "id:int64"], 1, "Paimon table 'db.orders' already exists"),
        (["create", "db.raw", "--schema", "id:int64", "--buckets", "4"], 2, "needs option 'bucket-key'"),
        (["create", "db.raw", "--schema", "id:int64", "--primary-key", "nope"], 2, "column 'nope' is not in the schema"),
        (["create", "nodot", "--schema", "id:int64"], 2, "is not 'DB.TABLE'"),
        (["create", "db.raw", "--schema", "id:int99"], 2, "Unknown column type 'int99'"),
        (["create", "db.raw", "--schema", "id:int64", "--option", "bucket"], 2, "is not KEY=VALUE"),
    ]
    for args, code, words in cases:
        out = cli(*args, *uri)
        assert out.returncode == code and words in out.stderr, (args, out.returncode, out.stderr)
        assert "Traceback" not in out.stderr, out.stderr
    out = cli("serve", "--port", "0", "--warehouse", str(tmp_path / "w"), "--commit-interval-ms", "0")
    assert out.returncode == 2 and "must be positive" in out.stderr, out.stderr


def _listed(uri: str) -> list[str]:
    out = cli("list", "--uri", uri)
    assert out.returncode == 0, out.stderr
    return [line.split("\t")[0] for line in out.stdout.splitlines()]


def test_the_names_list_prints_are_what_tail_and_drop_take(server_process):
    uri = server_process.uri
    client = Client(uri, timeout=10)
    with client.register_streaming_table("orders", SCHEMA) as sink:
        sink.write(make_batch(0, 3))
    assert cli("create", "db.events", "--schema", "id:int64", "--uri", uri).returncode == 0
    with client.paimon_sink("db.events") as sink:
        sink.write(pa.table({"id": [7, 8]}))
    listed = _listed(uri)
    assert sorted(listed) == ["paimon:db.events", "push:orders"], listed
    for name, ids in zip(sorted(listed), [[7, 8], [0, 1, 2]]):
        out = cli("tail", name, "--from", "earliest", "--format", "jsonl", "--limit", str(len(ids)), "--uri", uri)
        assert out.returncode == 0 and [json.loads(r)["id"] for r in out.stdout.splitlines()] == ids, (name, out.stderr)
    for name in listed:
        out = cli("drop", name, "--uri", uri)
        assert out.returncode == 0 and json.loads(out.stdout) == {"dropped": name}, (name, out.stderr)
    assert _listed(uri) == []


def test_drop_removes_a_paimon_table_so_create_can_make_it_again(server_process, warehouse):
    uri = ["--uri", server_process.uri]
    client = Client(server_process.uri, timeout=10)
    assert cli("create", "db.t", "--schema", "id:int64", *uri).returncode == 0
    with client.paimon_sink("db.t", producer="p") as sink:  # this server now has a committer for db.t
        sink.write(pa.table({"id": [1, 2]}))
    again = cli("create", "db.t", "--schema", "id:int64,name:string", *uri)
    assert again.returncode == 1 and "already exists; drop it first" in again.stderr, again.stderr
    dropped = cli("drop", "db.t", *uri)  # what the message asks for
    assert dropped.returncode == 0 and json.loads(dropped.stdout) == {"dropped": "db.t"}, dropped.stderr
    assert not os.path.exists(os.path.join(warehouse, "db.db", "t")) and "paimon:db.t" not in _listed(server_process.uri)
    assert cli("create", "db.t", "--schema", "id:int64,name:string", *uri).returncode == 0
    with client.paimon_sink("db.t", producer="p") as sink:  # a new committer, a fresh producer history
        assert sink.last_seq is None
        sink.write(pa.table({"id": [3], "name": ["c"]}))
    assert Warehouse(warehouse).read("db.t").to_pylist() == [{"id": 3, "name": "c"}]
    missing = cli("drop", "paimon:db.gone", *uri)
    assert missing.returncode == 3 and "Paimon table 'db.gone' does not exist" in missing.stderr, missing.stderr


@pytest.mark.timeout(60)
def test_tail_limit_0_returns_at_once(server_process):
    Client(server_process.uri, timeout=10).register("idle", SCHEMA)  # nothing will ever arrive
    out = cli("tail", "push:idle", "--limit", "0", "--uri", server_process.uri, timeout=20)
    assert out.returncode == 0 and out.stdout == "" and "0 rows in" in out.stderr, out.stderr


@pytest.mark.timeout(60)
def test_list_piped_into_head_exits_0(server_process):
    """`list | head -1` under `set -o pipefail`: list's own exit status is the pipeline's."""
    uri = server_process.uri
    client = Client(uri, timeout=10)
    wide = pa.schema([(f"a_rather_long_column_name_{i}", pa.int64()) for i in range(40)])
    for i in range(100):  # ~150 KB of listing: list still writes when head has gone
        client.register(f"wide_{i}", wide)
    pipeline = f"set -o pipefail; {sys.executable} -m flight_cli list --uri {uri} | head -1"
    out = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                         timeout=60)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 1, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
