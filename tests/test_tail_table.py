"""tail's table never cuts a number, and its row count after `| head` is of rows written (issue 38 item 3)."""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa

from tests.conftest import ROOT, child_env

SCHEMA = pa.schema([("id", pa.int64()), ("note", pa.string()), ("at", pa.timestamp("us")),
                    ("price", pa.decimal128(20, 4))])


def test_a_narrow_terminal_shortens_strings_and_keeps_every_number_and_time_whole(client):
    from tests.terminal import Terminal, visible_lines

    at = datetime.datetime(2026, 11, 24, 12, 0, 0, 123456)
    with client.register_streaming_table("narrow", SCHEMA) as sink:
        sink.write(pa.RecordBatch.from_pylist([{"id": 7, "note": "short", "at": at, "price": 1}], schema=SCHEMA))
        sink.write(pa.RecordBatch.from_pylist([  # a later batch: an id wider than the first batch's column
            {"id": 1234567890123456789, "note": "n" * 60, "at": at, "price": Decimal("1234567890123456.7891")}], schema=SCHEMA))
    term = Terminal([sys.executable, "-m", "flight_cli", "tail", "push:narrow", "--from", "earliest", "-e",
                     "--uri", client.uri], columns=110)
    try:
        assert term.wait() == 0, term.screen[-1000:]
    finally:
        term.stop()
    lines = [line for line in visible_lines(term.screen) if line.strip()]
    rows = [line for line in lines if "2026-" in line]
    assert [r.split()[0] for r in rows] == ["7", "1234567890123456789"], lines  # the id grew: never cut
    assert all("2026-11-24T12:00:00.123456" in r for r in rows), lines
    assert "1234567890123456.7891" in rows[1] and "…" in rows[1] and "n" * 60 not in rows[1], lines
    assert max(len(r.rstrip()) for r in rows) <= 110, lines  # the note gave up its width to fit
    assert lines[-1].startswith("2 rows in "), lines


def test_the_row_count_after_head_is_of_rows_written(client):
    ids = pa.schema([("id", pa.int64())])
    with client.register_streaming_table("big", ids) as sink:
        sink.write(pa.record_batch({"id": list(range(20_000))}, schema=ids))  # ~200 KB of lines: past a pipe's buffer
    pipeline = (f"{sys.executable} -m flight_cli tail push:big --from earliest -e --format jsonl "
                f"--uri {client.uri} | head -1")
    out = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, env=child_env(), cwd=ROOT,
                         timeout=60)
    assert out.stdout == '{"id": 0, "_partition": 0, "_seq": 0}\n', out.stdout[:200]
    written = int(re.search(r"(\d+) rows in", out.stderr).group(1))
    assert 1 <= written < 20_000, out.stderr  # what went into the pipe before head left, not the batch
