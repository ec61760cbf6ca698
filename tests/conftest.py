"""Shared fixtures: real servers on loopback ports, clients with call timeouts, one SparkSession."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flight_server.server import FlightPaimonServer
from producers import Client

ROOT = Path(__file__).resolve().parent.parent


def wait_for(condition, what: str, timeout: float = 10):
    """Poll `condition()` until it is true; fail the test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.02)


class RunningServer:
    """An in-process server on a free loopback port; always shut down by the fixture."""

    def __init__(self, warehouse: str | None = None):
        self.server = FlightPaimonServer("grpc://127.0.0.1:0", warehouse=warehouse)
        self.uri = self.server.uri
        self.thread = threading.Thread(target=self.server.serve, name="test-server", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.close_streams("the test server is shutting down")
        stopper = threading.Thread(target=self.server.shutdown, daemon=True)
        stopper.start()
        stopper.join(10)
        self.thread.join(10)


@pytest.fixture
def warehouse(tmp_path) -> str:
    path = tmp_path / "warehouse"
    path.mkdir()
    return str(path)


@pytest.fixture
def server(warehouse):
    running = RunningServer(warehouse)
    yield running
    running.stop()


@pytest.fixture
def client(server):
    c = Client(server.uri, timeout=10)
    yield c
    c.close()


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class ServerProcess:
    """`flight_cli serve --port 0` as a subprocess: for signals, kills and restarts."""

    def __init__(self, warehouse: str, *extra: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flight_server.cli", "serve", "--port", "0", "--warehouse", warehouse, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT,
        )
        line = self.proc.stdout.readline()
        match = re.search(r"grpc://[\d.]+:\d+", line)
        if not match:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.uri = match.group(0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def server_process(warehouse):
    proc = ServerProcess(warehouse)
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run (it takes ~10 s to start)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("flight-paimon-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    yield session
    session.stop()
