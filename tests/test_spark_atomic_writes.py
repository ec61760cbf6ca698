"""df.write into a Paimon table is one atomic commit per job: a retry that yields its rows in
another order, speculative or failed attempts and a driver killed before its commit leave every
row once or none (real Spark jobs in their own processes, a real server, real pypaimon tables)."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

from producers.examples.events import SCHEMA
from tests.conftest import ROOT, child_env, wait_for
from tests.process import ServerProcess
from tests.spark_write_job import ROWS
from tests.test_spark_ingest import held, table_rows

pytestmark = pytest.mark.timeout(300)


def parquet_files(warehouse: str, table: str) -> set[str]:
    db, name = table.split(".")
    root = os.path.join(warehouse, f"{db}.db", name)
    return {f for _, _, files in os.walk(root) for f in files if f.endswith(".parquet")}


def committed_files(client, table: str, warehouse: str) -> set[str]:
    from tests.paimon_tables import Warehouse

    t = Warehouse(warehouse).catalog.get_table(table)
    return {e.file.file_name for e in t.new_read_builder().new_scan().file_scanner.plan_files()}


def batch(ids) -> pa.RecordBatch:
    ids = list(ids)
    return pa.record_batch([pa.array([f"p{i % 3}" for i in ids]), pa.array([i // 1000 for i in ids], pa.int64()),
                            pa.array(ids, pa.int64())], schema=SCHEMA)


def test_a_task_retried_with_its_rows_in_another_order_writes_every_row_once(server, client):
    """The outside review's repro: local[2,4], each task fails once after handing Spark its first
    batches, and its retry yields the rows in reverse order (with batch indexes as seqs this wrote
    ids 0-9,999 twice and lost 20,000-29,999 while the job succeeded). A job into an append table
    and one into a primary-key table, in one Spark session."""
    # write-only: the server's maintenance (due after a staged job's commit, as after any) would
    # compact the job's files into a second snapshot; one job must be one snapshot of its own
    client.create_table("db.w", SCHEMA, options={"write-only": "true"})
    client.create_table("db.wk", SCHEMA, primary_keys=["id"], options={"bucket": "2", "write-only": "true"})
    proc = subprocess.run([sys.executable, "-m", "tests.spark_write_job", server.uri, "db.w,db.wk", "reorder"],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"db.w": None, "db.wk": None}
    for table in ("db.w", "db.wk"):
        assert held(client, table) == collections.Counter((f"p{i % 3}", i) for i in range(ROWS)), table
        assert client.latest_snapshot(table).snapshot_id == 1, f"{table}: one job, one snapshot"


class AnswerLosingProxy:
    """A TCP proxy in front of a server (Spark's driver and executors connect through it): it
    forwards both ways until the server sends something once `landed()` is true (the job's
    snapshot file exists); that is dropped, the server SIGKILLed (`kill`) and its connections
    cut, so the answer of the commit that landed is lost with the server, whatever the speed of
    either. `point_to` sends new connections to the server started again."""

    def __init__(self, upstream: str, landed, kill):
        self._upstream, self._landed, self._kill = upstream, landed, kill
        self._lock = threading.Lock()
        self._generation = 0  # which server new connections go to
        self.cut: set[int] = set()  # the generations whose server was killed: their answers are dropped
        self.fired = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"grpc://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="proxy", daemon=True).start()

    def point_to(self, upstream: str) -> None:
        with self._lock:
            self._generation += 1
            self._upstream = upstream

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                generation, upstream = self._generation, self._upstream
            host, port = upstream.rsplit("//", 1)[-1].rsplit(":", 1)
            try:
                server = socket.create_connection((host, int(port)), timeout=10)
            except OSError:  # the server is down: the client sees UNAVAILABLE, as from the server itself
                client.close()
                continue
            server.settimeout(None)
            pair = (client, server)
            threading.Thread(target=self._pump, args=(client, server, None, pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, generation, pair), daemon=True).start()

    def _pump(self, source, sink, generation, pair) -> None:
        """`generation` is set for what the server sends: it is dropped once the snapshot landed."""
        try:
            while data := source.recv(65536):
                if generation is not None and self._lost(generation):
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # closed by the other direction already
                s.close()

    def _lost(self, generation: int) -> bool:
        with self._lock:
            if generation not in self.cut and not self.fired.is_set() and self._landed():
                self.cut.add(generation)
                self._kill()
                self.fired.set()
            return generation in self.cut


def test_a_job_whose_commit_answer_was_lost_with_the_server_reports_its_true_outcome(warehouse, tmp_path):
    """The outside review's repro through Spark: the server SIGKILLed as the job's snapshot lands
    and started again. The driver's commit failed (UNAVAILABLE), so Spark failed a job whose rows
    were all in the table, and running it again doubled them. Now the driver asks again until the
    server answers for certain: the restarted server finds the stage in its snapshot, and Spark
    reports the job done, its rows in the table once, in one snapshot."""
    first = ServerProcess(warehouse)
    snapshot = os.path.join(warehouse, "db.db", "lost", "snapshot", "snapshot-1")
    proxy = AnswerLosingProxy(first.uri, lambda: os.path.exists(snapshot), first.proc.kill)
    second = None
    try:
        from producers import Client

        setup = Client(first.uri, timeout=60)
        setup.create_table("db.lost", SCHEMA, options={"write-only": "true"})  # one job, one snapshot
        setup.close()
        job = subprocess.Popen([sys.executable, "-m", "tests.spark_write_job", proxy.uri, "db.lost", "plain"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT,
                               start_new_session=True)
        try:
            wait_for(lambda: proxy.fired.is_set() or job.poll() is not None, "the job's snapshot to land", timeout=240)
            assert proxy.fired.is_set(), f"the job ended before its snapshot landed: {job.communicate()[1][-3000:]}"
            first.proc.wait(30)
            second = ServerProcess(warehouse)
            proxy.point_to(second.uri)
            out, err = job.communicate(timeout=240)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.communicate(timeout=60)
        assert job.returncode == 0, err[-3000:]
        assert json.loads(out.strip().splitlines()[-1]) == {"db.lost": None}, "Spark did not report the job done"
        check = Client(second.uri, timeout=60)
        try:
            assert held(check, "db.lost") == collections.Counter((f"p{i % 3}", i) for i in range(ROWS))
            assert check.latest_snapshot("db.lost").snapshot_id == 1, "one job, one snapshot"
        finally:
            check.close()
    finally:
        proxy.close()
        first.stop()
        if second is not None:
            second.stop()


def test_a_driver_killed_before_its_commit_leaves_nothing(server, client, warehouse):
    client.create_table("db.k", SCHEMA)
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark_write_job", server.uri, "db.k", "block"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT,
                            start_new_session=True)
    try:
        staged = wait_for(lambda: client.stats().staged.get("db.k"),
                          "a task of the job to stage its rows", timeout=180)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Python workers
        proc.communicate(timeout=60)
    assert client.latest_snapshot("db.k").snapshot_id is None, "staged rows became visible without a commit"
    assert table_rows(client, "db.k").num_rows == 0
    (stage, state), = staged.items()
    assert state.rows == ROWS // 3 and parquet_files(warehouse, "db.k")  # written, never committed
    assert client.abort_staged("db.k", stage).attempts == 1  # what a stage's idle timeout also does
    assert parquet_files(warehouse, "db.k") == set()


@pytest.mark.parametrize("keys,options", [([], {"bucket": "2", "bucket-key": "id"}), (["id"], {"bucket": "2"}),
                                          (["id"], {})])  # the last: dynamic buckets (rows wait for the commit)
def test_speculative_and_failed_attempts_leave_nothing_and_a_retried_commit_adds_nothing(client, warehouse, keys,
                                                                                         options):
    # write-only: the test counts data files, and a settling merge of a slow run would add some
    client.create_table("db.s", SCHEMA, primary_keys=keys, options={**options, "write-only": "true"})
    client.stage("db.s", "job", "0-0", SCHEMA, [batch(range(0, 100)), batch(range(100, 200))])
    client.stage("db.s", "job", "0-1", SCHEMA, [batch(range(199, -1, -1))])  # its speculative twin
    client.stage("db.s", "job", "1-0", SCHEMA, [batch(range(200, 300))])
    def failing():
        yield batch(range(200, 250))
        raise RuntimeError("the attempt's task failed")

    with pytest.raises(RuntimeError, match="task failed"):  # a failed attempt: nothing of it is staged
        client.stage("db.s", "job", "1-1", SCHEMA, failing())
    assert client.stats("db.s").staged["db.s"]["job"].attempts == 3
    with client.paimon_sink("db.s", producer="live") as sink:  # a producer's group commits meanwhile
        sink.write(batch(range(1000, 1010)))
    done = client.commit_staged("db.s", "job", ["0-1", "1-0"], "spark-job", 0)
    assert (done.rows, done.skipped) == (300, False)
    with client.paimon_sink("db.s", producer="live") as sink:  # ... and after: its rows follow the job's
        sink.write(batch(range(250, 260)))
    ids = table_rows(client, "db.s").column("id").to_pylist()
    expected = [*range(300), *range(1000, 1010)] + ([] if keys else list(range(250, 260)))
    assert sorted(ids) == sorted(expected)
    again = client.commit_staged("db.s", "job", ["0-1", "1-0"], "spark-job", 0)  # a retry after a lost answer
    assert again == done
    with pytest.raises(Exception, match="staged already"):  # an attempt id is staged once
        client.stage("db.s", "job2", "0-0", SCHEMA, [batch(range(700, 710))]) + \
            client.stage("db.s", "job2", "0-0", SCHEMA, [batch(range(700, 710))])
    client.abort_staged("db.s", "job2")
    no_producer = [client.stage("db.s", "job3", "0-0", SCHEMA, [batch(range(800, 805))])]
    first = client.commit_staged("db.s", "job3", ["0-0"])  # Spark's batch writer: no producer
    assert client.commit_staged("db.s", "job3", ["0-0"]) == first and first.rows == 5 and no_producer == [1]
    expected += list(range(800, 805))
    assert sorted(table_rows(client, "db.s").column("id").to_pylist()) == sorted(expected)
    assert parquet_files(warehouse, "db.s") == committed_files(client, "db.s", warehouse), \
        "the discarded attempts' files were deleted, and only theirs"
    client.stage("db.s", "other", "0-0", SCHEMA, [batch(range(500, 600))])
    assert client.abort_staged("db.s", "other").attempts == 1
    assert parquet_files(warehouse, "db.s") == committed_files(client, "db.s", warehouse)
    with pytest.raises(KeyError, match="not staged on this server"):
        client.commit_staged("db.s", "gone", ["0-0"], "spark-gone", 0)


def test_staged_files_outlive_orphan_removal_and_a_table_created_again_takes_no_stale_stage(client, warehouse):
    client.create_table("db.o", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    client.stage("db.o", "job", "0-0", SCHEMA, [batch(range(100))])
    staged = parquet_files(warehouse, "db.o")
    old = 1_000_000_000  # 2001: far older than remove_orphan_files' default of a day
    for root, _, files in os.walk(os.path.join(warehouse, "db.db", "o")):
        for f in files:
            os.utime(os.path.join(root, f), (old, old))
    client.remove_orphan_files("db.o")
    assert parquet_files(warehouse, "db.o") == staged, "orphan removal took files a staged write holds"
    assert client.commit_staged("db.o", "job", ["0-0"]).rows == 100
    assert sorted(table_rows(client, "db.o").column("id").to_pylist()) == list(range(100))
    client.stage("db.o", "late", "0-0", SCHEMA, [batch(range(200, 210))])
    client.drop_table("db.o")
    client.create_table("db.o", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    with pytest.raises(KeyError, match="dropped and created again"):
        client.commit_staged("db.o", "late", ["0-0"])
    assert client.latest_snapshot("db.o").snapshot_id is None
