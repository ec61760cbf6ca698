"""Shared fixtures: real servers on loopback ports, clients with call timeouts, one SparkSession."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from hypothesis import settings

from flight_server.server import FlightPaimonServer
from producers import Client
from tests import spark_jvm, zygote
from tests.process import ROOT, ServerProcess, child_env  # noqa: F401  (used by tests)

# Properties are checked by examples, not by their speed: no per-example deadline on a loaded machine.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# Every Spark driver of the run (the session below, and the drivers tests start as child
# processes, which inherit it) starts on C1 and the class archive: most of a driver's CPU is its start.
# Options already in SPARK_SUBMIT_OPTS come last, so they win (the JVM takes an option's last value).
os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [spark_jvm.submit_opts(),
                                                         os.environ.get("SPARK_SUBMIT_OPTS")]))


# The servers the tests start as processes are forked from a zygote that has imported the server once
# (tests/zygote.py): a server's start is then about 0.05 CPU s, not 1.5-2.
os.environ.setdefault(zygote.ENV, "1")  # FLIGHT_PAIMON_TEST_ZYGOTE=0: every server a fresh `python -m flight_cli`


def wait_for(condition, what, timeout: float = 10):
    """The tests' one wait: poll `condition()` until it returns a truthy value, and return that
    value; fail the test naming `what` (a string, or a callable that says it when the time is up,
    e.g. with what has arrived so far) after `timeout` s. A condition that raises (an assertion
    that something went wrong meanwhile) fails the test at once."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")
        time.sleep(0.02)
    return value


class RunningServer:
    """An in-process server on a free loopback port; always shut down by the fixture. Its
    compactions rewrite on its maintenance thread unless `maintenance_workers=1` (a worker process
    costs a second or two to start: the tests of the worker, and servers started as `flight_cli
    serve`, use one)."""

    defaults: dict = {}  # options a test module gives every server it starts (test_commit_workers.py)

    def __init__(self, warehouse: str | None = None, server_class=FlightPaimonServer, **options):
        options.setdefault("maintenance_workers", 0)
        options = {**self.defaults, **options}
        self.server = server_class("grpc://127.0.0.1:0", warehouse=warehouse, **options)
        self.uri = self.server.uri
        self.thread = threading.Thread(target=self.server.serve, name="test-server", daemon=True)
        self.thread.start()

    def stop(self) -> bool:
        """The server's own `close`: True when every thread it started stopped within 10 s."""
        stopped = self.server.close("the test server is shutting down", 10)
        self.thread.join(10)
        return stopped and not self.thread.is_alive()


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
    c = Client(server.uri, timeout=60)  # a bound for a slow machine, not a wait
    yield c
    c.close()


@pytest.fixture
def server_process(warehouse):
    proc = ServerProcess(warehouse)
    yield proc
    proc.stop()


@pytest.fixture
def paimon(warehouse):
    """pypaimon over the test's warehouse: the tables the server serves, written directly."""
    from tests.paimon_tables import Warehouse

    return Warehouse(warehouse)


@pytest.fixture
def fp(spark):
    """The session with the flight-paimon data source registered."""
    from spark_reader import register

    register(spark)
    return spark


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
        .config("spark.python.authenticate.socketTimeout", "300s")  # Python workers start slowly under load
        .getOrCreate()
    )
    yield session
    session.stop()
