"""The README's examples run as written: each `<!-- readme-example: NAME -->` is followed by a bash
block (run against a real server: the URI comes from FLIGHT_PAIMON_URI, as users may set it) and
a Python block (run in the test's Spark session, with the README's URI pointed at that server),
and each table the Python block shows must be the one the README shows under it."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess

import pytest

from producers import Client
from tests import zygote
from tests.conftest import ROOT, child_env

README_URI = "grpc://127.0.0.1:8815"
EXAMPLE = re.compile(r"<!-- readme-example: (\w+) -->\s*```bash\n(.*?)\n```\s*```python\n(.*?)\n```", re.S)


def example(name: str) -> tuple[str, str]:
    found = {n: (bash, python) for n, bash, python in EXAMPLE.findall((ROOT / "README.md").read_text())}
    assert name in found, f"README.md has no example {name!r}; it has {sorted(found)}"
    return found[name]


def shown_tables(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The tables in `show()` output (border, header, border, rows, border): (header, sorted rows)
    each; Spark's row order is not part of what the README promises."""
    tables, borders, rows = [], 0, []
    for line in (x.rstrip() for x in lines):
        if line.startswith("+"):
            borders += 1
            if borders == 3:
                tables.append((rows[0], sorted(rows[1:])))
                borders, rows = 0, []
        elif line.startswith("|") and borders:
            rows.append(line)
    return tables


@pytest.mark.timeout(300)
def test_the_deletes_and_changelog_example_runs_as_written(fp, server):
    bash, python = example("deletes")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", bash], capture_output=True, text=True, cwd=ROOT,
                          env={**child_env(), "FLIGHT_PAIMON_URI": server.uri}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert README_URI in python
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(python.replace(README_URI, server.uri), "README.md (deletes)", "exec"), {"spark": fp})
    promised = shown_tables([line[2:] for line in python.splitlines() if line.startswith("# ")])
    got = shown_tables(out.getvalue().splitlines())
    assert len(promised) == 2 and got == promised, out.getvalue()


def sh_block(path: str, heading: str) -> str:
    """The first ```sh block under `heading` in `path`."""
    text = (ROOT / path).read_text().split(heading, 1)[1]
    return re.search(r"```sh\n(.*?)\n```", text, re.S).group(1)


@pytest.mark.timeout(300)
def test_the_any_language_producers_usage_runs_as_written(server):
    """producers/js/README.md's Usage: both producers end, and tail (a viewer) prints all 20 batches
    and ends at EOF; run with the README's URI pointed at the test's server."""
    import os
    import shutil
    import sys

    if shutil.which("node") is None or not (ROOT / "producers/js/node_modules").is_dir():
        pytest.skip("Node.js or producers/js/node_modules is missing: scripts/setup.d/10-producers installs them")
    script = sh_block("producers/js/README.md", "## Usage").replace(README_URI, server.uri)
    env = {**child_env(), "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
           "FLIGHT_PAIMON_URI": server.uri}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("done batches=10") == 2 and "20000 rows" in done.stdout + done.stderr, done.stdout[-2000:]


@pytest.mark.timeout(120)
def test_the_raw_grpc_producer_says_why_it_waits_on_a_full_partition(client, server):
    import sys

    client.register("full", __import__("producers.raw_grpc.rows", fromlist=["SCHEMA"]).SCHEMA, capacity=1)
    done = zygote.run([sys.executable, "-m", "producers.raw_grpc.producer", "--uri", server.uri, "--table", "full",
                           "--batches", "4", "--rows", "10", "--timeout", "5"], capture_output=True, text=True,
                          cwd=ROOT, env=child_env(), timeout=60)
    assert done.returncode == 1
    why = "partition 0 of push table 'full' is full: is a reader running?"
    assert re.search(r"producer: waiting for the server to take the next batch \(acked up to \d+\); "
                     + re.escape(why), done.stderr), done.stderr
    assert "DEADLINE_EXCEEDED" in done.stderr and f"(--timeout 5 s passed; {why})" in done.stderr, done.stderr


def block(path: str, after: str, lang: str = "bash") -> str:
    """The first ```LANG block after the text `after` in `path`."""
    text = (ROOT / path).read_text()
    assert text.count(after) == 1, f"{path} has {text.count(after)} of {after!r}"
    return re.search(rf"```{lang}\n(.*?)\n```", text.split(after, 1)[1], re.S).group(1)


def in_tmp_checkout(tmp_path) -> dict:
    """A working directory where the README's relative `.venv/bin/...` commands resolve (its own
    ./warehouse stays in the test's directory), and their environment."""
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    return {**child_env(), "NO_COLOR": "1"}


def run_block(script: str, uri: str, cwd, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=cwd,
                          env={**env, "FLIGHT_PAIMON_URI": uri}, timeout=timeout)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done


@pytest.mark.timeout(180)
def test_the_use_it_commands_run_as_written(tmp_path):
    """README's "Use it": `serve` (on a free port instead of 8815) prints the URI, and the other
    lines, pointed at it through FLIGHT_PAIMON_URI, register, push, view, list, show and drop."""
    lines = block("README.md", "## Use it").splitlines()
    serve, rest = lines[0], "\n".join(lines[1:])
    assert serve.startswith(".venv/bin/flight_cli serve --warehouse ./warehouse --port 8815")
    env = in_tmp_checkout(tmp_path)
    server = subprocess.Popen(["bash", "-c", "exec " + serve.split("#")[0].replace("--port 8815", "--port 0")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path, env=env)
    try:
        uri = re.search(r"grpc://[\d.]+:\d+", server.stdout.readline()).group(0)
        done = run_block(rest, uri, tmp_path, env)
    finally:
        server.kill()
        server.wait(10)
    assert (tmp_path / "warehouse").is_dir()
    assert "50 rows in" in done.stderr, done.stderr  # tail: the 10 batches of 5 rows, then the end of the stream
    assert "push:orders" in done.stdout and "id:int64" in done.stdout, done.stdout


@pytest.mark.timeout(180)
def test_the_durable_writes_commands_run_as_written(tmp_path, server):
    """README's durable writes into db.events, every line against a real server: 100 batches at 20 a
    second (5 s), an ALTER, a tail to the end, stats, Paimon's procedures, a tag, the drop."""
    script = block("README.md", "Durable writes into a Paimon table (rows survive restarts")
    done = run_block(script, server.uri, tmp_path, in_tmp_checkout(tmp_path))
    assert "10000 rows in" in done.stderr, done.stderr[-2000:]  # tail -e: 100 batches of 100 rows
    header = ["producer", "seq", "id", "note"]  # tail's table: the column the ALTER added, after id
    assert any(line.split()[:4] == header for line in done.stdout.splitlines()), done.stdout[:2000]
    with pytest.raises(KeyError):
        Client(server.uri).latest_snapshot("db.events")  # dropped by the last line


@pytest.mark.timeout(120)
def test_the_python_examples_run_as_written(client):
    """README's two "From Python" blocks, one after the other in a fresh interpreter (the second
    writes into the db.events the durable-writes example creates), with the README's URI pointed at
    the test's server."""
    import sys

    from producers.examples.events import SCHEMA

    client.create_table("db.events", SCHEMA)
    after = "From Python:\n"
    first = block("README.md", after, "python")
    second = block("README.md", first + "\n```\n", "python")
    assert README_URI in first
    done = subprocess.run([sys.executable, "-c", (first + "\n" + second).replace(README_URI, client.uri)],
                          capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    _, rows = read_table(client, "db.events")
    assert sorted(rows["seq"]) == [0, 0, 1, 1, 2, 2] and set(rows["producer"]) == {"loader-1"}
    assert client.producer_state("db.events", "loader-1") == 2


def read_table(client, table: str):
    import pyarrow.flight as flight

    from tests.paimon_tables import read_all

    fi, data = read_all(client, flight.FlightDescriptor.for_path("paimon", table))
    return fi, data.to_pydict()


@pytest.mark.timeout(300)
def test_the_javascript_and_raw_grpc_durable_writes_run_as_written(server):
    """producers/js/README.md's durable writes: `flight_cli create`, then the Node and the raw-gRPC
    producers as named producers into db.demo, 10 batches each, every one acked once committed."""
    import os
    import shutil
    import sys

    if shutil.which("node") is None or not (ROOT / "producers/js/node_modules").is_dir():
        pytest.skip("Node.js or producers/js/node_modules is missing: scripts/setup.d/10-producers installs them")
    script = block("producers/js/README.md", "Durable writes into a Paimon table", "sh").replace(README_URI, server.uri)
    env = {**child_env(), "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    done = run_block(script, server.uri, ROOT, env, timeout=240)
    assert done.stdout.count("done last_seq=9") == 2, done.stdout[-2000:]
    client = Client(server.uri)
    try:
        assert client.producer_state("db.demo", "js-1") == 9 and client.producer_state("db.demo", "py-1") == 9
    finally:
        client.close()


@pytest.mark.timeout(300)
def test_the_spark_block_runs_as_written(fp, client):
    """README's "Spark" block in the test's Spark session, the README's URI pointed at the test's
    server, over the tables it names: Paimon tables db.orders and db.users (primary key, its
    changelog written), push table orders; its df.write lands in the push table."""
    import pyarrow as pa

    code = block("README.md", "## Spark\n", "python")
    assert README_URI in code
    client.create_table("db.orders", pa.schema([("id", pa.int64()), ("amount", pa.float64())]))
    users = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("op", pa.string())])
    client.create_table("db.users", users, primary_keys=["id"],
                        options={"bucket": "1", "rowkind.field": "op", "changelog-producer": "input"})
    client.register("orders", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    exec(compile(code.replace(README_URI, client.uri), "README.md (Spark)", "exec"), {"spark": fp})
    assert client.offsets("orders")["0"].next_seq >= 1  # df.write pushed its rows


@pytest.mark.timeout(300)
def test_the_tls_and_tokens_example_runs_with_its_placeholders_filled(tmp_path, fp):
    """README's TLS + tokens example: `serve` with the certificate, key and --auth file it names (a
    throwaway CA, on loopback and a free port), `flight_cli list` over grpc+tls with the token in
    FLIGHT_PAIMON_TOKEN, then its Python lines (Client and a Spark read) with HOST filled in."""
    import json

    from flight_server.auth import token_sha256
    from scripts.throwaway_ca import write_certs

    script = block("README.md", "[`docs/protocol.md`](docs/protocol.md#security):\n")
    python = block("README.md", script + "\n```\n", "python")
    write_certs(tmp_path)
    token = "readme-token"
    (tmp_path / "auth.json").write_text(json.dumps({"principals": [{
        "name": "ops", "token_sha256": token_sha256(token), "grants": [{"tables": "*", "allow": ["read", "write",
                                                                                                 "admin"]}]}]}))
    env = in_tmp_checkout(tmp_path)
    serve, rest = script.split("\nexport ", 1)
    serve = serve.replace("\\\n", " ").split("#")[0].replace("--host 0.0.0.0", "--host 127.0.0.1") + " --port 0"
    server = subprocess.Popen(["bash", "-c", "exec " + serve], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, cwd=tmp_path, env=env)
    try:
        uri = re.search(r"grpc\+tls://[\d.]+:\d+", server.stdout.readline()).group(0)
        host = uri.removeprefix("grpc+tls://")
        client = Client(uri, token=token, tls_root_certs=str(tmp_path / "ca.pem"))
        client.create_table("db.orders", __import__("producers.examples.events", fromlist=["SCHEMA"]).SCHEMA)
        client.close()
        rest = ("export " + rest).replace("FLIGHT_PAIMON_TOKEN=...", f"FLIGHT_PAIMON_TOKEN={token}")
        done = run_block(rest.replace("HOST:8815", host), uri, tmp_path, env)
        assert "paimon:db.orders" in done.stdout, done.stdout
        import os

        here = os.getcwd()
        os.chdir(tmp_path)  # the example's ca.pem is relative
        try:
            scope = {"Client": Client, "token": token, "spark": fp}  # what the lines before it made
            exec(compile(python.replace("HOST:8815", host), "README.md (TLS)", "exec"), scope)
        finally:
            os.chdir(here)
        assert scope["client"].latest_snapshot("db.orders").snapshot_id is None
    finally:
        server.kill()
        server.wait(10)
