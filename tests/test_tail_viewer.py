"""`flight_cli tail push:NAME` is a viewer: however it ends, the producer and the real consumer never notice."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import threading
from decimal import Decimal

import pyarrow as pa
import pytest

from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests import zygote
from tests.conftest import ROOT, child_env, wait_for


def tail(uri: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", *args, "--uri", uri],
                            env=child_env(), cwd=ROOT, text=True, **kwargs)


def viewers(client: Client, name: str) -> int:
    return client.stats(name).push[name].partitions["0"].viewers


@pytest.mark.timeout(180)
def test_tails_that_are_interrupted_limited_or_piped_never_harm_the_producer_or_consumer(server_process):
    uri = server_process.uri
    client = Client(uri, timeout=10)
    client.register("t", SCHEMA, capacity=8)
    producer = zygote.popen(
        [sys.executable, "-m", "producers.examples.counter", "t", "--uri", uri, "--batches", "1000", "--rows", "3",
         "--rate", "400"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    consumed: list[int] = []
    consumer = threading.Thread(target=lambda: consumed.extend(
        i for b in client.read_endpoint(client.info("t").endpoints[0], timeout=120) for i in b.column("id").to_pylist()))
    consumer.start()
    errors = []

    # 1. Started, then Ctrl-C (SIGINT) while rows flow.
    first = tail(uri, "push:t", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert first.stdout.readline()  # the header: it is viewing
    for _ in range(5):
        assert first.stdout.readline()
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=30)
    errors.append(("ctrl-c", first.returncode, err))

    # 2. --limit 5, from the batches still held: a table of its own with no consumer, so they stay
    # held (the first table's 1,000 batches may all be consumed by now on a slow machine).
    client.register("t2", SCHEMA, capacity=8)
    holding = zygote.popen(
        [sys.executable, "-m", "producers.examples.counter", "t2", "--uri", uri, "--batches", "1000", "--rows", "3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    try:
        wait_for(lambda: client.stats("t2").push["t2"].partitions["0"].queued_batches >= 2,
                 "two batches held in t2", timeout=120)
        limited = tail(uri, "push:t2", "--from", "earliest", "--limit", "5", "--format", "jsonl",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = limited.communicate(timeout=60)
    finally:
        holding.kill()
        holding.wait(30)
    errors.append(("limit", limited.returncode, err))
    assert [json.loads(line)["id"] for line in out.splitlines()] == [0, 1, 2, 3, 4]

    # 3. Piped into `head -3`, which closes the pipe: a table of its own whose producer and consumer
    # outlast any machine's start-up of the tail (the producer is stopped once the tail is done).
    client.register("t3", SCHEMA, capacity=8)
    endless = zygote.popen(
        [sys.executable, "-m", "producers.examples.counter", "t3", "--uri", uri, "--batches", "1000000", "--rows", "3",
         "--rate", "50"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=ROOT)
    def drain_t3():  # the table's own consumer: rows keep flowing past the tail, which notices head's close
        try:
            for _ in client.read_endpoint(client.info("t3").endpoints[0], timeout=300):
                pass
        except Exception:  # noqa: BLE001 - ends with the killed producer; not what this step checks
            pass

    threading.Thread(target=drain_t3, daemon=True).start()
    try:
        piped = subprocess.run(f"{sys.executable} -m flight_cli tail push:t3 --format jsonl --uri {uri} "
                               "| head -3", shell=True, capture_output=True, text=True, env=child_env(), cwd=ROOT,
                               timeout=120)
    finally:
        endless.kill()
        endless.wait(30)
    assert len(piped.stdout.splitlines()) == 3 and piped.returncode == 0
    errors.append(("head", 0, piped.stderr))

    assert producer.wait(60) == 0, producer.stderr.read()
    consumer.join(60)
    assert consumed == list(range(3000)), "the real consumer got every row, in order"
    for what, code, err in errors:
        assert code == 0 and "Traceback" not in err, (what, code, err)
    part = client.stats("t").push["t"].partitions["0"]
    assert (part.state, part.viewers, part.reader) == ("eof", 0, "drain")


def test_a_viewer_sees_a_failure_after_what_came_before_and_exits_1(client):
    client.register("f", SCHEMA)
    view = tail(client.uri, "push:f", "--format", "jsonl", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: viewers(client, "f") == 1, "the viewer to attach")
    sink = client.sink("f")
    sink.write(make_batch(0, 2))
    wait_for(lambda: client.stats("f").push["f"].partitions["0"].next_seq == 1, "the batch to land")
    sink.fail("sensor 4 is on fire")
    out, err = view.communicate(timeout=30)
    assert [json.loads(line)["id"] for line in out.splitlines()] == [0, 1]
    assert view.returncode == 1 and "sensor 4 is on fire" in err and "Traceback" not in err


def test_jsonl_is_strict_json_that_equals_the_source_rows(client):
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("raw", pa.binary()),
                        ("at", pa.timestamp("us", tz="UTC")), ("price", pa.decimal128(12, 3)),
                        ("tags", pa.list_(pa.list_(pa.int32()))), ("text", pa.string())])
    rows = [
        {"id": 0, "x": math.nan, "raw": b"\x00\xff", "at": pa.scalar(1_700_000_000_123_456, pa.timestamp("us", tz="UTC")).as_py(),
         "price": Decimal("12345.678"), "tags": [[1, None], []], "text": "zürich\t\"quoted\"\n✓"},
        {"id": 1, "x": math.inf, "raw": None, "at": None, "price": None, "tags": None, "text": None},
        {"id": 2, "x": -0.5, "raw": b"", "at": None, "price": Decimal("-0.001"), "tags": [[7]], "text": ""},
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    with client.register_streaming_table("j", schema) as sink:
        sink.write(batch)
    view = tail(client.uri, "push:j", "--from", "earliest", "--format", "jsonl",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = view.communicate(timeout=30)
    assert view.returncode == 0, err

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))

    got = [strict(line) for line in out.splitlines()]
    assert [(g.pop("_partition"), g.pop("_seq")) for g in got] == [(0, 0)] * 3
    assert got[0] == {"id": 0, "x": None, "raw": "AP8=", "at": "2023-11-14T22:13:20.123456+00:00",
                      "price": "12345.678", "tags": [[1, None], []], "text": "zürich\t\"quoted\"\n✓"}
    assert got[1] == {"id": 1, "x": None, "raw": None, "at": None, "price": None, "tags": None, "text": None}
    assert got[2]["x"] == -0.5 and got[2]["raw"] == "" and got[2]["price"] == "-0.001"
    # Decoded back, the rows equal the source (bytes from base64, times from ISO-8601).
    import base64
    import datetime
    assert base64.b64decode(got[0]["raw"]) == rows[0]["raw"]
    assert datetime.datetime.fromisoformat(got[0]["at"]) == rows[0]["at"]
    assert Decimal(got[0]["price"]) == rows[0]["price"]


@pytest.mark.timeout(60)
def test_ctrl_c_in_a_real_terminal_ends_tail_quietly_and_the_rate_shows_only_there(client):
    """tail under a pseudo-terminal (its controlling terminal): Ctrl-C is typed, not signalled."""
    import time

    from tests.terminal import Terminal

    client.register("tty", SCHEMA, capacity=8)
    sink = client.sink("tty")
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set():
            sink.write(make_batch(i * 2, 2))
            i += 1
            time.sleep(0.02)  # paces the producer: rows keep flowing while the tail runs

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    consumed = []
    consumer = threading.Thread(target=lambda: consumed.extend(
        client.read_endpoint(client.info("tty").endpoints[0], timeout=60)), daemon=True)
    consumer.start()
    term = Terminal([sys.executable, "-m", "flight_cli", "tail", "push:tty", "--uri", client.uri])
    try:
        term.read_until(b"rows/s", "the live rate (stderr is a terminal here)")
        term.type(b"\x03")  # Ctrl-C, through the terminal's line discipline
        term.read_until(b" rows in ", "the summary line")
        code = term.wait()
    finally:
        stop.set()
        producer.join(10)
        term.stop()
    screen = term.screen
    assert code == 0, screen[-1000:]
    assert b"Traceback" not in screen and b"KeyboardInterrupt" not in screen
    sink.close()  # the producer was never touched: it ends cleanly
    consumer.join(30)
    assert client.stats("tty").push["tty"].partitions["0"].state == "eof"
    ids = [i for b in consumed for i in b.column("id").to_pylist()]
    assert ids == list(range(len(ids))) and len(ids) > 0  # the consumer got every row, in order


def test_the_table_format_aligns_unicode_escapes_control_characters_and_cuts_long_cells(client):
    from rich.cells import cell_len

    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("note", pa.string())])
    with client.register_streaming_table("tab", schema) as sink:
        sink.write(pa.RecordBatch.from_pylist([
            {"id": 1, "name": "a", "note": "tab\there"},
            {"id": 22, "name": "zürich-東京", "note": "line\nbreak"},
            {"id": 333, "name": None, "note": "x" * 70},
        ], schema=schema))
    view = tail(client.uri, "push:tab", "--from", "earliest", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = view.communicate(timeout=30)
    assert view.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["id", "name", "note", "_partition", "_seq"]
    assert len({cell_len(line) for line in lines}) == 1, lines  # every row as wide: columns line up
    assert "tab\\there" in lines[2] and "line\\nbreak" in lines[3] and "\t" not in out  # escaped, one row each
    assert "NULL" in lines[4] and "x" * 40 in lines[4] and "…" in lines[4] and "x" * 70 not in out


@pytest.mark.timeout(60)
def test_on_a_terminal_the_rate_line_stays_off_the_rows_and_the_columns_stay_put(client):
    """Rows of a later batch are wider (ids 1 to 100000) and arrive after the rate line is shown:
    each row is a line of its own, as wide as the header."""
    from rich.cells import cell_len

    from tests.terminal import Terminal, visible_lines

    client.register("widths", SCHEMA, capacity=16)
    sink = client.sink("widths")
    term = Terminal([sys.executable, "-m", "flight_cli", "tail", "push:widths", "--uri", client.uri])
    try:
        wait_for(lambda: viewers(client, "widths") == 1, "the tail to attach as a viewer")
        sink.write(make_batch(1, 1))
        term.read_until(b"rows/s", "the rate line (after a second)")
        for k in range(1, 6):
            sink.write(make_batch(10 ** k, 1))
        term.read_until(b"row-100000", "the widest row")
        term.type(b"\x03")  # Ctrl-C
        assert term.wait() == 0, term.screen[-1000:]
    finally:
        sink.close()
        term.stop()
    lines = [line for line in visible_lines(term.screen) if line.strip()]
    header, rule, rows, summary = lines[0], lines[1], lines[2:-1], lines[-1]
    assert header.split() == ["id", "name", "ts", "_partition", "_seq"] and set(rule) == {"─"}, lines
    assert [r.split()[:2] for r in rows] == [[str(10 ** k), f"row-{10 ** k}"] for k in range(6)], lines
    assert {cell_len(r.rstrip()) for r in rows} == {cell_len(rows[0].rstrip())}, rows  # one width for all rows
    assert cell_len(rows[0]) == cell_len(header), (header, rows[0])
    assert summary.startswith("6 rows in "), lines


def test_the_table_format_piped_into_head_exits_0(client):
    """`tail | head -3` under `set -o pipefail`: tail's own exit status is the pipeline's."""
    with client.register_streaming_table("many", SCHEMA, capacity=400) as sink:
        for i in range(300):  # ~1 MB of table text: tail still writes when head has gone
            sink.write(make_batch(i * 50, 50))
    pipeline = (f"set -o pipefail; {sys.executable} -m flight_cli tail push:many --from earliest "
                f"--uri {client.uri} | head -3")
    out = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                         timeout=60)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 3, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
