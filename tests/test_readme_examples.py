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
