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
         "flight_server.paimon", "pandas", "numpy")  # numpy: installed here, kept out by flight_cli's entry


def imported(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "flight_cli", *args], capture_output=True,
                         text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.timeout(120)
def test_version_list_and_tail_import_neither_pypaimon_nor_the_server(server_process):
    with Client(server_process.uri, timeout=10).register_streaming_table("t", SCHEMA) as sink:
        sink.write(make_batch(0, 2))
    uri = ["--uri", server_process.uri]
    version = imported("--version")
    assert "pyarrow" not in version and "flight_cli.parser" in version  # nothing but argparse
    for args in (["list", *uri], ["tail", "push:t", "--from", "earliest", "-e", *uri], ["stats", "push:t", *uri]):
        modules = imported(*args)
        assert "producers.client" in modules, args  # the run really got as far as the client
        heavy = sorted(m for m in modules if m.startswith(HEAVY))
        assert heavy == [], (args, heavy)


@pytest.mark.timeout(120)
def test_list_builds_no_action_types_and_sets_up_logging_only_when_a_record_comes(server_process):
    """What a client command's start-up costs most, left out until used (issue 48 item 9): the
    actions' dataclasses, structlog (which imports rich and asyncio), tenacity (asyncio), and the malloc
    arena's ctypes (serve and tail only; numpy imports ctypes where it is installed)."""
    modules = imported("list", "--uri", server_process.uri)
    assert "producers.client" in modules
    assert [m for m in modules if m.startswith(("flight_server.wire.actions", "structlog", "tenacity", "asyncio",
                                                "flight_server.wire.allocator", "difflib"))] == []
    script = ("import logging, sys\n"
              "from flight_cli import logs\n"
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


def in_child(script: str) -> str:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.timeout(120)
def test_a_command_makes_only_the_action_types_it_uses(server_process):
    """wire.actions' fifty bodies and results become dataclasses at their first use: `stats` of a
    push table makes its body and the result's classes, none of the other actions'."""
    with Client(server_process.uri, timeout=10).register_streaming_table("t", SCHEMA) as sink:
        sink.write(make_batch(0, 2))
    made = json.loads(in_child(
        "import contextlib, io, json, sys\n"
        "from flight_cli.main import main\n"
        "from flight_server.wire import actions\n"
        "assert not actions._MADE\n"
        f"with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert main(['stats', 'push:t', '--format', 'json', '--uri', {server_process.uri!r}]) == 0\n"
        "assert json.loads(out.getvalue())['push']['t']['partitions']['0']['next_seq'] == 1\n"
        "print(json.dumps(sorted(c.__name__ for c in actions._MADE)))\n"))
    assert made == ["PartitionStats", "PushTableStats", "Stats", "StatsBody"]


def test_a_message_type_is_a_frozen_dataclass_from_its_first_use_on():
    """Made at first use, instances behave as the frozen dataclasses they are declared as: fields,
    defaults, equality, hashing, `replace`, and pickling into a process that has made none."""
    out = in_child(
        "import dataclasses, pickle, subprocess, sys\n"
        "from flight_server.wire import actions as wa\n"
        "b = wa.SchemaChange.add_column('email', 'string')\n"
        "assert b.to_json() == {'change': 'add_column', 'column': 'email', 'type': 'string'}, b.to_json()\n"
        "assert wa.Compacted.from_json({'files_in': 2}) == wa.Compacted([], 2) and wa.Compacted().snapshots == []\n"
        "o = wa.PartitionOffsets(3, 4, 'eof')\n"
        "assert hash(o) == hash(wa.PartitionOffsets(3, 4, 'eof'))\n"
        "assert dataclasses.replace(o, state='open').state == 'open'\n"
        "try:\n"
        "    o.state = 'x'\n"
        "    raise SystemExit('not frozen')\n"
        "except dataclasses.FrozenInstanceError:\n"
        "    pass\n"
        "try:\n"
        "    wa.Body()\n"
        "    raise SystemExit('Body is no message')\n"
        "except TypeError as e:\n"
        "    assert 'not a message' in str(e)\n"
        "code = ('import pickle, sys, dataclasses; from flight_server.wire import actions as wa; '\n"
        "        'assert not wa._MADE; o = pickle.loads(sys.stdin.buffer.read()); '\n"
        "        'print(o == wa.PartitionOffsets(3, 4, \"eof\"), dataclasses.replace(o, next_seq=5).next_seq, repr(o))')\n"
        "r = subprocess.run([sys.executable, '-c', code], input=pickle.dumps(o), capture_output=True, check=True)\n"
        "print(r.stdout.decode().strip())\n")
    assert out.strip() == "True 5 PartitionOffsets(committed=3, next_seq=4, state='eof', at_timestamp=None)"


def test_only_the_command_run_gets_its_flags_built():
    from flight_cli.parser import COMMANDS, build_parser, command_in

    assert sorted(build_parser().command_parsers) == sorted(COMMANDS)
    assert sorted(build_parser("tail").command_parsers) == ["tail"]
    assert build_parser("tail").parse_args(["tail", "db.t", "-e"]).exit
    assert command_in(["--log-level", "debug", "list", "db."]) == "list"
    assert command_in(["--uri", "list", "--version"]) is None  # a global flag's value is no command
    assert command_in(["lsit"]) is None and command_in(["--help"]) is None and command_in([]) is None


@pytest.mark.timeout(120)
def test_a_client_command_ends_its_process_once_its_output_is_out_and_serve_does_not(server_process):
    """flight_cli's entry ends a client command with its status once stdout, stderr and the log
    handlers are flushed, without Python's teardown (atexit handlers do not run)."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('teardown ran'))\n"
              "from flight_cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    uri = ["--uri", server_process.uri]
    Client(server_process.uri, timeout=10).register_streaming_table("t", SCHEMA).close()
    listed = subprocess.run([sys.executable, "-c", script, "--log-level", "debug", "list", *uri], capture_output=True,
                            text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert (listed.returncode, listed.stdout) == (0, "push:t\tendpoints=1\tid:int64, name:string, ts:timestamp[us]\n")
    missing = subprocess.run([sys.executable, "-c", script, "stats", "db.nope", *uri], capture_output=True, text=True,
                             env=child_env(), cwd=ROOT, timeout=60)
    assert missing.returncode == 3 and "db.nope" in missing.stderr and missing.stdout == "", missing
    usage = subprocess.run([sys.executable, "-c", script, "list", "--limit", "-1"], capture_output=True, text=True,
                           env=child_env(), cwd=ROOT, timeout=60)
    assert usage.returncode == 2 and usage.stdout == "teardown ran\n", usage  # argparse's exit is Python's
