"""Small things a user meets in the first week (issue 48 item 8): a misspelt table option is
refused naming the one meant, `register` says how many writers a partition takes, a missing table
points at `flight_cli list`, and the terminal `stats` is sentences, not a dump of fields."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from flight_cli import stats as cli_stats
from flight_server.paimon.compat.options import known_options, misspelt_option
from flight_server.wire.actions import SchemaChange
from producers.examples.events import SCHEMA as EVENTS
from producers.examples.events import batch

ROOT = Path(__file__).resolve().parents[1]


def test_a_misspelt_option_is_refused_at_create_naming_the_option_meant(client):
    with pytest.raises(pa.ArrowInvalid) as refused:
        client.create_table("db.t", EVENTS, options={"snapshot.num-retaind.max": "5"})
    assert "Paimon knows no table option 'snapshot.num-retaind.max': did you mean " \
           "'snapshot.num-retained.max'? Nothing was created." in str(refused.value)
    with pytest.raises(KeyError):
        client.stats(table="db.t")
    # Known names, options under prefixes Paimon hands on, and names close to none pass.
    client.create_table("db.t", EVENTS, options={
        "snapshot.num-retained.max": "5", "fields.seq.ignore-retract": "true", "s3.endpoint": "http://x",
        "file.format": "parquet", "partition.expiration-max-num": "10", "my-team.owner": "ops"})
    assert client.stats(table="db.t").paimon["db.t"].snapshots == 0


def test_alter_refuses_setting_a_misspelt_option_and_removes_one(client):
    client.create_table("db.t", EVENTS)
    with pytest.raises(pa.ArrowInvalid) as refused:
        client.alter_table("db.t", [SchemaChange.set_option("write-onyl", "true")])
    assert "did you mean 'write-only'? Nothing was changed." in str(refused.value)
    client.alter_table("db.t", [SchemaChange.set_option("write-only", "true")])
    client.alter_table("db.t", [SchemaChange.remove_option("write-onyl")])  # cleaning one up stays possible


def test_every_option_the_server_reads_is_known():
    source = (ROOT / "flight_server/maintenance/options.py").read_text()
    read = set(re.findall(r'get\("([a-z0-9.-]+)"', source)) | {"rowkind.field", "changelog-producer",
                                                                 "deletion-vectors.merge-on-read", "merge-engine"}
    assert read and not read - known_options(), read - known_options()
    assert misspelt_option("rowkind.feild") == "rowkind.field"


def test_register_names_writers_and_a_missing_table_points_at_flight_cli_list(client):
    registered = client.action("register", {"name": "orders", "schema": _schema(), "writers": 3})
    assert registered["writers"] == 3 and registered["partitions"] == 1
    with pytest.raises(KeyError) as missing:
        client.stats(table="db.ghost")
    assert "`flight_cli list` names the tables" in str(missing.value) and "list_flights" not in str(missing.value)


def _schema() -> str:
    from flight_server.wire.schemas import encode_schema

    return encode_schema(pa.schema([("id", pa.int64())]))


def test_the_terminal_stats_of_a_written_table_is_sentences(client):
    client.create_table("db.e", EVENTS)
    with client.paimon_sink("db.e", producer="p1") as sink:
        sink.write(batch("p1", 0, 10))
    text = cli_stats.summary(client.stats(table="db.e"))
    writes = [line for line in text.splitlines() if line.startswith("writes into db.e")]
    assert len(writes) == 1 and "group commits (the last at snapshot 1)" in writes[0], text
    assert not re.search(r"\b[a-z]+_[a-z_]+ ", text), text  # no field_name value pairs


@pytest.mark.timeout(120)
def test_the_jdbc_catalog_as_documented_and_the_pandas_lines_of_the_protocol_doc(tmp_path):
    """docs/protocol.md's JDBC catalog (SQLite) serves, takes durable writes, and its four
    pyarrow.flight lines read the table into pandas as written (the URI pointed at this server)."""
    from producers import Client
    from tests.process import ServerProcess

    doc = (ROOT / "docs/protocol.md").read_text()
    assert "--warehouse-option metastore=jdbc --warehouse-option\nuri=jdbc:sqlite:" in doc
    lines = re.search(r"<!-- pandas-example -->\s*```python\n(.*?)\n```", doc, re.S).group(1)
    assert len(lines.splitlines()) == 4
    catalog = tmp_path / "catalog.db"
    with ServerProcess(str(tmp_path / "wh"), "--warehouse-option", "metastore=jdbc",
                       "--warehouse-option", f"uri=jdbc:sqlite:{catalog}") as server:
        client = Client(server.uri, timeout=30)
        client.create_table("db.events", EVENTS, options={"bucket": "2", "bucket-key": "id"})
        with client.paimon_sink("db.events", producer="p1") as sink:
            for seq in range(3):
                sink.write(batch("p1", seq, 10))
        client.close()
        assert catalog.stat().st_size > 0  # the catalog is the database, not the warehouse's directories
        scope: dict = {}
        exec(compile(lines.replace("grpc://127.0.0.1:8815", server.uri), "docs/protocol.md", "exec"), scope)
        df = scope["df"]
        assert len(df) == 30 and sorted(df["seq"].unique()) == [0, 1, 2]
