"""alter_table and `flight_cli alter` (issue 46 items 1 and 6): Paimon's schema changes by their
names, applied as one schema change and seen by get_schema and `list`; refused with Paimon's
reason where Java Paimon refuses, pypaimon's gaps included; under the admin grant."""

from __future__ import annotations

import json
import re
import secrets

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire.actions import SchemaChange as C
from flight_server.wire.errors import (
    InvalidRequest,
    NotFound,
    PermissionDenied,
    error_message,
    from_flight,
)
from flight_server.wire.type_spec import format_spec
from producers import Client
from tests.paimon_tables import Warehouse, rows
from tests.process import ServerProcess
from tests.test_cli import cli

pytestmark = pytest.mark.timeout(120)

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("region", pa.string(), False),
                    ("name", pa.string()), ("amount", pa.int32()), ("price", pa.decimal128(10, 2)),
                    ("ts", pa.timestamp("us")), ("note", pa.string())])


def schema_of(client: Client, table: str) -> pa.Schema:
    return client.flight.get_schema(flight.FlightDescriptor.for_path("paimon", table), client.options()).schema


def refused(client: Client, table: str, *changes: C) -> str:
    """The one sentence alter_table is refused with (INVALID_ARGUMENT)."""
    with pytest.raises(Exception) as e:
        client.alter_table(table, list(changes))
    assert isinstance(from_flight(e.value), InvalidRequest), e.value
    return error_message(e.value)


def test_each_change_is_applied_and_seen_by_get_schema(client):
    client.create_table("db.orders", SCHEMA, primary_keys=["id", "region"], partition_keys=["region"],
                        options={"bucket": "2"})
    done = client.alter_table("db.orders", [C.add_column("email", "string", comment="receipts", after="name")])
    assert done.schema_id == 1 and done.comments == {"email": "receipts"}, done
    assert schema_of(client, "db.orders").names == ["id", "region", "name", "email", "amount", "price", "ts", "note"]
    assert client.alter_table("db.orders", [C.add_column("seq", "int64", first=True)]).schema.startswith("seq:int64, id")
    done = client.alter_table("db.orders", [C.rename_column("name", "customer")])
    assert "customer:string" in done.schema and "name:" not in done.schema
    widened = client.alter_table("db.orders", [C.update_column_type("amount", "int64"),
                                               C.update_column_type("price", "decimal(12,2)"),
                                               C.update_column_type("ts", "timestamp[ns]")])
    got = schema_of(client, "db.orders")
    assert widened.schema_id == 4  # three changes, one schema
    assert (got.field("amount").type, got.field("price").type, got.field("ts").type) == (
        pa.int64(), pa.decimal128(12, 2), pa.timestamp("ns"))
    client.alter_table("db.orders", [C.set_option("alter-column-null-to-not-null.disabled", "false")])
    client.alter_table("db.orders", [C.update_column_nullability("note", False)])
    assert not schema_of(client, "db.orders").field("note").nullable
    client.alter_table("db.orders", [C.update_column_nullability("note", True),
                                     C.update_column_comment("amount", "in cents")])
    got = schema_of(client, "db.orders")
    assert got.field("note").nullable and got.field("amount").metadata == {b"description": b"in cents"}
    done = client.alter_table("db.orders", [C.set_option("snapshot.time-retained", "2 h"),
                                            C.remove_option("alter-column-null-to-not-null.disabled")])
    assert done.options["snapshot.time-retained"] == "2 h" and "alter-column-null-to-not-null.disabled" not in done.options
    done = client.alter_table("db.orders", [C.drop_column("note"), C.drop_column("seq")])
    assert done.schema_id == 9 and done.schema == ("id:int64!, region:string!, customer:string, email:string, "
                                                   "amount:int64, price:decimal128(12, 2), ts:timestamp[ns]"), done
    assert done.comments == {"email": "receipts", "amount": "in cents"}
    assert format_spec(schema_of(client, "db.orders")) == done.schema


def test_a_table_with_rows_takes_a_new_column_and_reads_it_as_null(client, warehouse):
    wh = Warehouse(warehouse)
    table = wh.create("events", buckets=1)
    wh.commit(table, rows(0, 5))
    client.alter_table(table, [C.add_column("email", "string"), C.update_column_type("amount", "double")])
    got = wh.read(table)
    assert got.column("email").to_pylist() == [None] * 5 and got.num_rows == 5


def test_what_paimon_refuses_is_refused_with_its_reason_naming_the_column(client, warehouse):
    client.create_table("db.keyed", SCHEMA, primary_keys=["id", "region"], partition_keys=["region"],
                        options={"bucket": "2", "rowkind.field": "note"})
    Warehouse(warehouse).commit("db.keyed", pa.table({"id": [1], "region": ["eu"], "name": [None], "amount": [None],
                                                      "price": [None], "ts": [None], "note": ["+I"]}, schema=SCHEMA))
    cases = [
        ([C.drop_column("id")], "Cannot drop partition key or primary key: [id]"),
        ([C.drop_column("region")], "Cannot drop partition key or primary key: [region]"),
        ([C.rename_column("id", "key")], "Cannot drop/rename primary key[id]"),  # pypaimon lets it through
        ([C.rename_column("region", "zone")], "Cannot rename partition column: [region]"),
        ([C.update_column_type("id", "int32")], "change 1 (update_column_type 'id'): Paimon refuses it (Cannot update "
                                                "primary key)"),
        ([C.update_column_type("region", "binary")], "Cannot update partition column: [region]"),
        ([C.update_column_nullability("id", True)], "Cannot change nullability of primary key"),
        ([C.update_column_type("amount", "int16")], "Column type amount[INT] cannot be converted to SMALLINT without "
                                                    "losing information"),  # pypaimon lets it through
        ([C.update_column_type("amount", "string")], "cannot be converted to STRING"),  # an explicit cast
        ([C.update_column_type("price", "decimal(9,2)")], "price[DECIMAL(10, 2)] cannot be converted"),
        ([C.update_column_type("price", "decimal(10,1)")], "cannot be converted to DECIMAL(10, 1)"),
        ([C.update_column_type("ts", "timestamp[ms]")], "ts[TIMESTAMP(6)] cannot be converted to TIMESTAMP(3)"),
        ([C.update_column_type("ts", "date32")], "cannot be converted to DATE"),
        ([C.update_column_type("amount", "uint32")], "Paimon has no type for uint32"),
        ([C.update_column_nullability("name", False)], "change 1 (update_column_nullability 'name'): Paimon refuses it (Cannot update column type from nullable to non nullable for name)"),
        ([C.add_column("email", "string!")], "Column email cannot specify NOT NULL"),
        ([C.add_column("name", "string")], "Column name already exists); choose another name"),
        ([C.add_column("email", "string", after="nope")], "Column nope does not exist); the table's columns are id, "
                                                          "region, name"),
        ([C.drop_column("nope")], "Column nope does not exist"),
        ([C.rename_column("name", "amount")], "Column amount already exists"),
        ([C.rename_column("note", "kind")], "Rowkind field: 'note' can not be found in table schema"),
        ([C.set_option("bucket", "4")], "needs a rescale first"),  # Java lets it through to its writers' check
        ([C.set_option("bucket", "-1")], "Cannot change bucket to -1"),
        ([C.remove_option("bucket")], "Cannot reset bucket"),
        ([C.set_option("merge-engine", "first-row")], "Change 'merge-engine' is not supported yet"),
        ([C.set_option("path", "/elsewhere")], "Change path is not supported yet"),
        ([C.set_option("changelog-producer", "lookup")], "this server's compaction writes none"),
        ([C.set_option("snapshot.time-retained", "2 mins")], "option 'snapshot.time-retained'"),
        # all or nothing: the first change is fine, the second refused, neither is applied
        ([C.add_column("email", "string"), C.drop_column("id")], "change 2 (drop_column 'id')"),
    ]
    for changes, words in cases:
        message = refused(client, "db.keyed", *changes)
        assert words in message and "nothing was changed" in message and "Traceback" not in message, (changes, message)
    assert client.latest_snapshot("db.keyed").snapshot_id == 1
    assert schema_of(client, "db.keyed").names == SCHEMA.names  # nothing was changed
    assert client.alter_table("db.keyed", [C.set_option("snapshot.time-retained", "2 h")]).schema_id == 1


def test_bucket_changes_on_a_table_without_snapshots_and_appends(client, warehouse):
    client.create_table("db.fresh", SCHEMA, primary_keys=["id", "region"], options={"bucket": "2"})
    assert client.alter_table("db.fresh", [C.set_option("bucket", "4")]).options["bucket"] == "4"  # no rows yet
    wh = Warehouse(warehouse)
    table = wh.create("appends", buckets=-1)
    wh.commit(table, rows(0, 3))
    assert "Cannot change bucket when it is -1" in refused(client, table, C.set_option("bucket", "4"))
    keyed = wh.create("keyed_appends", buckets=2)  # bucket-key id
    assert "should contains all bucket keys" in refused(client, keyed, C.drop_column("id"))
    assert client.alter_table(keyed, [C.rename_column("id", "key")]).options["bucket-key"] == "key"  # renamed there too


def test_bad_bodies_and_an_unknown_table(client):
    client.create_table("db.t", SCHEMA)
    for body, words in [
        ({"table": "db.t", "changes": []}, "'changes' must be a non-empty list"),
        ({"table": "db.t", "changes": [{"change": "add_columns", "column": "x"}]}, "set 'change' to one of add_column"),
        ({"table": "db.t", "changes": [{"change": "add_column", "column": "x"}]}, "(add_column) needs 'type'"),
        ({"table": "db.t", "changes": [{"change": "drop_column", "column": "x", "type": "int64"}]}, "takes no key 'type'"),
        ({"table": "db.t", "changes": [{"change": "update_column_nullability", "column": "x", "nullable": 1}]},
         "'nullable' must be true or false"),
        ({"table": "db.t", "changes": [{"change": "add_column", "column": "x", "type": "int65"}]},
         "Unknown column type 'int65'"),
        ({"table": "db.t", "changes": [{"change": "add_column", "column": "x", "type": "int64", "after": "id",
                                        "first": True}]}, "takes 'after' or 'first', not both"),
        ({"table": "db.t", "changes": [], "extra": 1}, "takes no key 'extra'"),
    ]:
        with pytest.raises(Exception) as e:
            client.action("alter_table", body)
        assert isinstance(from_flight(e.value), InvalidRequest) and words in error_message(e.value), (body, e.value)
    with pytest.raises(Exception) as e:
        client.alter_table("db.gone", [C.drop_column("x")])
    assert isinstance(from_flight(e.value), NotFound) and "Paimon table 'db.gone' does not exist" in error_message(e.value)


def test_alter_table_needs_the_admin_grant(tmp_path, warehouse):
    tokens = {who: secrets.token_urlsafe(24) for who in ("admin", "writer")}
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": [
        {"name": "admin", "token": tokens["admin"], "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
        {"name": "writer", "token": tokens["writer"], "grants": [{"tables": "db.*", "allow": ["read", "write"]}]},
    ]}))
    server = ServerProcess(warehouse, "--auth", str(auth))
    admin, writer = (Client(server.uri, timeout=10, token=tokens[w]) for w in ("admin", "writer"))
    try:
        admin.create_table("db.events", SCHEMA)
        with pytest.raises(Exception) as e:
            writer.alter_table("db.events", [C.add_column("email", "string")])
        assert isinstance(from_flight(e.value), PermissionDenied) and "admin" in error_message(e.value)
        assert "email" not in schema_of(admin, "db.events").names
        assert admin.alter_table("db.events", [C.add_column("email", "string")]).schema_id == 1
        assert "email" in schema_of(writer, "db.events").names
    finally:
        admin.close()
        writer.close()
        server.stop()


def test_flight_cli_alter_applies_its_flags_in_order_as_one_change(server_process):
    uri = ["--uri", server_process.uri]
    made = cli("create", "db.orders", "--schema", "id:int64!,name:string,amount:int32,note:string", "--primary-key",
               "id", "--buckets", "1", *uri)
    assert made.returncode == 0, made.stderr
    done = cli("alter", "db.orders", "--add-column", "email:string", "--after", "name", "--add-column",
               "`odd, name`:int64", "--first", "--rename-column", "name", "customer", "--update-type",
               "amount:int64", "--comment", "email", "where receipts go", "--drop-column", "note",
               "--set", "snapshot.time-retained=2h", "--set", "x=1", "--remove", "x", "--nullable", "amount", *uri)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["schema_id"] == 1 and result["comments"] == {"email": "where receipts go"}, result
    assert result["options"]["snapshot.time-retained"] == "2h" and "x" not in result["options"]
    listed = cli("list", "db.", *uri)
    assert listed.stdout.split("\t")[2].strip() == \
        "`odd, name`:int64, id:int64!, customer:string, email:string, amount:int64", listed.stdout
    # the not-null flag, once the table allows it
    assert cli("alter", "paimon:db.orders", "--set", "alter-column-null-to-not-null.disabled=false", *uri).returncode == 0
    assert cli("alter", "db.orders", "--not-null", "amount", *uri).returncode == 0
    assert "amount:int64!" in cli("list", "db.", *uri).stdout


def test_flight_cli_alter_help_and_exit_codes(server_process):
    uri = ["--uri", server_process.uri]
    helped = cli("alter", "--help")
    assert helped.returncode == 0
    examples = [line for line in helped.stdout[helped.stdout.index("examples:"):].splitlines()
                if line.startswith("  flight_cli alter ")]
    for flag in ("--add-column", "--after", "--first", "--rename-column", "--drop-column", "--update-type",
                 "--nullable", "--not-null", "--comment", "--set", "--remove"):
        assert any(re.search(rf" {flag}(\s|$)", line) for line in examples), (flag, examples)
    assert "exit codes:" in helped.stdout
    assert cli("create", "db.t", "--schema", "id:int64!,v:int64", "--primary-key", "id", *uri).returncode == 0
    for args, code, words in [
        (["db.t", "--update-type", "v:int32"], 2, "Column type v[BIGINT] cannot be converted to INT"),
        (["db.t", "--drop-column", "id"], 2, "Cannot drop partition key or primary key: [id]"),
        (["db.gone", "--drop-column", "v"], 3, "Paimon table 'db.gone' does not exist"),
        (["db.t", "--after", "id"], 2, "--after goes right after the --add-column it places"),
        (["db.t"], 2, "alter needs at least one change"),
        (["db.t", "--set", "novalue"], 2, "is not KEY=VALUE"),
        (["db.t", "--add-column", "x:int65"], 2, "Unknown column type 'int65'"),
        (["push:orders", "--drop-column", "v"], 2, "a push table keeps the schema it was registered with"),
    ]:
        out = cli("alter", *args, *uri)
        assert out.returncode == code and words in out.stderr and out.stderr.count("\n") == 1, (args, out.stderr)
        assert "Traceback" not in out.stderr
    unreachable = cli("alter", "db.t", "--drop-column", "v", "--uri", "grpc://127.0.0.1:1", "--timeout", "5")
    assert unreachable.returncode == 1, unreachable.stderr
    assert cli("list", "db.", *uri).stdout.split("\t")[2].strip() == "id:int64!, v:int64"  # nothing was changed
