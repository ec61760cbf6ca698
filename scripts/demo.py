"""The end-to-end demo behind scripts/demo: push tables, Paimon tables and Spark over one server."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

from producers import Client  # noqa: E402
from producers.client import error_message  # noqa: E402
from tests.process import ServerProcess  # noqa: E402


def section(title: str) -> None:
    print(f"\n=== {title} ===", flush=True)


def start_server(warehouse: str) -> tuple[subprocess.Popen, str, str]:
    server = ServerProcess(warehouse, "--metrics-port", "0", log_level="warning", stderr=None)
    print(server.first_line.strip())
    metrics_url = re.search(r"metrics (http://\S+)/metrics", server.first_line).group(1)
    return server.proc, server.uri, metrics_url


def demo_operations(uri: str, metrics_url: str) -> None:
    import urllib.request

    section("operations: /healthz (503 \"stopping\" while a SIGTERM drains), the health action, some of /metrics")
    print("/healthz:", urllib.request.urlopen(metrics_url + "/healthz", timeout=10).read().decode().strip())
    print("health action (Client.health, a typed result):", Client(uri).health())
    text = urllib.request.urlopen(metrics_url + "/metrics", timeout=10).read().decode()
    wanted = ("flight_paimon_table_rows_total{", "flight_paimon_rpcs_total{", "flight_paimon_table_push_queued_bytes{")
    for line in text.splitlines():
        if line.startswith(wanted) and "demo_orders" in line or line.startswith("flight_paimon_rpcs_total{method=\"do_"):
            print(line)


def demo_security(warehouse: str, paimon_table: str | None) -> None:
    """A second server over the same warehouse with TLS, tokens and a memory bound."""
    import json
    import secrets
    import tempfile

    import pyarrow as pa
    import pyarrow.flight as flight

    from flight_server.auth import token_sha256
    from scripts.throwaway_ca import write_certs

    section("security: TLS, bearer tokens with per-table grants, --max-memory")
    tokens = {"ops": secrets.token_urlsafe(24), "analyst": secrets.token_urlsafe(24)}
    with tempfile.TemporaryDirectory() as d:
        write_certs(d)
        with open(f"{d}/auth.json", "w") as f:
            json.dump({"principals": [
                {"name": "ops", "token_sha256": token_sha256(tokens["ops"]),
                 "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
                {"name": "analyst", "token_sha256": token_sha256(tokens["analyst"]),
                 "grants": [{"tables": "demo.*", "allow": ["read"]}]}]}, f)
        with ServerProcess(warehouse, "--tls-cert", f"{d}/server.pem", "--tls-key", f"{d}/server.key",
                           "--auth", f"{d}/auth.json", "--max-memory", "64MiB", log_level="error", stderr=None) as server:
            print(server.first_line.strip())
            for who, token in (("no token", None), ("analyst", tokens["analyst"])):
                client = Client(server.uri, token=token, tls_root_certs=f"{d}/ca.pem")
                try:
                    client.register("demo_secure", pa.schema([("id", pa.int64())]))
                except flight.FlightError as e:
                    print(f"register as {who}: {type(e).__name__}: {error_message(e)}")
            analyst = Client(server.uri, token=tokens["analyst"], tls_root_certs=f"{d}/ca.pem")
            listed = [i.descriptor.path[1].decode() for i in analyst.flight.list_flights(options=analyst.options())]
            print(f"list_flights as analyst shows only what it may read: {len(listed)} tables, e.g. {listed[:3]}")
            if paimon_table:
                info = analyst.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", paimon_table),
                                                      options=analyst.options())
                rows = sum(analyst.flight.do_get(e.ticket, options=analyst.options()).read_all().num_rows
                           for e in info.endpoints)
                print(f"analyst reads {paimon_table} over TLS: {rows} rows")
            ops = Client(server.uri, token=tokens["ops"], tls_root_certs=f"{d}/ca.pem")
            print("register as ops:", ops.register("demo_secure", pa.schema([("id", pa.int64())])))
            try:
                ops.register("demo_too_big", pa.schema([("id", pa.int64())]), partitions=2)
            except flight.FlightError as e:
                print(f"a second table past --max-memory: {error_message(e)}")


def demo_scale_out(spark, warehouse: str, table: str) -> None:
    """Two servers over one warehouse, each advertising both: Spark's tasks split between them,
    and when one is SIGKILLed the next query's tasks fail over to the other."""
    import json
    import socket
    import tempfile

    section("scale-out: two servers over one warehouse; Spark tasks split between them, then one is killed")
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    uris = [f"grpc://127.0.0.1:{p}" for p in ports]
    advertise = [a for u in uris for a in ("--advertise", u)]
    os.environ["FLIGHT_PAIMON_TICKET_KEY"] = os.urandom(16).hex()  # servers of one warehouse share it
    logs, servers = [], []
    try:
        with tempfile.TemporaryDirectory() as d:
            for i, port in enumerate(ports):
                logs.append(Path(d, f"server{i}.log"))
                servers.append(ServerProcess(warehouse, "--port", str(port), *advertise, stderr=open(logs[-1], "w")))

            def do_gets(log: Path) -> int:
                return sum(1 for line in log.read_text().splitlines()
                           if line.startswith("{") and json.loads(line).get("rpc") == "do_get")

            df = spark.read.format("flight-paimon").option("uri", uris[0]).option("table", table).load()
            print(f"spark.read {table} through server A: {df.count()} rows; do_get calls served: "
                  f"A {do_gets(logs[0])}, B {do_gets(logs[1])}")
            servers[0].stop()
            df = spark.read.format("flight-paimon").option("uri", uris[1]).option("table", table).load()
            print(f"server A SIGKILLed; the same read through B: {df.count()} rows (tasks listed A first "
                  f"failed over to B: B served {do_gets(logs[1])} do_get calls in all)")
    finally:
        os.environ.pop("FLIGHT_PAIMON_TICKET_KEY", None)
        for s in servers:
            s.stop()


def run(*cmd: str, timeout: float = 120) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"demo step failed: {' '.join(cmd)}\n{out.stderr}")
    return out.stdout


def demo_push(uri: str, batches: int) -> None:
    section("push table: a producer process -> server -> a reader, concurrently, with backpressure")
    client = Client(uri)
    client.register("demo_orders", __import__("producers.examples.counter", fromlist=["SCHEMA"]).SCHEMA, capacity=16)
    start = time.monotonic()
    producer = subprocess.Popen([sys.executable, "-m", "producers.examples.counter", "demo_orders", "--uri", uri,
                                 "--batches", str(batches), "--rows", "65536"],
                                stdout=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    rows = nbytes = 0
    for chunk in client.flight.do_get(client.info("demo_orders").endpoints[0].ticket, options=client.options(300)):
        rows += chunk.data.num_rows
        nbytes += chunk.data.nbytes
    elapsed = time.monotonic() - start
    assert producer.wait(60) == 0
    print(f"flowed {rows:,} rows, {nbytes / 2**20:,.0f} MiB in {elapsed:.2f} s: "
          f"{nbytes / 2**20 / elapsed:,.0f} MiB/s, {rows / elapsed:,.0f} rows/s (includes producer start-up)")

    section("push table: flight_cli register, an example producer, flight_cli tail (a viewer: it consumes nothing)")
    print(run(sys.executable, "-m", "flight_cli", "register", "demo_small",
              "--schema", "id:int64,name:string,ts:timestamp[us]", "--uri", uri).strip())
    producer = subprocess.Popen([sys.executable, "-m", "producers.examples.counter", "demo_small", "--uri", uri,
                                 "--batches", "3", "--rows", "2", "--rate", "5"], stdout=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    print(run(sys.executable, "-m", "flight_cli", "tail", "push:demo_small", "--from", "earliest",
              "--uri", uri), end="")
    producer.wait(30)

    section("push table: a producer that dies never looks finished (no end marker -> the reader gets an error)")
    import pyarrow.flight as flight

    from producers.examples.counter import SCHEMA, make_batch

    client.register("demo_crash", SCHEMA)
    writer, _ = client.flight.do_put(flight.FlightDescriptor.for_path("push", "demo_crash", "0"), SCHEMA)
    writer.write_batch(make_batch(0, 3))
    try:
        writer.close()  # what a crashed producer's destructors do: a half-close without {"end": N}
    except flight.FlightError as e:
        print(f"producer's close: {error_message(e)}")
    try:
        client.flight.do_get(client.info("demo_crash").endpoints[0].ticket, options=client.options(10)).read_all()
    except flight.FlightError as e:
        print(f"reader: {error_message(e)}")


def write_snapshot(table, first: int, rows: int) -> None:
    import pyarrow as pa

    from tests.paimon_tables import commit_arrow

    commit_arrow(table, pa.table({"id": list(range(first, first + rows)),
                                  "amount": [i * 1.5 for i in range(first, first + rows)]}))


def demo_paimon(uri: str, warehouse: str) -> None:
    import pyarrow as pa
    import pyarrow.flight as flight
    from pypaimon import CatalogFactory, Schema

    section("Paimon table: written with pypaimon, read through Flight, one endpoint per bucket")
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("demo", True)
    name = f"demo.orders_{int(time.time())}"
    schema = pa.schema([("id", pa.int64()), ("amount", pa.float64())])
    catalog.create_table(name, Schema.from_pyarrow_schema(schema, options={"bucket": "2", "bucket-key": "id"}), False)
    table = catalog.get_table(name)
    write_snapshot(table, 0, 4)
    client = Client(uri)
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", name), options=client.options())
    rows = sum(client.flight.do_get(ep.ticket, options=client.options()).read_all().num_rows for ep in info.endpoints)
    print(f"{name}: {len(info.endpoints)} endpoints (buckets), {rows} rows at the latest snapshot")

    section("Paimon table: flight_cli tail --from earliest while two more snapshots are committed")
    tail = subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", name, "--from", "earliest",
                             "--limit", "10", "--uri", uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=ROOT)
    for first in (4, 7):
        time.sleep(1.0)
        write_snapshot(table, first, 3)
        print(f"committed ids {first}..{first + 2}", flush=True)
    out, err = tail.communicate(timeout=60)
    print(out, end="")
    print(err.strip().splitlines()[-1])

    section("Paimon table: tail --consumer-id commits progress after printing; the next tail resumes there")
    viewer = [sys.executable, "-m", "flight_cli", "tail", name, "--consumer-id", "demo-viewer",
              "--format", "jsonl", "--uri", uri]
    print(run(*viewer, "--from", "earliest", "--limit", "10"), end="")
    progress = client.consumer_progress(name, "demo-viewer")
    print(f"recorded progress: next snapshot {progress} (the snapshots every endpoint had finished when the "
          "tail stopped); committing ids 10..11, then a new tail resumes there")
    write_snapshot(table, 10, 2)
    # A recorded progress beats --from (as in Paimon's connectors); without one the tail starts at the earliest.
    print(run(*viewer, "--from", "earliest", "--limit", "5"), end="")


def demo_ingest(uri: str, warehouse: str, spark) -> None:
    """Durable writes: named producers push into a Paimon table through a second server that is
    SIGKILLed and restarted mid-run; a tail and a Spark stream on the first server see every row once."""
    import collections
    import json
    import signal
    import socket
    import threading


    section("durable writes: flight_cli create, then 4 named producers push into a Paimon table")
    name = f"demo.events_{int(time.time())}"
    print(run(sys.executable, "-m", "flight_cli", "create", name,
              "--schema", "producer:string,seq:int64,id:int64", "--uri", uri).strip())
    with socket.socket() as s:  # the ingest server restarts on the same port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ingest = ServerProcess(warehouse, "--port", str(port), log_level="warning", stderr=None)
    producers, batches, rows = 4, 30, 250
    expected = producers * batches * rows

    tail = subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", name, "--from", "earliest",
                             "--format", "jsonl", "--limit", str(expected), "--uri", uri],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV, cwd=ROOT)
    seen_by_spark: list[tuple] = []
    lock = threading.Lock()
    query = None
    if spark is not None:
        def collect(df, epoch):
            got = [tuple(r) for r in df.select("producer", "seq", "id").collect()]
            with lock:
                seen_by_spark.extend(got)

        query = (spark.readStream.format("flight-paimon").option("uri", uri).option("table", name)
                 .option("scan.mode", "earliest").load()
                 .writeStream.foreachBatch(collect).trigger(processingTime="500 milliseconds").start())
    procs = [subprocess.Popen([sys.executable, "-m", "producers.examples.events", name, "--uri", ingest.uri,
                               "--producer", f"p{i}", "--batches", str(batches), "--rows", str(rows), "--rate", "6"],
                              stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT) for i in range(producers)]
    printed: dict[int, list[str]] = {i: [] for i in range(producers)}  # what each producer printed so far
    for i, p in enumerate(procs):  # the kill lands mid-run: once every producer has had batch 5 acked
        while not ((line := p.stdout.readline()).startswith("acked ") and int(line.split()[1]) >= 5):
            if not line:
                raise SystemExit("demo step failed: a producer ended before its batch 5 was acked")
            printed[i].append(line)
        printed[i].append(line)
    ingest.proc.send_signal(signal.SIGKILL)
    ingest.proc.wait(10)
    acked = {f"p{i}": Client(uri).producer_state(name, f"p{i}") for i in range(producers)}
    print(f"SIGKILLed the ingest server mid-run (the table holds up to seq {json.dumps(acked)}); "
          f"restarting it on port {port}; the producers reconnect and resend only what it lacks")
    ingest = ServerProcess(warehouse, "--port", str(port), log_level="warning", stderr=None)
    try:
        for i, p in enumerate(procs):
            out, _ = p.communicate(timeout=120)  # the rest of its output (a fast producer may have ended)
            lines = [line for line in [*printed[i], *out.splitlines()] if line.strip()]
            if p.returncode != 0 or not lines:
                raise SystemExit(f"demo step failed: producer p{i} exited {p.returncode}: {lines[-3:]}")
            print(lines[-1].strip())
        state = {f"p{i}": Client(uri).producer_state(name, f"p{i}") for i in range(producers)}
        print(f"producer_state: {json.dumps(state)}")
        tail_out, _ = tail.communicate(timeout=60)
        tail_rows = [json.loads(line) for line in tail_out.splitlines()]
        distinct = {(r["producer"], r["seq"], r["id"]) for r in tail_rows}
        print(f"flight_cli tail --from earliest: {len(tail_rows)} rows, {len(distinct)} distinct (expected {expected})")
        if query is not None:
            deadline = time.monotonic() + 60
            while len(seen_by_spark) < expected and time.monotonic() < deadline:
                time.sleep(0.2)
            query.stop()
            with lock:
                counts = collections.Counter(seen_by_spark)
            print(f"spark.readStream: {sum(counts.values())} rows, {len(counts)} distinct, "
                  f"{sum(1 for c in counts.values() if c > 1)} seen twice (expected {expected} once each)")
            df = spark.createDataFrame([("spark", i // 100, 10**9 + i) for i in range(1000)],
                                       "producer string, seq long, id long")
            client = Client(uri)
            before = client.latest_snapshot(name).snapshot_id
            df.repartition(2).write.format("flight-paimon").option("uri", uri).option("table", name).mode("append").save()
            total = spark.read.format("flight-paimon").option("uri", uri).option("table", name).load().count()
            after = client.latest_snapshot(name).snapshot_id
            client.close()
            print(f"df.write 1000 more rows into {name} (2 tasks staged them, the driver committed them as one "
                  f"snapshot: {after}, after {before}): the table holds {total} rows (expected {expected + 1000})")
    finally:
        ingest.stop()


def demo_shared_table(uri: str, warehouse: str) -> None:
    """A table shared by two servers and another tool: a named producer that fails over and resends
    through the other server writes nothing twice; a rollback by pypaimon is seen by the running
    server, whose producer_state then says what the table lost."""
    import json

    import pyarrow as pa
    import pyarrow.flight as flight
    from pypaimon import CatalogFactory

    from flight_server.wire import messages, names

    section("a shared table: a producer fails over to a second server and resends; another tool rolls it back")
    name = f"demo.shared_{int(time.time())}"
    schema = pa.schema([("seq", pa.int64()), ("id", pa.int64())])

    def batch(seq: int) -> pa.RecordBatch:
        return pa.record_batch([pa.array([seq] * 100, pa.int64()), pa.array(range(seq * 100, seq * 100 + 100))],
                               schema=schema)

    def write(client, seqs) -> list:
        with client.paimon_sink(name, producer="loader") as sink:
            for seq in seqs:
                sink.write(batch(seq), seq=seq)
        return sink.last_seq

    a = Client(uri)
    a.create_table(name, schema, options={"write-only": "true"})  # one snapshot per sink below
    with ServerProcess(warehouse, stderr=subprocess.DEVNULL) as other:
        b = Client(other.uri)
        write(a, range(0, 5))
        write(b, range(5, 10))
        # A producer in another language that lost B's acks resends 5-9 through A, on the wire:
        # {"write", "producer"}, each batch's app_metadata {"seq": N}, then the end marker.
        command = flight.FlightDescriptor.for_command(json.dumps(names.write_command(name, "loader")))
        writer, acks = a.flight.do_put(command, schema)
        for seq in range(5, 10):
            writer.write_with_metadata(batch(seq), pa.py_buffer(messages.batch_seq(seq)))
        writer.write_metadata(pa.py_buffer(messages.end(5)))
        writer.done_writing()
        answered = []
        while (buf := acks.read()) is not None:
            answered.append(messages.read_ack(buf))
        writer.close()
        print("seqs 0-4 through server A, 5-9 through server B; the producer lost B's acks and resent 5-9 through "
              f"A, which acked them as held: {[(x.seq, x.snapshot) for x in answered]} (seq, snapshot)")
        info = a.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"table": name})))
        ids = [i for e in info.endpoints for i in a.flight.do_get(e.ticket).read_all().column("id").to_pylist()]
        print(f"the table holds {len(ids)} rows, {len(set(ids))} distinct "
              f"(expected 1000 once each); producer_state through A: {a.producer_state(name, 'loader')}, "
              f"through B: {b.producer_state(name, 'loader')}")
        b.close()
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.get_table(name).rollback_to(1)  # another tool: only the first commit stays
    state = a.producer_state(name, "loader")
    print(f"pypaimon rolled {name} back to snapshot 1; the running server's producer_state: {state} "
          f"(seqs {state + 1}-9 went with the rollback: a resend writes them again)")
    a.close()


def demo_jdbc_catalog(warehouse: str) -> None:
    """Two servers over one JDBC catalog (SQLite here; PostgreSQL and MySQL the same way): the table
    one creates and writes, the other lists and reads."""
    import json

    import pyarrow as pa
    import pyarrow.flight as flight

    section("a JDBC catalog: two servers over one SQLite catalog, a table created and written through one, read through the other")
    root = os.path.join(warehouse, f"jdbc_{int(time.time())}")
    os.makedirs(root)
    options = ["--warehouse-option", "metastore=jdbc", "--warehouse-option",
               f"uri=jdbc:sqlite:{os.path.join(root, 'catalog.db')}"]
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    with ServerProcess(os.path.join(root, "warehouse"), *options, stderr=subprocess.DEVNULL) as one, \
            ServerProcess(os.path.join(root, "warehouse"), *options, stderr=subprocess.DEVNULL) as other:
        a, b = Client(one.uri), Client(other.uri)
        a.create_table("db.customers", schema)
        with a.paimon_sink("db.customers", producer="crm") as sink:
            sink.write(pa.record_batch([pa.array(range(3)), pa.array(["ada", "bob", "cy"])], schema=schema))
        listed = run(sys.executable, "-m", "flight_cli", "list", "--uri", other.uri).strip()
        info = b.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"table": "db.customers"})))
        read = pa.Table.from_batches([x for e in info.endpoints for x in b.read_endpoint(e)], schema=info.schema)
        rows = read.sort_by("id").column("name").to_pylist()
        print(f"server B lists {listed.splitlines()[-1].split(chr(9))[0]} and reads {rows} (written through server A); "
              f"producer_state through B: {b.producer_state('db.customers', 'crm')}")
        a.close()
        b.close()


def demo_many_tables(warehouse: str) -> None:
    """Tables cost what is active: 60 tables written once through a server whose writes and commits
    run in a worker process (`--commit-processes 1`), with at most 16 tables' committers open
    (`--max-open-tables 16`): its threads stay those of its pools, whatever the tables."""
    import pyarrow as pa

    from producers import Client

    section("many tables: 60 written once, the writes and commits in a worker process, at most 16 open")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    prefix = f"demo.tenant_{int(time.time())}"

    def threads(pid: int) -> int:
        return int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith("Threads:")))

    with ServerProcess(warehouse, "--commit-processes", "1", "--max-open-tables", "16",
                       stderr=subprocess.DEVNULL) as server:
        client = Client(server.uri)
        before = threads(server.proc.pid)
        for t in range(60):
            client.create_table(f"{prefix}_{t:02d}", schema)
            with client.paimon_sink(f"{prefix}_{t:02d}", producer="tenant") as sink:
                sink.write(pa.record_batch([pa.array([t]), pa.array([f"tenant {t}"])], schema=schema))
        workers = {c for task in Path(f"/proc/{server.proc.pid}/task").iterdir()
                   for c in (task / "children").read_text().split()}  # each thread's children
        held = sum(client.producer_state(f"{prefix}_{t:02d}", "tenant") == 0 for t in range(60))
        print(f"{held} of 60 tables hold their batch; server threads {before} before the writes, "
              f"{threads(server.proc.pid)} after; its child processes (the commit worker among them): {len(workers)}")
        client.close()


def demo_ingest_throughput(uri: str) -> None:
    """Durable ingest at the writer's speed: one producer of small (1,000-row) batches with
    PaimonSink's defaults; the server coalesces them and encodes on its writer threads."""
    import pyarrow as pa

    section("durable ingest throughput: one producer, 1,000-row batches, PaimonSink's defaults")
    client = Client(uri)
    name = f"demo.clicks_{int(time.time())}"
    schema = pa.schema([("id", pa.int64()), ("user", pa.string()), ("amount", pa.float64())])
    client.create_table(name, schema)
    batches = [pa.record_batch([pa.array(range(k * 1000, (k + 1) * 1000)),
                                pa.array([f"user-{(k * 7919 + i) % 50_000:05d}" for i in range(1000)]),
                                pa.array([((k + i) % 997) / 100 for i in range(1000)])], schema=schema)
               for k in range(16)]
    total = 6000
    start = time.perf_counter()
    with client.paimon_sink(name, producer="clicks") as sink:
        for i in range(total):
            sink.write(batches[i % len(batches)])
    elapsed = time.perf_counter() - start
    nbytes = total * batches[0].nbytes
    writes = client.stats(name).paimon_writes[name]
    print(f"{total} batches ({nbytes / 1e6:,.0f} MB) acked in {elapsed:.1f} s: {nbytes / 1e6 / elapsed:,.0f} MB/s "
          f"into {writes.commits} snapshots; {writes.writers} writer threads, CPU s each "
          f"{writes.write_cpu_s}, commit thread {writes.commit_cpu_s} s")


def _latest_demo_table(warehouse: str) -> str | None:
    tables = sorted(Path(warehouse, "demo.db").glob("orders_*"))
    return f"demo.{tables[-1].name}" if tables else None


def start_spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(ROOT)
    from pyspark.sql import SparkSession

    from spark_reader import register

    spark = (SparkSession.builder.master("local[2]").appName("flight-paimon-demo")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             # a Python worker may take longer than the 15 s default to connect back on a busy machine
             .config("spark.python.authenticate.socketTimeout", "300s").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def demo_spark(spark, uri: str, warehouse: str, paimon_table: str | None) -> None:
    from producers.examples.counter import SCHEMA

    section("Spark: batch reads of a Paimon table and a push table (bounded, or to the producers' end), "
            "a streaming query over a push table")
    if paimon_table:
        df = spark.read.format("flight-paimon").option("uri", uri).option("table", paimon_table).load()
        print(f"spark.read {paimon_table}: {df.rdd.getNumPartitions()} partitions, "
              f"{df.count()} rows, sum(amount) = {df.agg({'amount': 'sum'}).first()[0]}")
        before, filtered = df.count(), df.filter("id >= 10").count()
        from pypaimon import CatalogFactory

        table = CatalogFactory.create({"warehouse": warehouse}).get_table(paimon_table)
        write_snapshot(table, 1_000_000, 5)
        print(f"the same DataFrame reused: count {before}, filtered count {filtered}, then after a commit of 5 rows "
              f"count {df.count()} (each action reads the table as it is then)")

    client = Client(uri)
    client.register("demo_spark_batch", SCHEMA, capacity=16, partitions=2)
    producers = [subprocess.Popen([sys.executable, "-m", "producers.examples.counter", "demo_spark_batch",
                                   "--uri", uri, "--partition", str(p), "--batches", "20", "--rows", "500"],
                                  stdout=subprocess.DEVNULL, env=ENV, cwd=ROOT) for p in range(2)]
    deadline = time.monotonic() + 60
    while sum(o.next_seq for o in client.offsets("demo_spark_batch").values()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # the producers have started
    reader = spark.read.format("flight-paimon").option("uri", uri).option("push", "demo_spark_batch")
    started = time.monotonic()
    held = reader.load().count()
    print(f"spark.read push demo_spark_batch while 2 producers push (endingOffsets latest, as Kafka's batch "
          f"source): {held} rows, what the partitions held, in {time.monotonic() - started:.1f} s without waiting "
          "for the producers")
    df = reader.option("endingOffsets", "eof").load()
    print(f"the same with endingOffsets eof (reads until every producer ends): {df.count()} rows (expected 20000)")
    for p in producers:
        p.wait(60)

    client.register("demo_spark_stream", SCHEMA, capacity=16)
    producer = subprocess.Popen([sys.executable, "-m", "producers.examples.counter", "demo_spark_stream",
                                 "--uri", uri, "--batches", "40", "--rows", "100", "--rate", "10"],
                                stdout=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    seen = []
    stream = (spark.readStream.format("flight-paimon").option("uri", uri).option("push", "demo_spark_stream").load()
              .writeStream.foreachBatch(lambda df, epoch: seen.append((epoch, df.count())))
              .trigger(processingTime="500 milliseconds").start())
    producer.wait(60)
    deadline = time.monotonic() + 30
    while sum(n for _, n in seen) < 4000 and time.monotonic() < deadline:
        time.sleep(0.2)
    stream.stop()
    print(f"readStream push demo_spark_stream: {sum(n for _, n in seen)} rows (expected 4000) "
          f"in {len(seen)} micro-batches")
    if paimon_table:
        demo_spark_connect_and_write_stream(spark, uri, paimon_table)


def demo_spark_connect_and_write_stream(spark, uri: str, table: str) -> None:
    import tempfile

    import pyarrow as pa
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from scripts.local_connect import connect_server
    from spark_reader import FlightPaimonDataSource

    section("Spark Connect (scripts/connect-server, as users start it), and a writeStream into a push table "
            "that a replayed micro-batch cannot duplicate")
    with connect_server() as url:
        connect = ConnectSession.builder.remote(url).create()
        connect.dataSource.register(FlightPaimonDataSource)
        via_connect = connect.read.format("flight-paimon").option("uri", uri).option("table", table).load().count()
        classic = spark.read.format("flight-paimon").option("uri", uri).option("table", table).load().count()
        print(f"through Spark Connect ({url}): {via_connect} rows; classic Spark: {classic} rows")
        connect.stop()
    client = Client(uri)
    client.register("demo_enriched", pa.schema([("id", pa.int64()), ("amount", pa.float64())]), capacity=64)
    with tempfile.TemporaryDirectory(prefix="demo-ckpt-") as ckpt:
        def run_once() -> None:
            query = (spark.readStream.format("flight-paimon").option("uri", uri).option("table", table).load()
                     .selectExpr("id", "amount * 2 AS amount").writeStream.format("flight-paimon")
                     .option("uri", uri).option("push", "demo_enriched").option("checkpointLocation", ckpt)
                     .trigger(availableNow=True).start())
            query.awaitTermination(120)
        run_once()
        commits = Path(ckpt) / "commits"
        for entry in commits.iterdir():  # as if the driver died before logging its last micro-batch
            entry.unlink()
        run_once()  # Spark runs that micro-batch again
    held = client.stats("demo_enriched").push["demo_enriched"].partitions
    rows = sum(p.rows_in for p in held.values())
    print(f"writeStream {table} -> push demo_enriched, run, then its last micro-batch replayed: "
          f"{rows} rows in the push table (expected {classic}: the replay added none)")
    client.drop("demo_enriched")
    client.close()


def _commit_each(client, name: str, batches, report_every: int, what: str) -> None:
    """Write `batches` into a Paimon table, each its own commit, printing what maintenance keeps."""
    with client.paimon_sink(name, producer="demo", max_unacked=1) as sink:
        for n, b in enumerate(batches, 1):
            sink.write(b)
            if n % report_every == 0:
                deadline = time.monotonic() + 60
                while sink.acked < n and time.monotonic() < deadline:
                    time.sleep(0.01)
                state = client.stats(name).maintenance.get(name)
                if state is None:  # before its first round
                    print(f"{n} {what}, {n * b.num_rows} rows written: no maintenance round yet", flush=True)
                    continue
                print(f"{n} {what}, {n * b.num_rows} rows written: {state.snapshots} snapshots kept, "
                      f"{state.data_files} data files, {state.compactions} compactions so far "
                      f"(rewrote {state.compacted_bytes / 2**20:.2f} MiB of the "
                      f"{state.ingested_bytes / 2**20:.2f} MiB committed: write amplification "
                      f"{state.write_amplification}, size tiers)", flush=True)


def demo_maintenance(uri: str) -> None:
    import json
    import uuid

    import pyarrow as pa
    import pyarrow.flight as flight

    from producers.examples.events import SCHEMA, batch

    section("table maintenance: a table taking a commit per small batch keeps a flat file count")
    name = f"db.kept_{uuid.uuid4().hex[:6]}"
    client = Client(uri, timeout=60)
    client.create_table(name, SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    _commit_each(client, name, (batch("demo", seq, 100) for seq in range(600)), 150, "commits")
    print(run(sys.executable, "-m", "flight_cli", "compact", name, "--uri", uri).strip())
    print(run(sys.executable, "-m", "flight_cli", "expire-snapshots", name, "--uri", uri,
              "--retain-max", "10").strip())

    # A primary-key table taking upserts: its merge tree's sorted runs stay few, and a read sees each key once.
    keyed = pa.schema([pa.field("id", pa.int64(), nullable=False), ("seq", pa.int64()), ("producer", pa.string())])
    name = f"db.upserts_{uuid.uuid4().hex[:6]}"
    client.create_table(name, keyed, primary_keys=["id"], options={"bucket": "2"})
    upserts = (pa.record_batch([pa.array(range(seq % 10 * 100, seq % 10 * 100 + 100), pa.int64()),  # 1,000 keys
                                pa.array([seq] * 100, pa.int64()), pa.array(["demo"] * 100)], schema=keyed)
               for seq in range(300))
    _commit_each(client, name, upserts, 100, "upsert commits")
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"table": name})))
    keys = sum(client.flight.do_get(e.ticket).read_all().num_rows for e in info.endpoints)
    print(f"a full read of {name}: {keys} rows, one per key (1000 keys)")
    client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    # Absolute: the servers run in the checkout (cwd ROOT), and pypaimon-rust cannot read a relative one.
    p.add_argument("--warehouse", default=str(ROOT / "warehouse"), type=os.path.abspath)
    p.add_argument("--batches", type=int, default=100, help="64k-row batches in the push throughput step")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark section")
    args = p.parse_args()
    os.makedirs(args.warehouse, exist_ok=True)
    server, uri, metrics_url = start_server(args.warehouse)
    spark = None
    try:
        demo_push(uri, args.batches)
        demo_paimon(uri, args.warehouse)
        if not args.no_spark:
            spark = start_spark()
            demo_spark(spark, uri, args.warehouse, _latest_demo_table(args.warehouse))
            demo_scale_out(spark, args.warehouse, _latest_demo_table(args.warehouse))
        demo_ingest(uri, args.warehouse, spark)
        demo_shared_table(uri, args.warehouse)
        demo_jdbc_catalog(args.warehouse)
        demo_many_tables(args.warehouse)
        demo_ingest_throughput(uri)
        demo_maintenance(uri)
        demo_security(args.warehouse, _latest_demo_table(args.warehouse))
        demo_operations(uri, metrics_url)
    finally:
        if spark is not None:
            spark.stop()
        server.terminate()
        server.wait(15)
    print("\ndemo finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
