"""A PaimonSink's calls ride a server restart as its writes do: opening a sink while the server is
down waits for it (within reconnect_timeout), and a user's mistake fails at once. Real server
processes on loopback ports, SIGKILLed and restarted; real pypaimon tables."""

from __future__ import annotations

import json
import re
import signal
import socket
import struct
import threading
import time

import pyarrow as pa
import pytest

from producers import Client
from producers.examples.events import SCHEMA, batch
from producers.sink import SinkError
from tests.conftest import wait_for
from tests.process import ServerProcess
from tests.test_ingest_faults import ROWS, batches_held, free_port, table_rows

pytestmark = pytest.mark.timeout(120)

ADMIN, WRITER = "admin-token-0123456789", "writer-token-0123456789"  # --auth wants 16 characters


class ResettingPort:
    """A listener on `port` that resets every connection it accepts, as a server dying under its
    clients does ("connection reset"); `resets` counts them."""

    def __init__(self, port: int):
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.05)  # the accept loop looks at `_stop` this often
        self.resets = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resetting-port", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
            conn.close()
            self.resets += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_sink_opened_while_the_server_is_down_waits_for_its_restart_and_writes_every_batch_once(warehouse):
    """The server is SIGKILLed; a named producer's sink is opened against its port, whose
    connections are first reset (the sink's first calls fail UNAVAILABLE and are retried), then
    refused; the server is restarted on the same port and warehouse, the constructor returns
    with the producer's last_seq and the sink's batches land exactly once."""
    port = free_port()
    server = ServerProcess(warehouse, "--port", str(port), "--commit-interval-ms", "50")
    client = Client(server.uri, timeout=10)
    try:
        client.create_table("db.events", SCHEMA)
        with client.paimon_sink("db.events", producer="p") as first:  # the new sink resumes after these
            for seq in range(5):
                first.write(batch("p", seq, ROWS))
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        resetting = ResettingPort(port)
        opened: list = []

        def open_sink() -> None:
            try:
                opened.append(client.paimon_sink("db.events", producer="p", reconnect_timeout=60))
            except BaseException as e:  # noqa: BLE001 - reported by the test below
                opened.append(e)

        opener = threading.Thread(target=open_sink, name="open-sink", daemon=True)
        opener.start()
        try:
            # A second connection comes only after the first was reset: the sink's first call failed.
            wait_for(lambda: resetting.resets >= 2 or opened, "the sink's first calls to be reset and retried")
            assert not opened, f"the sink gave up while the server was down: {opened}"
        finally:
            resetting.close()
        wait_for(lambda: refused(port), f"port {port} to refuse connections")
        assert opener.is_alive(), f"the sink gave up while the server was down: {opened}"
        server = ServerProcess(warehouse, "--port", str(port), "--commit-interval-ms", "50")
        opener.join(60)
        assert not opener.is_alive(), "the sink did not open after the restart"
        (sink,) = opened
        assert not isinstance(sink, BaseException), sink
        assert sink.last_seq == 4 and sink.reconnects == 0
        for seq in range(5, 25):
            sink.write(batch("p", seq, ROWS))
        sink.close()
        assert sink.acked == 20
        reader = Client(server.uri, timeout=30)
        held = batches_held(table_rows(reader, "db.events"))
        assert dict(held) == {("p", seq): ROWS for seq in range(25)}
        assert reader.producer_state("db.events", "p") == 24
    finally:
        server.stop()


@pytest.mark.parametrize("producer", [None, "p"])
@pytest.mark.parametrize("table, error, says", [
    ("db.nope", KeyError, "Paimon table 'db.nope' does not exist"),  # NOT_FOUND
    ("nodot", pa.ArrowInvalid, "Paimon table name 'nodot' .* is not 'DB.TABLE'"),  # INVALID_ARGUMENT
])
def test_a_sink_for_a_table_that_does_not_exist_fails_at_once_naming_it(server_process, producer, table, error, says):
    client = Client(server_process.uri, timeout=10)
    start = time.monotonic()
    with pytest.raises(error, match=says):
        client.paimon_sink(table, producer=producer, reconnect_timeout=60)
    assert time.monotonic() - start < 5, "a user's mistake was retried"


@pytest.fixture
def secured(tmp_path, warehouse):
    """A server with --auth: `writer` may write db.events only."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": [
        {"name": "admin", "token": ADMIN, "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
        {"name": "writer", "token": WRITER, "grants": [{"tables": "db.events", "allow": ["write"]}]},
    ]}))
    server = ServerProcess(warehouse, "--auth", str(auth))
    admin = Client(server.uri, timeout=10, token=ADMIN)
    admin.create_table("db.events", SCHEMA)
    admin.create_table("db.other", SCHEMA)
    yield server.uri
    admin.close()
    server.stop()


@pytest.mark.parametrize("token, table, says", [
    ("no-such-token-0123456789", "db.events", "The bearer token is not known to this server"),  # UNAUTHENTICATED
    (WRITER, "db.other", "Principal 'writer' may not"),  # PERMISSION_DENIED
])
def test_a_sink_without_the_right_token_or_grant_fails_at_once(secured, token, table, says):
    """pyarrow raises get_schema's errors as bare OSError/ArrowException, UNAUTHENTICATED too: the
    message is what tells them apart (and what the retry must not swallow)."""
    client = Client(secured, timeout=10, token=token)
    start = time.monotonic()
    with pytest.raises((OSError, pa.ArrowException), match=re.escape(says)):
        client.paimon_sink(table, producer="p", reconnect_timeout=60)
    assert time.monotonic() - start < 5, "a user's mistake was retried"


def test_a_sink_whose_server_never_comes_back_gives_up_at_its_reconnect_timeout():
    client = Client(f"grpc://127.0.0.1:{free_port()}", timeout=10)
    start = time.monotonic()
    with pytest.raises(SinkError, match=r"Could not open Paimon table 'db.events' \(producer 'p'\) within 1 s: "
                                        r".*unavailable"):
        client.paimon_sink("db.events", producer="p", reconnect_timeout=1)
    assert 0.5 <= time.monotonic() - start < 5
