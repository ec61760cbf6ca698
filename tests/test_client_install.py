"""A light client (issue 48 item 6): `pip install flight-paimon` alone, in a fresh venv, brings
pyarrow and the few packages the client declares, not pypaimon, Spark or the server's pins; with
it a producer pushes batches into a real server and flight_cli's client commands run.

The wheel is built from this checkout (its pyproject.toml, the packages it names) and installed
with pip resolving the declared dependencies from the package index (pip's cache after the first
run): what a producer's `pip install` does. Skipped only when the index cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("flight_server", "producers", "spark_reader", "flight_cli")  # pyproject.toml's packages.find
NOT_IN_THE_CLIENT = ("pypaimon", "pypaimon_rust", "pyspark", "pandas", "numpy", "prometheus_client", "pydantic")
UNREACHABLE = re.compile(r"NewConnectionError|Temporary failure in name resolution|Network is unreachable|"
                         r"ConnectTimeout|Max retries exceeded|No route to host")


def _run(argv: list, timeout: float = 240, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)


def _wheel(tmp: Path) -> Path:
    """This checkout's wheel, built from a copy (the build leaves nothing in the checkout)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "node_modules", "*.egg-info", "_generated")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=skip)
    out = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                "-w", tmp / "dist", src])
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("flight_paimon-*.whl")
    return wheel


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("client-install")
    wheel = _wheel(tmp)
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # This venv's pip installs into the new one (pip --python): the new venv needs no pip of its own.
    out = _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--only-binary", ":all:",
                "--disable-pip-version-check", wheel], timeout=600)
    if out.returncode != 0 and UNREACHABLE.search(out.stderr):
        pytest.skip(f"the package index cannot be reached to install the client's dependencies: "
                    f"{out.stderr.strip().splitlines()[-1][:300]}")
    assert out.returncode == 0, out.stderr[-3000:]
    return venv


def _client_env() -> dict:
    """No PYTHONPATH: the venv's own install is what runs (and a cwd outside the checkout)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.mark.timeout(900)
def test_the_client_installs_alone_and_pushes_batches_into_a_server(client_venv, server_process, tmp_path):
    python, cli = client_venv / "bin" / "python", client_venv / "bin" / "flight_cli"
    env, uri = _client_env(), ["--uri", server_process.uri]

    def run(*argv):
        return _run(list(argv), timeout=120, env=env, cwd=tmp_path)

    found = run(python, "-c", "import importlib.util, json, pyarrow, producers; print(json.dumps(["
                f"[m for m in {NOT_IN_THE_CLIENT!r} if importlib.util.find_spec(m)], pyarrow.__version__, "
                "producers.__file__]))")
    assert found.returncode == 0, found.stderr[-2000:]
    heavy, pyarrow_version, where = json.loads(found.stdout)
    assert heavy == [], f"the client install brought {heavy}"
    assert where.startswith(str(client_venv)), where  # the installed client, not this checkout
    print(f"the client's venv got pyarrow {pyarrow_version}")

    created = run(cli, "create", "db.events", "--schema", "producer:string,seq:int64,id:int64", *uri)
    assert created.returncode == 0, created.stderr
    pushed = run(python, "-m", "producers.examples.events", "db.events", "--producer", "p1", "--batches", "3",
                 "--rows", "5", *uri)
    assert pushed.returncode == 0, pushed.stderr[-2000:]
    tailed = run(cli, "tail", "db.events", "--from", "earliest", "-e", "--format", "jsonl", *uri)
    assert tailed.returncode == 0, tailed.stderr[-2000:]
    rows = [json.loads(line) for line in tailed.stdout.splitlines()]
    assert sorted(r["id"] for r in rows) == [seq * 1_000_000 + i for seq in range(3) for i in range(5)]

    # A push table too: register, a producer, a consumer's read (the counter example's rows).
    registered = run(cli, "register", "orders", "--schema", "id:int64,name:string,ts:timestamp[us]", *uri)
    assert registered.returncode == 0, registered.stderr
    counted = run(python, "-m", "producers.examples.counter", "orders", "--batches", "2", "--rows", "3", *uri)
    assert counted.returncode == 0, counted.stderr[-2000:]
    listed = run(cli, "list", *uri)
    assert listed.returncode == 0, listed.stderr
    assert {line.split("\t")[0] for line in listed.stdout.splitlines()} == {"paimon:db.events", "push:orders"}

    served = run(cli, "serve", "--port", "0", "--warehouse", tmp_path / "wh")
    assert served.returncode == 2, (served.stdout, served.stderr)
    assert "pip install 'flight-paimon[server]'" in served.stderr and "Traceback" not in served.stderr, served.stderr
