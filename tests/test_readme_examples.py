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
    done = subprocess.run([sys.executable, "-m", "producers.raw_grpc.producer", "--uri", server.uri, "--table", "full",
                           "--batches", "4", "--rows", "10", "--timeout", "5"], capture_output=True, text=True,
                          cwd=ROOT, env=child_env(), timeout=60)
    assert done.returncode == 1
    why = "partition 0 of push table 'full' is full: is a reader running?"
    assert re.search(r"producer: waiting for the server to take the next batch \(acked up to \d+\); "
                     + re.escape(why), done.stderr), done.stderr
    assert "DEADLINE_EXCEEDED" in done.stderr and f"(--timeout 5 s passed; {why})" in done.stderr, done.stderr
