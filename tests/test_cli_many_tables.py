"""Many tables from the CLI (issue 48 item 9): `create` takes several tables or a file of them (all
checked before any is created), and `list` and `stats` filter by pattern and page by name.

How long 300 tables take is scripts/bench_cli_tables.py's to measure, not a test's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest

from producers import Client
from tests.conftest import ROOT, child_env


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          input=stdin, timeout=120, env=child_env(), cwd=ROOT)


def listed(uri: str, *args: str) -> list[str]:
    out = cli("list", *args, "--uri", uri)
    assert out.returncode == 0, out.stderr
    return [line.split("\t")[0] for line in out.stdout.splitlines()]


@pytest.mark.timeout(240)
def test_create_takes_several_tables_and_a_file_of_them(server_process, tmp_path):
    uri = server_process.uri
    made = cli("create", "db.a", "db.b", "--schema", "id:int64!,v:double", "--primary-key", "id", "--uri", uri)
    assert made.returncode == 0, made.stderr
    results = [json.loads(line) for line in made.stdout.splitlines()]
    assert [(r["table"], r["primary_keys"]) for r in results] == [("db.a", ["id"]), ("db.b", ["id"])]

    tables = tmp_path / "tables.txt"
    tables.write_text("# the events, keyed\n"
                      "db.c --primary-key id --option snapshot.num-retained.max=7\n"
                      "\n"
                      "paimon:db.d --schema 'k:string,n:int32' --partition-by k   # its own columns\n"
                      "db.e\n")
    made = cli("create", "--file", str(tables), "--schema", "id:int64!,v:double", "--option", "bucket=2",
               "--option", "bucket-key=id", "--uri", uri)
    assert made.returncode == 0, made.stderr
    results = {r["table"]: r for r in map(json.loads, made.stdout.splitlines())}
    assert list(results) == ["db.c", "db.d", "db.e"]
    assert results["db.c"]["primary_keys"] == ["id"] and results["db.c"]["options"]["snapshot.num-retained.max"] == "7"
    assert results["db.c"]["options"]["bucket"] == "2"  # the command line's --option, merged with the line's
    assert results["db.d"]["partition_keys"] == ["k"] and results["db.d"]["primary_keys"] == []
    assert results["db.d"]["schema"] == "k: string, n: int32"  # the line's --schema, not the command line's
    assert results["db.e"]["primary_keys"] == [] and results["db.e"]["options"]["bucket-key"] == "id"
    made = cli("create", "--file", "-", "--schema", "x:int64", "--uri", uri, stdin="db.f\ndb.g\n")
    assert made.returncode == 0, made.stderr
    assert listed(uri) == [f"paimon:db.{t}" for t in "abcdefg"]


@pytest.mark.timeout(240)
def test_create_checks_every_line_before_creating_any(server_process, tmp_path):
    uri = server_process.uri
    tables = tmp_path / "tables.txt"
    tables.write_text("db.a\ndb.b --primary-key id\ndb.c --schema 'id:int99'\n")
    bad = cli("create", "--file", str(tables), "--schema", "id:int64!", "--uri", uri)
    assert bad.returncode == 2 and f"{tables}:3: --schema 'id:int99'" in bad.stderr, bad.stderr
    tables.write_text("db.a\ndb.b --primary-kee id\n")
    bad = cli("create", "--file", str(tables), "--schema", "id:int64!", "--uri", uri)
    assert bad.returncode == 2 and f"{tables}:2: unrecognized arguments: --primary-kee id" in bad.stderr, bad.stderr
    bad = cli("create", "db.a", "db.a", "--schema", "id:int64", "--uri", uri)
    assert bad.returncode == 2 and "names db.a twice" in bad.stderr, bad.stderr
    bad = cli("create", "db.a", "--file", str(tmp_path / "nope.txt"), "--schema", "id:int64", "--uri", uri)
    assert bad.returncode == 2 and "cannot read --file" in bad.stderr, bad.stderr
    bad = cli("create", "db.a", "push:q", "--schema", "id:int64", "--uri", uri)
    assert bad.returncode == 2 and "flight_cli register" in bad.stderr, bad.stderr
    bad = cli("create", "db.a", "--uri", uri)
    assert bad.returncode == 2 and "--schema is required" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    assert listed(uri) == []  # nothing was created by any of them

    assert cli("create", "db.b", "--schema", "id:int64", "--uri", uri).returncode == 0
    partial = cli("create", "db.a", "db.b", "db.c", "--schema", "id:int64", "--uri", uri)
    assert partial.returncode == 1, partial.stderr
    assert "1 of 3 tables created; db.b failed, the rest were not tried" in partial.stderr
    assert "already exists" in partial.stderr
    assert listed(uri) == ["paimon:db.a", "paimon:db.b"]


@pytest.mark.timeout(240)
def test_list_and_stats_filter_by_pattern_and_page_by_name(server_process):
    uri = server_process.uri
    names = [f"db.t{i:02d}" for i in range(12)]
    assert cli("create", *names, "--schema", "id:int64", "--uri", uri).returncode == 0
    client = Client(uri, timeout=30)
    try:
        for push in ("p1", "p2", "q1"):
            client.register(push, pa.schema([("id", pa.int64())]))
        batch = pa.record_batch([pa.array([1, 2], pa.int64())], names=["id"])
        for table in ("db.t00", "db.t01", "db.t10"):
            with client.paimon_sink(table) as sink:
                sink.write(batch)
    finally:
        client.close()

    everything = [f"paimon:{n}" for n in names] + ["push:p1", "push:p2", "push:q1"]
    assert listed(uri) == everything
    assert listed(uri, "db.t1*") == ["paimon:db.t10", "paimon:db.t11"]
    assert listed(uri, "push:?1") == ["push:p1", "push:q1"]
    assert listed(uri, "db.t0") == [f"paimon:db.t0{i}" for i in range(10)]  # a prefix, as before
    page = cli("list", "--limit", "5", "--uri", uri)
    first = [line.split("\t")[0] for line in page.stdout.splitlines()]
    assert first == everything[:5]
    assert "5 tables shown; the next page: --after paimon:db.t04" in page.stderr
    pages, after = [first], first[-1]
    while True:
        more = cli("list", "--limit", "5", "--after", after, "--uri", uri)
        got = [line.split("\t")[0] for line in more.stdout.splitlines()]
        if not got:
            break
        pages.append(got)
        after = got[-1]
    assert [n for p in pages for n in p] == everything

    def stats(*args):
        out = cli("stats", *args, "--format", "json", "--uri", uri)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    every = stats()
    assert set(every["push"]) == {"p1", "p2", "q1"} and set(every["paimon_writes"]) == {"db.t00", "db.t01", "db.t10"}
    some = stats("push:p*")
    assert set(some["push"]) == {"p1", "p2"} and some["paimon_writes"] == {}
    some = stats("db.t0*")
    assert some["push"] == {} and set(some["paimon_writes"]) == {"db.t00", "db.t01"}
    paged = cli("stats", "--limit", "2", "--format", "json", "--uri", uri)
    assert set(json.loads(paged.stdout)["paimon_writes"]) == {"db.t00", "db.t01"}
    assert "2 of 6 tables shown; the next page: --after paimon:db.t01" in paged.stderr
    rest = stats("--after", "paimon:db.t01")
    assert set(rest["paimon_writes"]) == {"db.t10"} and set(rest["push"]) == {"p1", "p2", "q1"}


@pytest.mark.timeout(240)
def test_the_readme_many_tables_block_runs_as_written(server_process, tmp_path):
    text = (ROOT / "README.md").read_text().split("<!-- readme-many-tables -->", 1)[1]
    script = text.split("```bash\n", 1)[1].split("\n```", 1)[0]
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**child_env(), "FLIGHT_PAIMON_URI": server_process.uri}, timeout=200)
    assert done.returncode == 0, done.stderr
    pages = [line.split("\t")[0] for line in done.stdout.splitlines() if line.startswith("paimon:")]
    assert pages == ["paimon:db.m1", "paimon:db.m2", "paimon:db.m3", "paimon:db.m4"]  # two pages of two
    assert "2 tables shown; the next page: --after paimon:db.m2" in done.stderr
    assert listed(server_process.uri, "db.m5") == ["paimon:db.m5"]


@pytest.mark.timeout(120)
def test_list_flights_takes_a_page_as_json_criteria(server, client):
    """The wire (docs/protocol.md, "Listing tables"): a prefix as before, or {"prefix", "after",
    "limit"}: that page of the tables by spelled name, the only ones planned."""
    from flight_server.wire.listing import ListQuery

    for name in ("db.a", "db.b", "db.c", "x.d"):
        client.create_table(name, pa.schema([("id", pa.int64())]))
    client.register("db.p", pa.schema([("id", pa.int64())]))

    def names(criteria: bytes) -> list[str]:
        return [":".join(p.decode() for p in info.descriptor.path) for info in client.flight.list_flights(criteria)]

    assert names(b"db.") == ["push:db.p", "paimon:db.a", "paimon:db.b", "paimon:db.c"]  # a prefix, as before
    assert names(ListQuery("db.", limit=2).criteria()) == ["paimon:db.a", "paimon:db.b"]
    assert names(ListQuery("db.", after="paimon:db.b", limit=2).criteria()) == ["push:db.p", "paimon:db.c"]
    assert names(ListQuery("", after="paimon:x.d").criteria()) == ["push:db.p"]
    assert names(ListQuery("", limit=0).criteria()) == []
    for bad, words in ((b'{"prefix": "db.", "limt": 2}', "not 'limt'"), (b'{"limit": -1}', "'limit' is a whole number"),
                       (b'{"after": 3}', "'after' are strings"), (b'{"prefix": ', "not UTF-8 JSON")):
        with pytest.raises(pa.ArrowInvalid, match=words):  # INVALID_ARGUMENT
            names(bad)
