"""The version is visible (issue 48 item 4): one source (pyproject's version, as the installed
distribution says it), shown by `flight_cli --version` (with `--uri`, the server's too, from its
health action), the `serving` line and log line, and /metrics' `flight_paimon_build_info`
(test_metrics.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from flight_server.wire.version import NOT_INSTALLED, VERSION
from tests.conftest import ROOT, child_env
from tests.process import ServerProcess


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=ROOT)


def test_the_version_is_pyprojects():
    assert VERSION == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_a_checkout_not_installed_says_so():
    script = ("import importlib.metadata as m\n"
              "def missing(name): raise m.PackageNotFoundError(name)\n"
              "m.version = missing\n"
              "from flight_server.wire.version import VERSION; print(VERSION)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env=child_env(), cwd=ROOT)
    assert done.stdout.strip() == NOT_INSTALLED == "0+unknown", done.stderr


@pytest.mark.timeout(120)
def test_version_names_the_client_and_with_uri_the_server(warehouse):
    alone = cli("--version")
    assert (alone.returncode, alone.stdout) == (0, f"flight_cli {VERSION}\n"), alone.stderr
    with ServerProcess(warehouse, stderr=subprocess.PIPE) as server:
        assert server.first_line.startswith(f"flight-paimon {VERSION} serving {server.uri}")
        both = cli("--version", "--uri", server.uri)
        assert both.returncode == 0, both.stderr
        assert both.stdout == f"flight_cli {VERSION}\nserver {server.uri}: flight-paimon {VERSION}\n"
        server.proc.terminate()
        server.proc.wait(60)
        logged = [json.loads(line) for line in server.proc.stderr.read().splitlines() if line.startswith("{")]
        assert [e["version"] for e in logged if e.get("event") == "serving"] == [VERSION]
    gone = cli("--version", "--uri", server.uri)
    assert gone.returncode == 1 and gone.stdout == f"flight_cli {VERSION}\n"
    assert f"cannot reach a flight-paimon server at {server.uri}" in gone.stderr, gone.stderr


def test_uri_before_a_command_is_a_usage_error_and_a_command_is_still_needed():
    misplaced = cli("--uri", "grpc://127.0.0.1:1", "list")
    assert misplaced.returncode == 2 and "put it after the command" in misplaced.stderr
    none = cli()
    assert none.returncode == 2 and "the following arguments are required: COMMAND" in none.stderr
