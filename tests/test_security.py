"""TLS, mTLS, bearer tokens and per-table grants, on real server processes with real certificates.

The certificates are made in the test with trustme; the servers are `flight_cli serve` processes
with --tls-cert/--tls-key (and --tls-client-ca for mTLS) and an --auth file of three principals.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
from types import SimpleNamespace

import grpc
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.auth import token_sha256
from flight_server.wire.errors import PermissionDenied, Unauthenticated, from_flight
from producers import Client
from scripts.throwaway_ca import write_certs
from tests import zygote
from tests.conftest import ROOT, child_env
from tests.paimon_tables import Warehouse, rows, sort_rows
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(180)

PUSH_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
TOKENS = {name: secrets.token_urlsafe(24) for name in ("admin", "etl", "reader")}
WRONG = secrets.token_urlsafe(24)


def push_batch(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(start, start + n), pa.int64()), [f"r{i}" for i in range(start, start + n)]],
                           schema=PUSH_SCHEMA)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the server's certificate for 127.0.0.1, a client certificate, and the --auth file."""
    d = tmp_path_factory.mktemp("pki")
    certs = write_certs(d, client="etl.clients.example")
    auth = {"principals": [
        {"name": "admin", "token": TOKENS["admin"], "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
        {"name": "etl", "token_sha256": token_sha256(TOKENS["etl"]),
         "grants": [{"tables": "orders*", "allow": ["read", "write"]}, {"tables": "db.orders", "allow": ["read", "write"]}]},
        {"name": "reader", "token_sha256": token_sha256(TOKENS["reader"]),
         "grants": [{"tables": "db.orders*", "allow": ["read"]}]},
    ]}
    (d / "auth.json").write_text(json.dumps(auth))
    return SimpleNamespace(dir=d, auth=str(d / "auth.json"), **vars(certs))


@pytest.fixture(scope="module")
def warehouse_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("secure-warehouse"))
    wh = Warehouse(path)
    wh.commit(wh.create("orders", buckets=2), rows(0, 50))
    wh.commit(wh.create("secret", buckets=1), rows(0, 5, tag="s"))
    return path


def _serve(pki, warehouse: str, log_path, *extra: str) -> ServerProcess:
    log = open(log_path, "w")
    proc = ServerProcess(warehouse, "--tls-cert", pki.cert, "--tls-key", pki.key, "--auth", pki.auth, *extra,
                         stderr=log)
    proc.log_path = log_path
    return proc


@pytest.fixture(scope="module")
def tls_server(pki, warehouse_dir):
    proc = _serve(pki, warehouse_dir, pki.dir / "tls-server.log")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def mtls_server(pki, warehouse_dir):
    proc = _serve(pki, warehouse_dir, pki.dir / "mtls-server.log", "--tls-client-ca", pki.ca)
    yield proc
    proc.stop()


def client_for(server, pki, who: str | None, mtls: bool = False) -> Client:
    certs = {"cert_chain": pki.client_cert, "private_key": pki.client_key} if mtls else {}
    token = TOKENS[who] if who in TOKENS else who
    return Client(server.uri, timeout=15, token=token, tls_root_certs=pki.ca, **certs)


def put_one(c: Client, name: str) -> None:
    """One batch into partition 0 of push table `name` by a plain do_put: the refusal comes at close."""
    writer, _ = c.flight.do_put(flight.FlightDescriptor.for_path("push", name, "0"), PUSH_SCHEMA, options=c.options())
    try:
        writer.write_batch(push_batch(0, 1))
        writer.done_writing()
    finally:
        writer.close()


def refused(fn) -> Exception:
    """The protocol error a call ended with (the test fails if it succeeded)."""
    with pytest.raises(flight.FlightError) as e:
        fn()
    return from_flight(e.value)


# -- authentication ------------------------------------------------------------------------

RPCS = {  # gRPC method -> its shape; raw bytes in and out, so each is called exactly as on the wire
    "Handshake": "stream_stream", "ListFlights": "unary_stream", "GetFlightInfo": "unary_unary",
    "GetSchema": "unary_unary", "DoGet": "unary_stream", "DoPut": "stream_stream",
    "DoAction": "unary_stream", "ListActions": "unary_stream", "DoExchange": "stream_stream",
}


def _raw_call(ch: grpc.Channel, method: str, metadata) -> None:
    shape = RPCS[method]
    fn = getattr(ch, shape)(f"/arrow.flight.protocol.FlightService/{method}")
    # A descriptor where the RPC takes one: pyarrow answers an empty one INVALID_ARGUMENT before the
    # handler runs (where a refused get_flight_info ends, so that its log line can name the peer).
    descriptor = flight.FlightDescriptor.for_path("orders").serialize()
    request = iter([b""]) if shape.startswith("stream") else descriptor if method == "GetFlightInfo" else b""
    result = fn(request, metadata=metadata, timeout=10)
    if shape.endswith("stream"):
        list(result)


def test_all_nine_rpcs_without_a_token_or_with_a_wrong_one_are_unauthenticated(tls_server, pki):
    with open(pki.ca, "rb") as f:
        ch = grpc.secure_channel(tls_server.uri.removeprefix("grpc+tls://"), grpc.ssl_channel_credentials(f.read()))
    cases = {"no token": [], "a wrong token": [("authorization", f"Bearer {WRONG}")],
             "another scheme": [("authorization", f"Basic {WRONG}")]}
    with ch:
        for what, metadata in cases.items():
            for method in RPCS:
                with pytest.raises(grpc.RpcError) as e:
                    _raw_call(ch, method, metadata)
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, (method, what, e.value.code())
                assert "token" in e.value.details() and WRONG not in e.value.details(), (method, e.value.details())
        # The same channel with a known token gets through: the refusals above were the token's doing.
        _raw_call(ch, "ListActions", [("authorization", f"Bearer {TOKENS['reader']}")])


def test_the_python_client_says_what_is_missing(tls_server, pki):
    got = refused(lambda: client_for(tls_server, pki, None).stats())
    assert isinstance(got, Unauthenticated) and "requires a bearer token" in got.message
    got = refused(lambda: client_for(tls_server, pki, WRONG).stats())
    assert isinstance(got, Unauthenticated) and "not known to this server" in got.message


# -- grants ----------------------------------------------------------------------------------

def test_inside_its_grants_a_principal_works_outside_it_is_denied_naming_table_and_grant(tls_server, pki, warehouse_dir):
    admin, etl, reader = (client_for(tls_server, pki, who) for who in ("admin", "etl", "reader"))
    admin.register("orders_live", PUSH_SCHEMA, capacity=8)
    admin.register("audit", PUSH_SCHEMA)
    # etl writes and reads its push table
    with etl.sink("orders_live") as sink:
        sink.write(push_batch(0, 10))
        sink.write(push_batch(10, 5))
    got = pa.Table.from_batches([b for e in etl.info("orders_live").endpoints for b in etl.read_endpoint(e, 30)])
    assert got.column("id").to_pylist() == list(range(15))

    denied = {
        "reader reads push table orders_live": (lambda: reader.info("orders_live"), "read", "orders_live"),
        "reader writes push table orders_live": (lambda: put_one(reader, "orders_live"), "write", "orders_live"),
        "etl reads push table audit": (lambda: etl.info("audit"), "read", "audit"),
        "etl drops push table orders_live": (lambda: etl.drop("orders_live"), "admin", "orders_live"),
        "etl registers a push table": (lambda: etl.register("orders_new", PUSH_SCHEMA), "admin", "orders_new"),
        "etl fails push table orders_live": (lambda: etl.fail("orders_live", "x"), "admin", "orders_live"),
        "etl creates a Paimon table": (lambda: etl.create_table("db.orders2", PUSH_SCHEMA), "admin", "db.orders2"),
        "etl reads Paimon table db.secret": (lambda: etl.flight.get_flight_info(
            flight.FlightDescriptor.for_path("paimon", "db.secret"), options=etl.options()), "read", "db.secret"),
        "reader commits a consumer": (lambda: reader.action("consumer_commit", {
            "table": "db.orders", "consumer_id": "c1", "next_snapshot": 1}), "write", "db.orders"),
        "reader writes durably into db.orders": (lambda: reader.paimon_sink("db.orders", producer="r1"), "write",
                                                 "db.orders"),
    }
    for what, (fn, grant, table) in denied.items():
        got = refused(fn)
        assert isinstance(got, PermissionDenied), (what, got)
        assert f"no {grant!r} grant" in got.message and repr(table) in got.message, (what, got.message)

    # reader reads Paimon tables it is granted: every row, as pypaimon reads them
    info = reader.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.orders"), options=reader.options())
    table = pa.Table.from_batches([b for e in info.endpoints for b in reader.read_endpoint(e, 30)])
    assert sort_rows(table) == sort_rows(Warehouse(warehouse_dir).read("db.orders"))
    # etl writes durably into db.orders as a named producer, and records consumer progress
    with etl.paimon_sink("db.orders", producer="etl-1") as sink:
        sink.write(rows(1000, 7).to_batches()[0])
    assert etl.producer_state("db.orders", "etl-1") == 0
    etl.action("consumer_commit", {"table": "db.orders", "consumer_id": "etl-c", "next_snapshot": 2})
    assert reader.action("consumer_progress", {"table": "db.orders", "consumer_id": "etl-c"}) == {"next_snapshot": 2}

    # list_flights and stats show only what the principal may read
    def listed(c):
        return {"/".join(p.decode() for p in i.descriptor.path) for i in c.flight.list_flights(options=c.options())}
    assert listed(reader) == {"paimon/db.orders"}
    assert listed(etl) == {"push/orders_live", "paimon/db.orders"}
    assert {"push/orders_live", "push/audit", "paimon/db.orders", "paimon/db.secret"} <= listed(admin)
    assert set(reader.stats().push) == set() and set(etl.stats().push) == {"orders_live"}
    assert {"orders_live", "audit"} <= set(admin.stats().push)
    admin.drop("orders_live")
    admin.drop("audit")


def test_dropping_a_paimon_table_needs_the_admin_grant_on_it(tls_server, pki):
    admin, etl = client_for(tls_server, pki, "admin"), client_for(tls_server, pki, "etl")
    admin.create_table("db.orders_scratch", PUSH_SCHEMA)  # etl holds read and write grants, no admin
    e = refused(lambda: etl.action("drop", {"table": "db.orders_scratch"}))
    assert isinstance(e, PermissionDenied) and "may not admin" in str(e) and "'db.orders_scratch'" in str(e), e
    assert admin.action("drop", {"table": "db.orders_scratch"}) == {}
    with pytest.raises(KeyError, match="'db.orders_scratch' does not exist"):
        admin.action("drop", {"table": "db.orders_scratch"})


def test_a_ticket_planned_for_one_principal_is_refused_for_another(tls_server, pki):
    etl, admin = client_for(tls_server, pki, "etl"), client_for(tls_server, pki, "admin")
    info = etl.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.orders"), options=etl.options())
    ticket = info.endpoints[0].ticket
    got = refused(lambda: admin.flight.do_get(ticket, options=admin.options()).read_all())
    assert isinstance(got, PermissionDenied) and "planned for another principal" in got.message
    assert etl.flight.do_get(ticket, options=etl.options()).read_all().num_rows > 0


def test_no_token_appears_in_a_log_line_an_error_or_a_ticket(tls_server, pki):
    messages = []
    for token in (WRONG, TOKENS["etl"]):
        c = Client(tls_server.uri, timeout=15, token=token, tls_root_certs=pki.ca)
        for fn in (lambda: c.info("audit_x"), lambda: c.register("x", PUSH_SCHEMA), lambda: c.drop("nope"),
                   lambda: c.flight.do_get(flight.Ticket(b"fp1.garbage"), options=c.options()).read_all()):
            with pytest.raises((flight.FlightError, pa.ArrowInvalid)) as e:
                fn()
            messages.append(str(e.value))
    etl = client_for(tls_server, pki, "etl")
    info = etl.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", "db.orders"), options=etl.options())
    tickets = [e.ticket.ticket for e in info.endpoints]
    decoded = [base64.urlsafe_b64decode(t[4:].rpartition(b".")[0]) for t in tickets]
    assert len(decoded) == 2  # one ticket per bucket of db.orders
    assert all(json.loads(d)["principal"] == "etl" for d in decoded)  # bound to a name, not to a token
    log = tls_server.log_path.read_text()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert any(line.get("principal") == "etl" and line["event"] == "rpc_done" for line in lines)
    refused = [line for line in lines if line["event"] == "rpc_unauthenticated"]
    at_once = ("handshake", "do_put", "do_exchange", "get_schema")  # refused where pyarrow tells no peer
    assert refused and all(line["peer"] is None if line["rpc"] in at_once else line["peer"].startswith("ipv4:127.0.0.1:")
                           for line in refused), refused
    for token in (WRONG, *TOKENS.values()):
        for where, texts in (("log", [log]), ("errors", messages), ("tickets", tickets + decoded)):
            assert not any(token in (t.decode("latin-1") if isinstance(t, bytes) else t) for t in texts), where


# -- TLS and mTLS ----------------------------------------------------------------------------

def test_without_the_ca_or_without_a_client_certificate_the_error_says_what_to_pass(tls_server, mtls_server, pki):
    untrusted = Client(tls_server.uri, timeout=10, token=TOKENS["admin"])
    with pytest.raises(flight.FlightUnavailableError) as e:
        untrusted.stats()
    assert "certificate verify failed" in str(e.value)
    # the CLI turns each into one line naming the flag (gRPC's own log line of the handshake is not shown)
    env = {**child_env(), "FLIGHT_PAIMON_TOKEN": TOKENS["admin"]}
    out = _cli(env, "stats", "--uri", tls_server.uri)
    assert out.returncode == 1 and out.stderr.startswith(f"flight_cli stats: cannot connect to {tls_server.uri}: ") \
        and "not trusted" in out.stderr and "--tls-root-certs" in out.stderr, out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    out = _cli(env, "stats", "--uri", mtls_server.uri, "--tls-root-certs", pki.ca)
    assert out.returncode == 1 and "--tls-cert-chain" in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    out = _cli(env, "stats", "--uri", tls_server.uri.replace("grpc+tls", "grpc"))  # plain gRPC to a TLS server
    assert out.returncode == 1 and "needs a grpc+tls:// URI" in out.stderr and len(out.stderr.splitlines()) == 1, \
        out.stderr
    out = _cli(env, "stats", "--uri", mtls_server.uri, "--tls-root-certs", pki.ca,
               "--tls-cert-chain", pki.client_cert, "--tls-private-key", pki.client_key)
    assert out.returncode == 0 and "push" in json.loads(out.stdout), out.stderr
    out = _cli(env, "stats", "--uri", tls_server.uri.replace("grpc+tls", "grpc"), "--tls-root-certs", pki.ca)
    assert out.returncode == 2 and "grpc+tls://" in out.stderr, out.stderr


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return zygote.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=ROOT)


def test_cli_over_mtls_with_token_from_the_environment_or_the_flag(mtls_server, pki):
    certs = ["--uri", mtls_server.uri, "--tls-root-certs", pki.ca, "--tls-cert-chain", pki.client_cert,
             "--tls-private-key", pki.client_key]
    env = {**child_env(), "FLIGHT_PAIMON_TOKEN": TOKENS["admin"]}
    out = _cli(env, "register", "orders_cli", "--schema", "id:int64,name:string", *certs)
    assert out.returncode == 0 and json.loads(out.stdout)["name"] == "orders_cli", out.stderr
    out = _cli(child_env(), "register", "orders_cli2", "--schema", "id:int64", f"--token={TOKENS['etl']}", *certs)
    assert out.returncode == 1 and "may not admin" in out.stderr and TOKENS["etl"] not in out.stderr, out.stderr
    out = _cli(child_env(), "tail", "db.orders", "--from", "latest-full", "--format", "jsonl", "--limit", "50",
               f"--token={TOKENS['reader']}", *certs)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 50, out.stderr
    out = _cli(child_env(), "list", f"--token={TOKENS['reader']}", *certs)
    assert out.returncode == 0 and out.stdout.split("\t")[0] == "paimon:db.orders" and "orders_cli" not in out.stdout
    out = _cli(child_env(), "drop", "orders_cli", f"--token={TOKENS['admin']}", *certs)
    assert out.returncode == 0, out.stderr


def test_serve_refuses_a_public_address_without_auth_and_serves_it_with_insecure(tmp_path):
    out = _cli(child_env(), "serve", "--host", "0.0.0.0", "--port", "0", "--warehouse", str(tmp_path / "w"))
    assert out.returncode == 2 and "without --auth" in out.stderr and "--insecure" in out.stderr, out.stderr
    assert not (tmp_path / "w").exists()
    with ServerProcess(str(tmp_path / "w"), "--host", "0.0.0.0", "--insecure") as proc:
        port = proc.uri.rsplit(":", 1)[1]
        assert Client(f"grpc://127.0.0.1:{port}", timeout=10).action("health")["status"] == "serving"


# -- producers in other languages, and Spark ------------------------------------------------

@pytest.fixture(params=["node", "raw_grpc"])
def producer(request) -> tuple[str, list[str]]:
    from tests.test_any_language_producers import _node_command

    cmd = _node_command() if request.param == "node" else [sys.executable, "-m", "producers.raw_grpc.producer"]
    return request.param, cmd


def test_node_and_raw_grpc_producers_push_over_mtls_with_a_token(producer, mtls_server, pki):
    from producers.raw_grpc import rows as demo_rows

    kind, cmd = producer
    admin = client_for(mtls_server, pki, "admin", mtls=True)
    name = f"orders_{kind}"
    admin.register(name, demo_rows.SCHEMA)
    security = ["--tls-root-certs", pki.ca, "--tls-cert-chain", pki.client_cert, "--tls-private-key", pki.client_key]
    args = [*cmd, "--uri", mtls_server.uri, "--table", name, "--batches", "3", "--rows", "100"]
    run = subprocess.run([*args, f"--token={WRONG}", *security], capture_output=True, text=True, timeout=60,
                         env=child_env(), cwd=ROOT)
    assert run.returncode == 1 and "UNAUTHENTICATED" in run.stderr, run.stderr
    run = subprocess.run([*args, *security], capture_output=True, text=True, timeout=60,
                         env={**child_env(), "FLIGHT_PAIMON_TOKEN": TOKENS["etl"]}, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "done batches=3 acked=3", run.stderr
    got = pa.Table.from_batches([b for e in admin.info(name).endpoints for b in admin.read_endpoint(e, 30)])
    assert got.num_rows == 300
    assert got.to_pylist() == demo_rows.table(3, 100).to_pylist()
    admin.drop(name)


def test_spark_batch_and_stream_over_mtls_with_a_token(spark, mtls_server, pki, warehouse_dir, tmp_path):
    from spark_reader import FlightPaimonDataSource

    spark.dataSource.register(FlightPaimonDataSource)
    secured = {"uri": mtls_server.uri, "token": TOKENS["etl"], "tls.root-certs": pki.ca,
               "tls.cert-chain": pki.client_cert, "tls.private-key": pki.client_key}
    df = spark.read.format("flight-paimon").options(**secured).option("table", "db.orders").load()
    expected = Warehouse(warehouse_dir).read("db.orders").num_rows
    assert df.count() == expected
    plan = df._jdf.queryExecution().toString()
    assert TOKENS["etl"] not in plan

    seen = []
    query = (spark.readStream.format("flight-paimon").options(**secured).option("table", "db.orders").load()
             .writeStream.foreachBatch(lambda batch, _: seen.append(batch.count()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None and sum(seen) == expected

    # df.write: durable writes into a table the principal may write, over the same credentials
    spark.createDataFrame(rows(5000, 40).to_pandas()).repartition(2).write.format("flight-paimon") \
        .options(**secured).option("table", "db.orders").mode("append").save()
    assert spark.read.format("flight-paimon").options(**secured).option("table", "db.orders").load().count() == expected + 40

    with pytest.raises(Exception) as e:
        spark.read.format("flight-paimon").options(**{**secured, "token": WRONG}).option("table", "db.orders").load()
    assert "not known to this server" in str(e.value) and WRONG not in str(e.value)
    with pytest.raises(Exception) as e:
        spark.read.format("flight-paimon").options(**secured).option("table", "db.secret").load()
    assert "no 'read' grant" in str(e.value)
