"""Paimon's audit_log system table, `DB.TABLE$audit_log` (issue 48 item 2): every row of the table
with a leading `rowkind` column, as Java Paimon's AuditLogTable reads it: a primary-key table merged
with each key's last kind (+U stays +U, a key whose last change is a delete shows -D until a
compaction drops it), deltas and follows with every change; served by get_flight_info and do_get
and tailed by `flight_cli tail 'db.t$audit_log'`."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from pypaimon import Schema

from tests.conftest import ROOT, child_env
from tests.java_paimon import java_paimon, java_vm  # noqa: F401  (fixtures)
from tests.paimon_tables import command, commit_arrow, read_all, rows

pytestmark = pytest.mark.timeout(300)

CHANGES = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("op", pa.string())])


def changes(*rows_: tuple[int, str, str]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows_], "name": [r[1] for r in rows_], "op": [r[2] for r in rows_]},
                    schema=CHANGES)


@pytest.fixture
def users(paimon) -> str:
    """A primary-key table whose writes carry their row kind ('op'), never compacted: four commits
    that insert 0-2, retract 0 and insert 3, update 0, delete 1."""
    options = {"bucket": "1", "rowkind.field": "op"}
    paimon.catalog.create_table("db.users", Schema.from_pyarrow_schema(CHANGES, primary_keys=["id"], options=options),
                                False)
    for data in (changes((0, "a0", "+I"), (1, "a1", "+I"), (2, "a2", "+I")), changes((0, "a0", "-U"), (3, "a3", "+I")),
                 changes((0, "b0", "+U")), changes((1, "a1", "-D"))):
        commit_arrow(paimon.catalog.get_table("db.users"), data)
    return "db.users"


def kinds(table: pa.Table) -> list[tuple]:
    return sorted((r["id"], r["rowkind"], r["name"]) for r in table.to_pylist())


def test_a_primary_key_tables_audit_log_is_merged_with_each_keys_last_kind(client, users):
    descriptor = flight.FlightDescriptor.for_path("paimon", f"{users}$audit_log")
    fi, table = read_all(client, descriptor)
    assert client.flight.get_schema(descriptor, options=client.options()).schema == fi.schema
    assert fi.schema.field(0) == pa.field("rowkind", pa.string(), nullable=False)
    assert fi.schema.names == ["rowkind", "id", "name", "op"]
    assert kinds(table) == [(0, "+U", "b0"), (1, "-D", "a1"), (2, "+I", "a2"), (3, "+I", "a3")]
    # The table itself: the delete is applied, no row kind
    _, plain = read_all(client, flight.FlightDescriptor.for_path("paimon", users))
    assert sorted(plain.column("id").to_pylist()) == [0, 2, 3] and "rowkind" not in plain.schema.names


def test_a_delta_and_a_projection_of_the_audit_log(client, users):
    _, delta = read_all(client, command({"table": f"{users}$audit_log", "from_snapshot": 0, "to_snapshot": 4}))
    assert [(r["rowkind"], r["id"]) for r in delta.to_pylist()] == [
        ("+I", 0), ("+I", 1), ("+I", 2), ("-U", 0), ("+I", 3), ("+U", 0), ("-D", 1)]
    fi, projected = read_all(client, command({"table": f"{users}$AUDIT_LOG", "columns": ["name", "rowkind"]}))
    assert fi.schema.names == ["rowkind", "name"]  # the row kind leads, as in Paimon
    assert sorted(projected.to_pylist(), key=lambda r: r["name"]) == [
        {"rowkind": "-D", "name": "a1"}, {"rowkind": "+I", "name": "a2"}, {"rowkind": "+I", "name": "a3"},
        {"rowkind": "+U", "name": "b0"}]


def test_an_append_tables_audit_log_is_every_row_as_an_insert(client, paimon):
    table = paimon.create("events", buckets=2)
    paimon.commit(table, rows(0, 5))
    _, audit = read_all(client, flight.FlightDescriptor.for_path("paimon", f"{table}$audit_log"))
    assert sorted((r["rowkind"], r["id"]) for r in audit.to_pylist()) == [("+I", i) for i in range(5)]


def test_other_system_tables_writes_and_row_kind_filters_are_refused_naming_what_is_served(client, users):
    for name in (f"{users}$snapshots", f"{users}$branch_b1"):
        with pytest.raises(pa.ArrowInvalid, match=r"this server serves only t\$audit_log .* not '(snapshots|branch_b1)'"):
            client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", name), options=client.options())
    writer, _ = client.flight.do_put(flight.FlightDescriptor.for_path("paimon", f"{users}$audit_log"), CHANGES,
                                     options=client.options())
    with pytest.raises(pa.ArrowInvalid, match=r"serves only t\$audit_log, and only to read"):
        writer.write_table(changes((9, "x", "+I")))
        writer.close()
    with pytest.raises(pa.ArrowInvalid, match="a filter on the row kind column 'rowkind' is not served"):
        client.flight.get_flight_info(command({"table": f"{users}$audit_log", "filter": [["rowkind", "=", "+I"]]}),
                                      options=client.options())
    with pytest.raises(pa.ArrowInvalid, match="serves only"):  # actions name tables, never a system table
        client.latest_snapshot(f"{users}$audit_log")


def tail(uri: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flight_cli", "tail", *argv, "--format", "jsonl", "--uri", uri],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=120)


def test_tail_of_the_audit_log_prints_every_change_with_its_kind(client, users):
    every = tail(client.uri, f"{users}$audit_log", "--from", "earliest", "-e")
    assert every.returncode == 0, every.stderr
    printed = [json.loads(line) for line in every.stdout.splitlines()]
    assert [(r["rowkind"], r["id"], r["_snapshot"]) for r in printed] == [
        ("+I", 0, 1), ("+I", 1, 1), ("+I", 2, 1), ("-U", 0, 2), ("+I", 3, 2), ("+U", 0, 3), ("-D", 1, 4)]
    assert list(printed[0])[0] == "rowkind"
    full = tail(client.uri, f"paimon:{users}$audit_log", "-e")  # latest-full: the table merged, then changes
    assert full.returncode == 0, full.stderr
    assert sorted((r["id"], r["rowkind"]) for r in map(json.loads, full.stdout.splitlines())) == [
        (0, "+U"), (1, "-D"), (2, "+I"), (3, "+I")]
    refused = tail(client.uri, f"{users}$files")
    assert refused.returncode == 2 and "serves only t$audit_log" in refused.stderr, refused.stderr  # bad input


def test_the_audit_log_reads_as_java_paimon_reads_it(client, java_paimon):  # noqa: F811
    """Java Paimon 0.9 writes a primary-key table's changes, then reads `t$audit_log` itself: the
    server's read is the same, row for row."""
    java_paimon.create("db.kinds", [["id", "bigint!"], ["name", "string"]], primary_keys=["id"],
                       options={"bucket": "1", "write-only": "true"})
    java_paimon.write("db.kinds", [{"id": i, "name": f"a{i}", "_kind": "+I"} for i in range(4)])
    java_paimon.write("db.kinds", [{"id": 0, "name": "a0", "_kind": "-U"}, {"id": 0, "name": "b0", "_kind": "+U"}])
    java_paimon.write("db.kinds", [{"id": 1, "name": "a1", "_kind": "-D"}, {"id": 4, "name": "a4", "_kind": "+I"}])
    java_paimon.write("db.kinds", [{"id": 2, "name": "a2", "_kind": "-U"}])
    java = sorted((r["id"], r["rowkind"], r["name"]) for r in java_paimon.read("db.kinds$audit_log"))
    _, served = read_all(client, flight.FlightDescriptor.for_path("paimon", "db.kinds$audit_log"))
    assert kinds(served) == java
    assert {k for _, k, _ in java} >= {"+I", "+U", "-D"}  # the comparison covers updates and deletes
