"""The data source's option parsing, without Spark or a server."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_reader.options import OptionError, parse

URI = "grpc://127.0.0.1:8815"


def test_options_parse_into_a_picklable_typed_value():
    opts = parse({"uri": URI, "table": "db.t", "scan.mode": "from-snapshot-full", "scan.snapshot-id": "3",
                  "read.stream.maxSnapshotsPerTrigger": "2", "READ.STREAM.MAXROWSPERTRIGGER": "100"})
    assert (opts.scan_mode, opts.snapshot_id, opts.max_snapshots_per_trigger, opts.max_rows_per_trigger) == \
        ("from-snapshot-full", 3, 2, 100)
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert parse({"uri": URI, "table": "db.t", "scan.snapshot-id": "4"}).scan_mode == "from-snapshot"
    assert parse({"uri": URI, "table": "db.t", "incremental-between": "3,7"}).incremental_between == (3, 7)


@pytest.mark.parametrize("options, message", [
    ({"table": "db.t", "push": "p"}, "both given"),
    ({}, "needs a source"),
    ({"table": "t"}, "database.table"),
    ({"push": "p", "scan.mode": "latest"}, "apply to Paimon tables"),
    ({"table": "db.t", "scan.mode": "sometimes"}, "scan.mode"),
    ({"table": "db.t", "scan.mode": "from-snapshot"}, "needs .option\\('scan.snapshot-id'"),
    ({"table": "db.t", "incremental-between": "7"}, "START,END"),
    ({"table": "db.t", "incremental-between": "7,3"}, "START <= END"),
    ({"table": "db.t", "scan.snapshot-id": "2", "incremental-between": "1,2"}, "conflict"),
    ({"table": "db.t", "read.stream.maxRowsPerTrigger": "-5"}, "positive"),
    ({"table": "db.t", "scan.snapshotid": "2"}, "does not know the option"),
    ({"table": "db.t", "path": "/tmp/x"}, "takes no path"),
])
def test_bad_options_are_refused_with_a_sentence_naming_the_fix(options, message):
    with pytest.raises(OptionError, match=message):
        parse({"uri": URI, **options})


@given(st.text(max_size=40))
def test_any_uri_is_accepted_or_refused_as_an_option_error(uri):
    try:
        assert parse({"uri": uri, "push": "p"}).uri == uri
    except OptionError as e:
        assert "uri" in str(e)
