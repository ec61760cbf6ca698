"""A client command loads the client and the wire only: never pypaimon or the server (issue 38 item 6).

What a command imported is read from `python -X importtime` of a real run (start-up time itself
is measured in the issue note, not asserted here).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from producers import Client
from producers.examples.counter import SCHEMA, make_batch
from tests.conftest import ROOT, child_env

HEAVY = ("pypaimon", "flight_server.server", "flight_server.ingest", "flight_server.maintenance",
         "flight_server.paimon", "pandas")


def imported(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "flight_server.cli", *args], capture_output=True,
                         text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.timeout(120)
def test_version_list_and_tail_import_neither_pypaimon_nor_the_server(server_process):
    with Client(server_process.uri, timeout=10).register_streaming_table("t", SCHEMA) as sink:
        sink.write(make_batch(0, 2))
    uri = ["--uri", server_process.uri]
    version = imported("--version")
    assert "pyarrow" not in version and "flight_server.cli.parser" in version  # nothing but argparse
    for args in (["list", *uri], ["tail", "push:t", "--from", "earliest", "-e", *uri], ["stats", "push:t", *uri]):
        modules = imported(*args)
        assert "producers.client" in modules, args  # the run really got as far as the client
        heavy = sorted(m for m in modules if m.startswith(HEAVY))
        assert heavy == [], (args, heavy)


@pytest.mark.timeout(120)
def test_list_builds_no_action_types_and_sets_up_logging_only_when_a_record_comes(server_process):
    """What a client command's start-up costs most, left out until used (issue 48 item 9): the
    actions' dataclasses, structlog (which imports rich and asyncio) and tenacity (asyncio)."""
    modules = imported("list", "--uri", server_process.uri)
    assert "producers.client" in modules
    assert [m for m in modules if m.startswith(("flight_server.wire.actions", "structlog", "tenacity", "asyncio"))] == []
    script = ("import logging, sys\n"
              "from flight_server.cli import logs\n"
              "logs.configure_on_first_record('info')\n"
              "assert 'structlog' not in sys.modules\n"
              "logging.getLogger('producers.sink').debug('below the level')\n"
              "logging.getLogger('producers.sink').info('sink_reconnected sink=%s', 'orders')\n"
              "logging.getLogger('producers.sink').info('second')\n"
              "assert 'structlog' in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stderr.splitlines()]
    assert [(r["event"], r["level"], r["logger"]) for r in lines] == [
        ("sink_reconnected sink=orders", "info", "producers.sink"), ("second", "info", "producers.sink")]
