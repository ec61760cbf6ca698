"""pypaimon's JDBC catalog (table names in a database, files under the warehouse) served for real:
`flight_cli serve --warehouse-option metastore=jdbc --warehouse-option uri=jdbc:...` on SQLite and,
where this machine has Debian's PostgreSQL server and a driver, on a PostgreSQL it starts; and a
catalog the server cannot serve fully (REST) refused at start, naming it."""

from __future__ import annotations

import collections
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from producers import Client
from producers.examples.events import SCHEMA, batch
from tests import zygote
from tests.conftest import ROOT, child_env
from tests.process import ServerProcess

pytestmark = pytest.mark.timeout(180)


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return zygote.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=ROOT)


def held(client: Client, table: str) -> collections.Counter:
    """(producer, seq) -> the rows the table holds of that batch, read with do_get."""
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table), client.options())
    rows = pa.concat_tables([client.flight.do_get(e.ticket, client.options()).read_all() for e in info.endpoints])
    return collections.Counter(zip(rows.column("producer").to_pylist(), rows.column("seq").to_pylist()))


def listed(uri: str) -> list[str]:
    """The names `flight_cli list` prints."""
    done = cli("list", "--uri", uri)
    assert done.returncode == 0, done.stderr
    return [line.split("\t", 1)[0] for line in done.stdout.splitlines()]


def serve_the_catalog(warehouse: str, options: list[str]) -> None:
    """Create, durable writes, reads, list, tail, a maintenance pass, a second server on the same
    catalog, and a drop: everything through real server processes on the JDBC catalog."""
    extra = [arg for option in options for arg in ("--warehouse-option", option)]
    with ServerProcess(warehouse, *extra) as first, ServerProcess(warehouse, *extra) as second:
        a, b = Client(first.uri, timeout=30), Client(second.uri, timeout=30)
        try:
            a.create_table("db.events", SCHEMA, options={"bucket": "2", "bucket-key": "id",
                                                         "snapshot.num-retained.min": "1"})
            assert listed(second.uri) == ["paimon:db.events"], "the second server sees the table the first created"
            for client, producer in ((a, "p1"), (b, "p2")):
                with client.paimon_sink("db.events", producer=producer) as sink:
                    for seq in range(4):
                        sink.write(batch(producer, seq, 10))
            want = {(p, seq): 10 for p in ("p1", "p2") for seq in range(4)}
            assert held(a, "db.events") == want and held(b, "db.events") == want
            assert b.producer_state("db.events", "p1") == 3, "the producer map is read from the table"

            tail = cli("tail", "db.events", "--from", "earliest", "--limit", "80", "--format", "jsonl",
                       "--uri", second.uri)
            assert tail.returncode == 0, tail.stderr
            tailed = collections.Counter((row["producer"], row["seq"]) for row in map(json.loads, tail.stdout.splitlines()))
            assert tailed == want, tail.stdout[-500:]

            compacted = a.compact("db.events")
            assert compacted.snapshots and compacted.files_in > compacted.files_out, compacted
            expired = a.expire_snapshots("db.events", retain_max=1)
            assert expired.expired >= 1 and expired.files_deleted >= 1, expired
            assert a.remove_orphan_files("db.events", dry_run=True).scanned > 0
            assert held(b, "db.events") == want, "nothing the kept snapshot reads was deleted"

            a.drop_table("db.events")
            assert listed(second.uri) == [], "the drop is seen by the second server"
            a.create_table("db.events", SCHEMA)  # the same name again: a new, empty table
            assert held(b, "db.events") == {}
        finally:
            a.close()
            b.close()
    for server in (first, second):  # nothing failed on the way (an error logged, a fallback from the native reader)
        err = server.proc.stderr.read()
        bad = [line for line in err.splitlines() if '"level": "error"' in line or "falling back" in line]
        assert not bad, err[-3000:]


def test_a_sqlite_jdbc_catalog_serves_writes_reads_tails_and_maintenance(tmp_path):
    catalog = tmp_path / "catalog.db"
    serve_the_catalog(str(tmp_path / "wh"), ["metastore=jdbc", f"uri=jdbc:sqlite:{catalog}"])
    assert catalog.stat().st_size > 0  # the names are in the database


def test_a_jdbc_drop_whose_directory_delete_failed_deletes_it_before_the_name_is_used_again(tmp_path):
    """pypaimon's JDBC drop removes the name, then deletes the directory quietly (a failure is only
    logged): here its delete fails as when another writer adds a file meanwhile (ENOTEMPTY). The
    drop deletes the directory itself, so a table created again under the name starts empty."""
    import errno

    from flight_server.paimon import compat
    from tests.paimon_tables import commit_arrow

    catalog = compat.create_catalog(str(tmp_path / "wh"), {"metastore": "jdbc",
                                                           "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}"})
    compat.create_table(catalog, "db.t", SCHEMA, [], [], {"bucket": "-1"})
    commit_arrow(catalog.get_table("db.t"), pa.Table.from_batches([batch("p", 0, 5)]))
    directory = tmp_path / "wh" / "db.db" / "t"
    delete, calls = catalog.file_io.delete, []

    def raced(path, recursive=False):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.ENOTEMPTY, "Directory not empty", str(directory))
        return delete(path, recursive)

    catalog.file_io.delete = raced
    assert compat.drop_table(catalog, "db.t") is True
    assert len(calls) == 2 and not directory.exists()
    compat.create_table(catalog, "db.t", SCHEMA, [], [], {"bucket": "-1"})
    assert compat.latest_snapshot_id(catalog.get_table("db.t")) is None


def _postgres_bin() -> str | None:
    """Debian's PostgreSQL server programs (initdb, pg_ctl), or None."""
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(os.path.realpath(found))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(versions[-1]) if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres():
    """A PostgreSQL server of its own (initdb in a temporary directory, on a free loopback port),
    with a database `paimon`; stopped after the test. Run as the `postgres` user when the tests run
    as root (PostgreSQL refuses root)."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server here (Debian's postgresql package: initdb, pg_ctl)")
    try:
        import psycopg2  # noqa: F401 - pypaimon's JDBC catalog reaches PostgreSQL through it
    except ImportError:
        pytest.skip("no psycopg2 here (pip install psycopg2-binary; the test extra has it)")
    run_as: list[str] = []
    root = tempfile.mkdtemp(prefix="flight-paimon-pg-")
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a `postgres` user to run PostgreSQL as")
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), _free_port()

    def run(*argv: str) -> None:
        done = subprocess.run([*run_as, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{argv[0]} failed: {done.stdout[-1000:]} {done.stderr[-1000:]}"

    run(f"{bin_dir}/initdb", "-D", data, "-U", "paimon", "--auth=trust", "-E", "UTF8")
    run(f"{bin_dir}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w", "-t", "60", "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start")
    try:
        run(f"{bin_dir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "paimon", "paimon")
        yield f"jdbc:postgresql://127.0.0.1:{port}/paimon"
    finally:
        subprocess.run([*run_as, f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_a_postgresql_jdbc_catalog_serves_writes_reads_tails_and_maintenance(tmp_path, postgres):
    serve_the_catalog(str(tmp_path / "wh"), ["metastore=jdbc", f"uri={postgres}", "jdbc.user=paimon"])


@pytest.mark.parametrize("options, words", [
    (["metastore=rest", "uri=http://127.0.0.1:1"], ["'rest'", "commits go through the REST server"]),
    (["metastore=hive"], ["'hive'", "filesystem", "jdbc"]),
    (["metastore=jdbc"], ["'uri'", "jdbc:sqlite:"]),
    (["metastore=jdbc", "uri=jdbc:sqlite:/no-such-directory/catalog.db"],
     ["cannot open the JDBC catalog jdbc:sqlite:/no-such-directory/catalog.db", "unable to open database file"]),
])
def test_a_catalog_the_server_cannot_serve_is_refused_at_start_naming_it(tmp_path, options, words):
    extra = [arg for option in options for arg in ("--warehouse-option", option)]
    done = cli("serve", "--port", "0", "--warehouse", str(tmp_path / "wh"), *extra)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip()
    assert line.startswith("flight_cli serve: ") and len(line.splitlines()) == 1, line
    for word in words:
        assert word in line, (word, line)
    assert not (tmp_path / "wh").exists(), "a refused start creates nothing"
