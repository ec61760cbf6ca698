"""The push wire contract from outside pyarrow.flight: a Node.js producer and a raw-grpcio one, as subprocesses."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire.actions import PartitionStats
from producers.raw_grpc import rows
from tests import zygote
from tests.conftest import ROOT, child_env, wait_for

JS_DIR = ROOT / "producers" / "js"


def _node_command() -> list[str]:
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "apache-arrow").is_dir():
        pytest.fail("The Node.js producer is not installed: it needs node on PATH and "
                    "producers/js/node_modules; run scripts/setup.")
    return [node, str(JS_DIR / "producer.js")]


@pytest.fixture(params=["node", "raw_grpc"])
def producer(request) -> list[str]:
    """The command line of one producer, before its options."""
    if request.param == "node":
        return _node_command()
    return [sys.executable, "-m", "producers.raw_grpc.producer"]


def run(cmd: list[str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return zygote.run([*cmd, *args], capture_output=True, text=True, timeout=timeout,
                          env=child_env(), cwd=ROOT)


class Running:
    """A producer subprocess whose stdout lines are collected as they come, to watch its progress."""

    def __init__(self, cmd: list[str], *args: str):
        self.proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=child_env(), cwd=ROOT)
        self.lines: list[str] = []
        self.stderr = ""
        self.last_line_at = time.monotonic()
        self._readers = [threading.Thread(target=self._read_stdout, name="producer-stdout", daemon=True),
                         threading.Thread(target=self._read_stderr, name="producer-stderr", daemon=True)]
        for t in self._readers:
            t.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            self.last_line_at = time.monotonic()

    def _read_stderr(self) -> None:
        self.stderr = self.proc.stderr.read()

    def count(self, word: str) -> int:
        return sum(1 for line in list(self.lines) if line.split(" ", 1)[0] == word)

    def wait_until_blocked(self, client, table: str, capacity: int, timeout: float = 60) -> None:
        """Return once the server holds `capacity` batches of the partition and the producer has
        handed gRPC more than that: it is blocked on the full partition (no quiet period needed)."""

        def blocked() -> bool:
            assert self.proc.poll() is None, \
                f"the producer exited (code {self.proc.returncode}) with no reader: {self.lines[-5:]}"
            stats = partition_stats(client, table)
            return self.count("sent") > capacity and stats.queued_batches == capacity and stats.blocked_writers == 1

        wait_for(blocked, lambda: f"the producer to block on the full partition: {self.lines[-5:]}", timeout)

    def finish(self, timeout: float) -> tuple[int, str]:
        """(exit code, stderr) once it ends by itself within `timeout`."""
        code = self.proc.wait(timeout)
        for t in self._readers:
            t.join(10)
        return code, self.stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def partition_stats(client, name: str, partition: int = 0) -> PartitionStats:
    return client.stats(name).push[name].partitions[str(partition)]


def assert_same_rows(got: pa.Table, expected: pa.Table) -> None:
    """Exact equality; on a mismatch, name the column and the first row that differs."""
    assert got.schema.equals(expected.schema), f"{got.schema} != {expected.schema}"
    assert got.num_rows == expected.num_rows
    for name in expected.column_names:
        if not got[name].equals(expected[name]):
            g, e = got[name].to_pylist(), expected[name].to_pylist()
            i = next((i for i, (a, b) in enumerate(zip(g, e)) if a != b), None)
            pytest.fail(f"column {name!r} differs first at row {i}: got {g[i] if i is not None else g!r}, "
                        f"expected {e[i] if i is not None else e!r}")
    assert got.equals(expected)


def read_table(client, name: str, timeout: float = 60) -> pa.Table:
    info = client.info(name)
    batches = [b for e in info.endpoints for b in client.read_endpoint(e, timeout=timeout)]
    return pa.Table.from_batches(batches, schema=info.schema)


def test_rows_arrive_exactly_as_sent(producer, server, client):
    client.register("typed", rows.SCHEMA, capacity=16)
    done = run(producer, "--uri", server.uri, "--table", "typed", "--batches", "3", "--rows", "500",
               "--first-row", "7", "--timeout", "50")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert [line for line in out if line.startswith("ack")] == ["ack 0", "ack 1", "ack 2"]
    assert out[-1] == "done batches=3 acked=3"

    expected = rows.table(3, 500, first=7)
    assert all(expected[c].null_count for c in ("small", "ratio", "name", "flag", "ts", "price", "tags"))
    assert_same_rows(read_table(client, "typed"), expected)


def test_stalled_consumer_blocks_producer_until_drained(producer, server, client):
    batches, capacity = 24, 2  # ~1.3 MiB per batch: far more than gRPC buffers
    client.register("slow", rows.SCHEMA, capacity=capacity)
    p = Running(producer, "--uri", server.uri, "--table", "slow", "--batches", str(batches),
                "--rows", "16000", "--timeout", "100")
    try:
        p.wait_until_blocked(client, "slow", capacity)  # the server waits for room: it pushes back
        wait_for(lambda: p.count("ack") == capacity, lambda: f"the producer to see {capacity} acks: {p.lines[-5:]}")
        assert p.proc.poll() is None, f"the producer ended with no reader: {p.lines[-3:]}"
        sent, acks = p.count("sent"), p.count("ack")
        assert sent < batches, "every send went through although nobody read"
        assert acks == capacity, f"the server accepted {acks} batches into a log of {capacity}"
        assert partition_stats(client, "slow").queued_batches == capacity

        got = read_table(client, "slow")
        code, err = p.finish(timeout=60)
    finally:
        p.kill()
    assert code == 0, err
    assert p.lines[-1] == f"done batches={batches} acked={batches}"
    assert p.count("sent") == batches
    assert_same_rows(got, rows.table(batches, 16000))


def test_in_band_failure_ends_reader_with_cause(producer, server, client):
    cause = "sensor 7 lost power (code 42)"
    client.register("failing", rows.SCHEMA, capacity=16)
    info = client.info("failing")
    received: list[pa.RecordBatch] = []
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            received.extend(client.read_endpoint(info.endpoints[0], timeout=60))
        except BaseException as e:  # noqa: BLE001 - the assertion below inspects it
            errors.append(e)

    # The reader is already waiting when the producer fails: the failure must end it.
    reader = threading.Thread(target=consume, name="failing-reader", daemon=True)
    reader.start()
    done = run(producer, "--uri", server.uri, "--table", "failing", "--batches", "5", "--rows", "100",
               "--fail-after", "2", "--message", cause, "--timeout", "50")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f'failed-in-band "{cause}"'
    reader.join(60)
    assert not reader.is_alive(), "the reader did not end after the producer failed"

    assert len(errors) == 1, f"the reader ended without an error after {len(received)} batches"
    assert isinstance(errors[0], flight.FlightError), repr(errors[0])
    assert cause in str(errors[0])
    assert_same_rows(pa.Table.from_batches(received, schema=rows.SCHEMA), rows.table(2, 100))


def test_wrong_schema_is_refused_with_the_difference(producer, server, client):
    client.register("strict", rows.SCHEMA, capacity=16)
    refused = run(producer, "--uri", server.uri, "--table", "strict", "--batches", "2", "--rows", "10",
                  "--wrong-schema", "--timeout", "30")
    assert refused.returncode == 1, refused.stdout
    assert "INVALID_ARGUMENT" in refused.stderr
    assert "push table 'strict' partition 0" in refused.stderr
    assert "column 'id' has type int32, expected int64" in refused.stderr
    assert "Traceback" not in refused.stderr

    part = partition_stats(client, "strict")
    assert (part.state, part.rows_in) == ("open", 0), "a refused stream appended or closed"
    # The refusal left the partition usable: a producer with the right schema still gets through.
    ok = run(producer, "--uri", server.uri, "--table", "strict", "--batches", "2", "--rows", "10",
             "--timeout", "30")
    assert ok.returncode == 0, ok.stderr
    assert_same_rows(read_table(client, "strict"), rows.table(2, 10))


def test_killed_producer_fails_reader(producer, server, client):
    client.register("killed", rows.SCHEMA, capacity=2)
    p = Running(producer, "--uri", server.uri, "--table", "killed", "--batches", "24",
                "--rows", "16000", "--timeout", "100")
    try:
        p.wait_until_blocked(client, "killed", capacity=2)
    finally:
        p.kill()  # SIGKILL: no clean end, no in-band error, just a broken stream

    # The server notices the broken stream while blocked on the full log, with no reader needed.
    wait_for(lambda: partition_stats(client, "killed").state == "failed",
             lambda: f"the killed producer's partition to fail (it is {partition_stats(client, 'killed').state!r})")
    info = client.info("killed")
    received: list[pa.RecordBatch] = []
    with pytest.raises(flight.FlightError, match="broke"):
        for batch in client.read_endpoint(info.endpoints[0], timeout=30):
            received.append(batch)
    # What was appended before the kill still arrives, then the error: never a clean short stream.
    assert_same_rows(pa.Table.from_batches(received, schema=rows.SCHEMA), rows.table(2, 16000))


def paimon_rows(client, table: str) -> pa.Table:
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), options=client.options())
    return pa.concat_tables([client.flight.do_get(e.ticket).read_all() for e in info.endpoints])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("keys", [[], ["id"]])
def test_a_named_producer_writes_into_a_paimon_table_exactly_once_across_runs(producer, client, keys):
    """Durable writes from outside pyarrow.flight: {"write", "producer"}, {"seq": N} per batch, acks
    {"seq", "snapshot"} after the commit, producer_state by DoAction; a second run resumes."""
    client.create_table("db.events", rows.SCHEMA, primary_keys=keys, options={"bucket": "2"} if keys else None)
    args = ["--uri", client.uri, "--paimon", "db.events", "--producer", "x1", "--rows", "100"]
    first = run(producer, *args, "--batches", "3")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "resume last_seq=none" and lines[-1] == "done last_seq=2"
    acks = [line for line in lines if line.startswith("ack ")]
    assert [int(a.split()[1]) for a in acks] == [0, 1, 2] and all(" snapshot=" in a for a in acks)
    second = run(producer, *args, "--batches", "5")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == "resume last_seq=2"
    assert [line for line in second.stdout.splitlines() if line.startswith("sent ")] == \
        ["sent 3 rows=100", "sent 4 rows=100"]
    got = paimon_rows(client, "db.events").sort_by("id")
    assert got.column("id").to_pylist() == list(range(500))  # every row once
    assert got.select(["name", "price", "tags"]).to_pylist() == \
        rows.table(5, 100).sort_by("id").select(["name", "price", "tags"]).to_pylist()
    assert client.producer_state("db.events", "x1") == 4


@pytest.mark.timeout(60)
def test_an_unnamed_producer_writes_into_a_paimon_table_and_a_wrong_schema_is_one_line(producer, client):
    client.create_table("db.events", rows.SCHEMA)
    ok = run(producer, "--uri", client.uri, "--paimon", "db.events", "--batches", "2", "--rows", "50")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1] == "done batches=2 acked=2"
    assert paimon_rows(client, "db.events").num_rows == 100
    wrong = run(producer, "--uri", client.uri, "--paimon", "db.events", "--wrong-schema")
    assert wrong.returncode == 1
    err = wrong.stderr.strip()
    assert err.startswith("error: INVALID_ARGUMENT: The stream's schema does not match Paimon table 'db.events': "
                          "column 'id' has type int32, expected int64.") and "\n" not in err, err
    assert err.endswith("nothing was written"), err
    assert paimon_rows(client, "db.events").num_rows == 100


@pytest.mark.timeout(60)
def test_the_node_producer_says_when_it_waits_on_a_full_partition(server, client):
    """As the Python counter does: a producer with no reader says so instead of hanging silently."""
    client.register("full", rows.SCHEMA, capacity=2)
    p = subprocess.Popen([*_node_command(), "--uri", server.uri, "--table", "full", "--batches", "24",
                          "--rows", "16000", "--timeout", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, env=child_env(), cwd=ROOT)
    try:
        line = p.stderr.readline()  # blocks until the producer explains its wait (or fails)
        assert line.startswith("producer.js: waiting for the server to take batch "), line
        assert "partition 0 of push table 'full' is full: is a reader running?" in line, line
        assert partition_stats(client, "full").queued_batches == 2
    finally:
        p.kill()
        p.wait(10)
