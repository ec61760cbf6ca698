"""Abuse: structured fuzzing of every JSON body, command, path and ticket field (hypothesis), with
and without auth; and resource exhaustion against the limits (tables, partitions, huge batches,
huge schemas, thousands of idle streams). The server answers with typed, clean errors, stays
within its limits and keeps serving."""

from __future__ import annotations

import base64
import json
import secrets
import threading

import pyarrow as pa
import pyarrow.flight as flight
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.harness import Context, Run, hang, scenario, wrong_error
from chaos.strategies import LEAKS, OBJECTS, PAIMON_COMMANDS, encode
from flight_server.auth import token_sha256
from flight_server.wire import names
from flight_server.wire.schemas import encode_schema
from producers import Client
from producers.examples.counter import SCHEMA, make_batch

# What a bad request may be answered with; never INTERNAL, UNAVAILABLE or a timeout.
TYPED = (pa.ArrowInvalid, KeyError, flight.FlightServerError, flight.FlightCancelledError,
         flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError)
REQUESTS = st.one_of(
    st.tuples(st.just("action"), st.sampled_from(list(names.ACTIONS) + ["", "nope"]), OBJECTS),
    st.tuples(st.just("command"), st.one_of(PAIMON_COMMANDS, OBJECTS, OBJECTS.map(lambda o: {names.PUSH: "orders", **o}))),
    st.tuples(st.just("path"), st.lists(st.one_of(st.sampled_from(["push", "paimon", "orders", "db.orders", "0", "9"]),
                                                  st.text(max_size=8)), max_size=4)),
    st.tuples(st.just("ticket"), st.one_of(st.binary(max_size=64), OBJECTS.map(lambda o: base64.urlsafe_b64encode(
        encode(o))).map(lambda b: b"fp1." + b + b".AAAA"))),
)


def send(client: Client, request, options) -> None:
    kind = request[0]
    if kind == "action":
        action, body = request[1], request[2]
        if action in (names.DROP, names.FAIL) and body.get("name") == "orders":
            body["name"] = "other"  # a well-formed drop or fail of the live table is not a bad request
        if action == names.REGISTER and isinstance(body.get("name"), str):
            body["schema"] = encode_schema(SCHEMA)
        list(client.flight.do_action(flight.Action(action, encode(body)), options=options))
    elif kind == "command":
        client.flight.get_flight_info(flight.FlightDescriptor.for_command(encode(request[1])), options=options)
    elif kind == "path":
        client.flight.get_flight_info(flight.FlightDescriptor.for_path(*request[1]), options=options)
    else:
        client.flight.do_get(flight.Ticket(request[1]), options=options).read_all()


def _fuzz(ctx: Context, auth: bool, requests: int) -> Run:
    tokens = {"admin": secrets.token_urlsafe(24), "reader": secrets.token_urlsafe(24)}
    extra = []
    if auth:
        path = ctx.dir / "auth.json"
        path.write_text(json.dumps({"principals": [
            {"name": "admin", "token_sha256": token_sha256(tokens["admin"]),
             "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
            {"name": "reader", "token_sha256": token_sha256(tokens["reader"]), "grants": [{"tables": "db.*", "allow": ["read"]}]},
        ]}))
        extra = ["--auth", str(path)]
    (ctx.dir / "warehouse").mkdir()
    server = ctx.own_server(*extra, warehouse=str(ctx.dir / "warehouse"))  # db.orders is created afresh
    admin = Client(server.uri, timeout=10, token=tokens["admin"] if auth else None)
    admin.create_table("db.orders", SCHEMA)
    admin.register("orders", SCHEMA, capacity=4, partitions=2)
    callers = [admin]
    if auth:
        callers += [Client(server.uri, timeout=10, token=t) for t in (tokens["reader"], "wrong-" + tokens["reader"])]
        callers.append(Client(server.uri, timeout=10))
    bad: list[str] = []
    counts = {"accepted": 0, "refused": 0}

    @settings(max_examples=requests, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(REQUESTS, st.integers(0, len(callers) - 1))
    def fuzz(request, who):
        client = callers[who]
        try:
            send(client, request, client.options(10))
            counts["accepted"] += 1
        except TYPED as e:
            counts["refused"] += 1
            text = str(e)
            leaked = [t for t in tokens.values() if t in text]
            if isinstance(e, flight.FlightInternalError) or LEAKS.search(text) or leaked:
                bad.append(f"{type(e).__name__}: {text[:200]}")
        except flight.FlightTimedOutError as e:
            raise hang(f"a request took over 10 s: {request!r:.200}") from e
        except flight.FlightError as e:  # INTERNAL, UNAVAILABLE: what must never happen
            bad.append(f"{type(e).__name__}: {str(e)[:200]} for {request!r:.200}")

    fuzz()
    # Whatever the fuzz sent, the server still serves.
    admin.register("after", SCHEMA)
    with admin.sink("after", 0) as sink:
        sink.write(make_batch(0, 3))
    if admin.flight.do_get(admin.info("after").endpoints[0].ticket, options=admin.options(10)).read_all().num_rows != 3:
        raise wrong_error("the server did not serve a push table after the fuzz")
    for c in callers:
        c.close()
    if bad:
        raise wrong_error(f"{len(bad)} of {requests} requests got an untyped or unclean error: {bad[:3]}")
    return Run(detail=f"{requests} requests: {counts['refused']} refused (typed, clean), {counts['accepted']} accepted")


for _auth in (False, True):
    scenario("abuse", f"fuzz: every body, command, path and ticket field {'with auth' if _auth else 'without auth'} "
             "(hypothesis, 2,500 requests a run)", "every refusal typed and clean (no INTERNAL, no traceback, "
             "no path, no token), no hang, the server keeps serving", short=1, full=4)(
        lambda ctx, a=_auth: _fuzz(ctx, a, 300 if ctx.short else 2500))


def _limit_error(e: BaseException, flag: str) -> bool:
    return "resource_exhausted" in str(getattr(e, "extra_info", b"")) or flag in str(e)


@scenario("abuse", "exhaustion: 3x --max-tables registers, 3x --max-partitions partitions",
          "past a limit every call is refused naming the flag; the server keeps serving and frees on drop",
          short=1, full=3)
def _tables(ctx: Context) -> Run:
    server = ctx.own_server("--max-tables", "200", "--max-partitions", "1000")
    client = Client(server.uri, timeout=10)
    refused, taken = 0, []
    for i in range(600):
        try:
            client.register(f"t{i}", SCHEMA)
            taken.append(f"t{i}")
        except flight.FlightError as e:
            if not _limit_error(e, "--max-tables"):
                raise wrong_error(f"register {i}: {e}") from None
            refused += 1
    if len(taken) != 200 or refused != 400:
        raise wrong_error(f"{len(taken)} registers taken, {refused} refused under --max-tables 200")
    for name in taken:
        client.drop(name)
    parts = 0
    for i in range(60):
        try:
            client.register(f"p{i}", SCHEMA, partitions=50)
            parts += 50
        except flight.FlightError as e:
            if not _limit_error(e, "--max-partitions"):
                raise wrong_error(f"register with partitions: {e}") from None
    if parts != 1000:
        raise wrong_error(f"{parts} partitions taken under --max-partitions 1000")
    return Run(detail="200 tables, 1000 partitions, the rest refused naming the flag")


@scenario("abuse", "exhaustion: huge batches (64 MiB into capacity_bytes 8 MiB) and a 20,000-column schema",
          "the batch is refused whole and the reader gets the cause; the wide schema is served or refused "
          "clearly; memory stays bounded", short=1, full=3)
def _huge(ctx: Context) -> Run:
    server = ctx.own_server("--max-memory", "256MiB")
    client = Client(server.uri, timeout=30)
    client.register("small", SCHEMA, capacity_bytes=8 << 20)
    big = pa.record_batch([pa.array(range(1_000_000), pa.int64()), pa.array(["x" * 50] * 1_000_000),
                           pa.array([0] * 1_000_000, pa.timestamp("us"))], schema=SCHEMA)
    try:
        with client.sink("small", 0) as sink:
            sink.write(big)
        raise wrong_error("a 64 MiB batch was taken by a partition of capacity_bytes 8 MiB")
    except Exception as e:  # noqa: BLE001 - the sink's error is what is checked
        if "capacity" not in str(e):
            raise wrong_error(f"the producer's error does not name the capacity: {str(e)[:300]}") from None
    try:
        client.flight.do_get(client.info("small").endpoints[0].ticket, options=client.options(10)).read_all()
        raise wrong_error("the reader of the failed partition got a clean end")
    except flight.FlightError as e:
        if "capacity" not in str(e):
            raise wrong_error(f"the reader's error does not name the capacity: {str(e)[:300]}") from None
    wide = pa.schema([(f"c{i}", pa.int32()) for i in range(20_000)])
    try:
        client.register("wide", wide)
        batch = pa.record_batch([pa.array([i], pa.int32()) for i in range(20_000)], schema=wide)
        drain_rows = []
        reader = threading.Thread(target=lambda: drain_rows.append(client.flight.do_get(
            client.info("wide").endpoints[0].ticket, options=client.options(30)).read_all().num_rows))
        reader.start()
        with client.sink("wide", 0) as sink:
            sink.write(batch)
        reader.join(30)
        if drain_rows != [1]:
            raise wrong_error(f"the wide table's reader got {drain_rows}")
        outcome = "served"
    except TYPED as e:
        if LEAKS.search(str(e)):
            raise wrong_error(f"the wide schema's refusal leaks: {str(e)[:300]}") from None
        outcome = f"refused: {str(e).splitlines()[0][:120]}"
    rss_mib = int(open(f"/proc/{server.proc.pid}/status").read().split("VmRSS:")[1].split()[0]) / 1024
    client.close()
    return Run(detail=f"64 MiB batch refused; 20,000 columns {outcome}; server RSS {rss_mib:.0f} MiB")


@scenario("abuse", "exhaustion: 2,000 idle streams against --max-streams 1024", "1024 open, the rest refused "
          "naming the flag; unary calls still served; after cancel, threads back to where they were",
          short=1, full=3)
def _idle_streams(ctx: Context) -> Run:
    server = ctx.own_server()
    pid = server.proc.pid
    clients = [Client(server.uri, timeout=10) for _ in range(10)]
    admin = clients[0]
    admin.register("idle", SCHEMA)
    threads_before = _threads(pid)
    view = admin.view_info("idle", "latest").endpoints[0].ticket
    readers, refused = [], 0
    for i in range(2000):
        c = clients[i % len(clients)]
        try:
            reader = c.flight.do_get(view, options=c.options(None))
            readers.append(reader)
        except flight.FlightError as e:
            if not _limit_error(e, "--max-streams"):
                raise wrong_error(f"stream {i}: {str(e)[:200]}") from None
            refused += 1
    opened = len(readers)
    if admin.action(names.HEALTH, {}).get("status") != "serving":
        raise wrong_error("the server did not answer health with 2,000 idle streams")
    for r in readers:
        r.cancel()
    ctx.wait_for(lambda: _threads(pid) <= threads_before + 8, "the server's threads to come back", timeout=30)
    for c in clients:
        c.close()
    return Run(detail=f"{opened} streams opened, {refused} refused; threads {threads_before} -> {_threads(pid)}")


def _threads(pid: int) -> int:
    return int(open(f"/proc/{pid}/status").read().split("Threads:")[1].split()[0])
