"""compact, expire-snapshots and remove-orphan-files take Paimon's procedures' arguments (issue 38 item 4)."""

from __future__ import annotations

import json
import os
import time

from tests.paimon_tables import Warehouse, rows
from tests.test_cli import cli


def _run(*args: str) -> dict:
    out = cli(*args)
    assert out.returncode == 0, (args, out.stderr)
    return json.loads(out.stdout)


def test_compact_takes_paimons_partitions_and_refuses_an_unknown_column(warehouse, server_process):
    wh = Warehouse(warehouse)
    table = wh.create("events", buckets=1, partition_keys=["region"])
    for i in range(3):
        wh.commit(table, rows(i * 6, 6))  # regions eu, us, ap: three small files each
    uri = ["--uri", server_process.uri]
    done = _run("compact", table, "--partitions", "region=eu;region=us", *uri)
    assert len(done["snapshots"]) == 2 and done["files_in"] == 6 and done["files_out"] == 2, done
    live = wh.catalog.get_table(table).new_read_builder().new_scan().plan().splits()
    files = {s.partition.values[0]: len(s.files) for s in live}
    assert files == {"eu": 1, "us": 1, "apac": 3}, files  # apac was not named: left as it was
    for args, words in [
        (["--partition", "nope=1"], "has no partition column 'nope'"),
        (["--partitions", "region=eu;nope=1"], "has no partition column 'nope'"),
        (["--partitions", "region"], "'region' is not COL=VALUE"),
    ]:
        out = cli("compact", table, *args, *uri)
        assert out.returncode == 2 and words in out.stderr and out.stderr.count("\n") == 1, (args, out.stderr)
    help_text = " ".join(cli("compact", "--help").stdout.split())
    assert "primary-key table's sorted runs are merged" in help_text and "examples:" in help_text


def test_expire_snapshots_takes_max_deletes_and_a_relative_older_than(warehouse, server_process):
    wh = Warehouse(warehouse)
    table = wh.create("orders", buckets=1)
    for i in range(6):
        wh.commit(table, rows(i, 1))
    uri = ["--uri", server_process.uri]
    keep_one = ["--retain-min", "1"]
    assert _run("expire-snapshots", table, *keep_one, "--older-than", "7d", *uri)["expired"] == 0  # none that old
    done = _run("expire-snapshots", table, *keep_one, "--older-than", "0s", "--max-deletes", "2", *uri)
    assert (done["expired"], done["first_kept"]) == (2, 3), done
    done = _run("expire-snapshots", table, *keep_one, "--older-than", "0 s", *uri)
    assert (done["expired"], done["first_kept"]) == (3, 6), done
    out = cli("expire-snapshots", table, "--older-than", "7 fortnights", *uri)
    assert out.returncode == 2 and "unit 'fortnights' is not one of" in out.stderr, out.stderr


def test_remove_orphan_files_dry_run_lists_what_it_would_delete_and_deletes_nothing(warehouse, server_process):
    wh = Warehouse(warehouse)
    table = wh.create("orders", buckets=1)
    wh.commit(table, rows(0, 5))
    orphan = os.path.join(warehouse, "db.db", "orders", "bucket-0", "data-left-by-a-dead-writer.parquet")
    with open(orphan, "wb") as f:
        f.write(b"x" * 100)
    two_days_ago = time.time() - 2 * 86400
    os.utime(orphan, (two_days_ago, two_days_ago))
    uri = ["--uri", server_process.uri]
    dry = _run("remove-orphan-files", table, "--older-than", "1d", "--dry-run", *uri)
    assert dry["deleted"] == 0 and dry["would_delete_bytes"] == 100, dry
    assert [os.path.basename(p) for p in dry["would_delete"]] == [os.path.basename(orphan)] and os.path.exists(orphan)
    done = _run("remove-orphan-files", table, "--older-than", "1d", *uri)
    assert done["deleted"] == 1 and "would_delete" not in done and not os.path.exists(orphan), done
    assert wh.read(table).num_rows == 5
