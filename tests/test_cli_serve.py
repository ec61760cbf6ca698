"""`flight_cli serve` and `--help` as a newcomer meets them: real processes, real warehouses."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pyarrow as pa
import pytest

from producers import Client
from tests import zygote
from tests.conftest import ROOT, child_env
from tests.process import ServerProcess
from tests.terminal import Terminal, colours

FALLBACK = "falling back"  # pypaimon's "Native plan failed, falling back to the Python scanner" (or reader)


def cli(*args: str, cwd=ROOT, timeout: float = 60) -> subprocess.CompletedProcess:
    return zygote.run([sys.executable, "-m", "flight_cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), cwd=cwd)


@pytest.mark.timeout(90)
def test_a_relative_warehouse_is_read_by_pypaimon_rust_without_a_fallback(tmp_path):
    """The README's `--warehouse ./warehouse`, from the directory the operator is in."""
    server = zygote.popen([sys.executable, "-m", "flight_cli", "serve", "--port", "0",
                               "--warehouse", "./warehouse"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=child_env(), cwd=tmp_path)
    try:
        first = server.stdout.readline()
        assert f"(warehouse {tmp_path / 'warehouse'})" in first, first
        uri = re.search(r"grpc://[\d.]+:\d+", first).group(0)
        assert cli("create", "db.t", "--schema", "id:int64", "--uri", uri).returncode == 0
        with Client(uri, timeout=10).paimon_sink("db.t") as sink:
            sink.write(pa.table({"id": [1, 2, 3]}))
        out = cli("tail", "db.t", "--from", "earliest", "--limit", "3", "--format", "jsonl", "--uri", uri)
        assert out.returncode == 0 and len(out.stdout.splitlines()) == 3, out.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=30)
    assert (tmp_path / "warehouse" / "db.db" / "t").is_dir()
    assert FALLBACK not in err, [line for line in err.splitlines() if FALLBACK in line]


def test_insecure_on_another_address_than_loopback_warns_in_one_line(tmp_path):
    with ServerProcess(str(tmp_path / "w"), "--host", "0.0.0.0", "--insecure") as proc:
        pass
    warnings = [line for line in proc.proc.stderr.read().splitlines() if "warning" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("flight_cli serve: warning: --insecure: --host 0.0.0.0 is reachable from other "
                                  "hosts without TLS or tokens"), warnings
    with ServerProcess(str(tmp_path / "w"), "--insecure") as proc:  # loopback: nothing to warn of
        pass
    assert "warning" not in proc.proc.stderr.read()


def test_a_warehouse_that_is_a_file_is_one_clear_line(tmp_path):
    (tmp_path / "file").write_text("not a warehouse")
    for warehouse, words in [(tmp_path / "file", "is a file, not a directory"),
                             (tmp_path / "file" / "below", f"is under {str(tmp_path / 'file')!r}, a file")]:
        out = cli("serve", "--port", "0", "--warehouse", str(warehouse))
        assert out.returncode == 2 and words in out.stderr and "--warehouse" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_commit_bytes_takes_sizes_like_the_other_byte_flags(tmp_path):
    with ServerProcess(str(tmp_path / "w"), "--commit-bytes", "16MiB", "--max-memory", "1GiB") as proc:
        assert Client(proc.uri, timeout=10).action("health")["status"] == "serving"
    out = cli("serve", "--port", "0", "--warehouse", str(tmp_path / "w"), "--commit-bytes", "lots")
    assert out.returncode == 2 and "--commit-bytes" in out.stderr and "Traceback" not in out.stderr, out.stderr


def _help_entries(text: str) -> list[str]:
    """Each flag's or argument's help in argparse's output, its lines joined."""
    entries: list[str] = []
    for line in text.splitlines():
        if re.match(r"  \S", line):
            entries.append(line.strip())
        elif re.match(r"\s{3,}\S", line) and entries:
            entries[-1] += " " + line.strip()
    return entries


def test_every_help_states_each_default_once():
    commands = [[], ["serve"], ["register"], ["create"], ["drop"], ["tail"], ["list"], ["stats"]]
    for command in commands:
        out = cli(*command, "--help")
        assert out.returncode == 0, out.stderr
        entries = _help_entries(out.stdout)
        assert len(entries) >= 2, out.stdout
        for entry in entries:
            assert entry.lower().count("default") <= 1 and "(default: None)" not in entry, (command, entry)
    serve = " ".join(cli("serve", "--help").stdout.split())
    assert "(default: 64MiB)" in serve and "--metrics-host METRICS_HOST" in serve and "(default: 127.0.0.1)" in serve


@pytest.mark.timeout(60)
def test_no_color_takes_the_colour_out_of_the_log_and_the_table(tmp_path, client):
    """serve's log on a terminal is coloured, but not with NO_COLOR=1; neither is tail's table."""
    serve = [sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--warehouse", str(tmp_path / "w")]
    screens = {}
    for no_color in (None, "1"):
        term = Terminal(serve, env={"NO_COLOR": no_color})
        try:
            term.read_until(b"max_streams", "the serving log line")
        finally:
            term.stop()
        screens[no_color] = term.screen
    assert colours(screens[None]), screens[None][-500:]  # the check below can see colour
    assert colours(screens["1"]) == [], screens["1"][-500:]

    with client.register_streaming_table("plain", pa.schema([("id", pa.int64())])) as sink:
        sink.write(pa.record_batch([pa.array([1, 2])], names=["id"]))
    term = Terminal([sys.executable, "-m", "flight_cli", "tail", "push:plain", "--from", "earliest",
                     "--uri", client.uri], env={"NO_COLOR": "1"})
    try:
        assert term.wait() == 0, term.screen[-500:]
    finally:
        term.stop()
    assert b"_seq" in term.screen and colours(term.screen) == [], term.screen[-500:]
