"""Configuration as servers have it (issue 48 item 7): `flight_cli serve --config FILE` (TOML,
every flag a key, flags win), readiness by sd_notify and /healthz, bad keys and values refused
with the file and the key named."""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from flight_cli import serve_config
from flight_cli.main import main
from flight_cli.parser import build_parser
from producers import Client
from tests import zygote
from tests.conftest import ROOT, child_env

DEPLOY = ROOT / "deploy"


def _sample(key: str, action: argparse.Action):
    """A value each setting takes, other than its default where it can be: (TOML value, flag words)."""
    if action.nargs == 0:
        return True, [f"--{key}"]
    if action.choices:
        value = [c for c in action.choices if c != action.default][0]
        return value, [f"--{key}", str(value)]
    if action.dest == "warehouse_option":
        return {"s3": {"endpoint": "http://minio:9000"}, "s3.region": "eu"}, \
            [f"--{key}", "s3.endpoint=http://minio:9000", f"--{key}", "s3.region=eu"]
    if isinstance(action, argparse._AppendAction):
        return ["grpc://a:1", "grpc://b:2"], [f"--{key}", "grpc://a:1", f"--{key}", "grpc://b:2"]
    name = getattr(action.type, "__name__", "")
    if action.type in (int, float) or name in ("count",):
        return 7, [f"--{key}", "7"]
    if "duration" in name:
        return "3 min", [f"--{key}", "3 min"]
    if name == "size":
        return "3MiB", [f"--{key}", "3MiB"]
    return f"/srv/{key}", [f"--{key}", f"/srv/{key}"]


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_every_serve_flag_has_a_key_that_parses_as_the_flag_does(tmp_path):
    parser = build_parser()
    keys = serve_config.settings(parser.command_parsers["serve"])
    flags = {s for a in parser.command_parsers["serve"]._actions for s in a.option_strings if s.startswith("--")}
    assert {f"--{k}" for k in keys} == flags - {"--help", "--config"}
    assert {"warehouse", "port", "metrics-port", "auth", "tls-cert", "insecure", "log-level"} <= set(keys)
    lines, words = [], []
    for key, action in keys.items():
        value, flag_words = _sample(key, action)
        lines.append(f"{key} = {_toml(value)}")
        words += flag_words
    path = tmp_path / "serve.toml"
    path.write_text("\n".join(lines) + "\n")
    from_file = serve_config.load(str(path), parser.command_parsers["serve"])
    from_flags = vars(build_parser().parse_args(["serve", *words]))
    assert set(from_file) == {a.dest for a in keys.values()}
    for dest, value in from_file.items():
        assert value == from_flags[dest], dest
    # The same file through --config: every setting lands in the command's arguments.
    args = parser.parse_args(["serve", "--config", str(path)])
    serve_config.apply(args, ["serve", "--config", str(path)], parser.command_parsers["serve"])
    for dest, value in from_file.items():
        assert getattr(args, dest) == value, dest


def _apply(tmp_path, text: str, *argv: str) -> argparse.Namespace:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    parser = build_parser()
    full = ["serve", "--config", str(path), *argv]
    args = parser.parse_args(full)
    serve_config.apply(args, full, parser.command_parsers["serve"])
    return args


def test_flags_win_over_keys_and_warehouse_options_merge(tmp_path):
    text = ('port = 9000\nhost = "127.0.0.2"\nmax_streams = 5\nadvertise = ["grpc://a:1"]\nlog-level = "debug"\n'
            '[warehouse-option]\ns3.endpoint = "http://file:9000"\n"s3.region" = "eu"\n')
    args = _apply(tmp_path, text, "--port", "9001", "--advertise", "grpc://b:2",
                  "--warehouse-option", "s3.endpoint=http://flag:9000", "--log-level", "warning")
    assert (args.port, args.host, args.max_streams) == (9001, "127.0.0.2", 5)
    assert args.advertise == ["grpc://b:2"]  # a flag's list replaces the file's
    assert dict(args.warehouse_option) == {"s3.endpoint": "http://flag:9000", "s3.region": "eu"}
    assert args.log_level == "warning"
    args = _apply(tmp_path, text)
    assert (args.port, args.advertise, args.log_level) == (9000, ["grpc://a:1"], "debug")
    # A flag before the command wins too.
    path = str(tmp_path / "serve.toml")
    parser = build_parser()
    full = ["--log-level", "error", "serve", "--config", path]
    args = parser.parse_args(full)
    serve_config.apply(args, full, parser.command_parsers["serve"])
    assert args.log_level == "error"


@pytest.mark.parametrize("text, message", [
    ("metrics_prot = 9464\n", "unknown key 'metrics_prot'; did you mean 'metrics-port'?"),
    ("[security]\nauth = \"a.json\"\n", "unknown key 'security'"),
    ("port = \"eighty\"\n", "port = 'eighty': 'eighty' is not a whole number"),
    ("port = 1.5\n", "port = 1.5: 1.5 is not a whole number"),
    ("commit-bytes = \"64 parsecs\"\n", "commit-bytes = '64 parsecs': '64 parsecs' is not a size"),
    ("maintenance-workers = 3\n", "maintenance-workers = 3: not one of 0, 1"),
    ("insecure = \"yes\"\n", "insecure = 'yes': 'yes' is not true or false"),
    ("port = [1, 2]\n", "port takes one value"),
    ("port =\n", "is not TOML"),
])
def test_bad_keys_and_values_are_refused_naming_the_file_and_key(tmp_path, capsys, text, message):
    path = tmp_path / "serve.toml"
    path.write_text(text)
    assert main(["serve", "--config", str(path), "--warehouse", str(tmp_path / "wh")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flight_cli serve: ") and message in err and "Traceback" not in err, err
    assert str(path) in err
    assert not (tmp_path / "wh").exists()  # nothing was started


def test_a_missing_config_file_is_one_line(tmp_path, capsys):
    assert main(["serve", "--config", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read --config" in capsys.readouterr().err


def _start(argv: list, env: dict) -> tuple[subprocess.Popen, str]:
    proc = zygote.popen([sys.executable, "-m", "flight_cli", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    first = proc.stdout.readline()
    if "serving" not in first:
        proc.kill()
        raise AssertionError(f"the server did not start: {first!r} {proc.stderr.read()[-2000:]}")
    return proc, first


@pytest.mark.timeout(120)
def test_a_server_from_a_config_file_notifies_systemd_and_answers_healthz(tmp_path):
    """The config's warehouse and metrics port are what it serves; --port and --warehouse given as flags
    win; READY=1 arrives on a real unix datagram socket once it listens, STOPPING=1 on SIGTERM."""
    config = tmp_path / "serve.toml"
    config.write_text(f'warehouse = "{tmp_path / "from-file"}"\nport = 8815\nmetrics-port = 0\n'
                      'commit-interval-ms = 50\nshutdown-timeout = 20\n')
    short = Path(tempfile.mkdtemp(prefix="sdn", dir="/tmp"))  # unix socket paths are short (108 bytes)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(short / "notify"))
    sock.settimeout(60)
    env = child_env() | {"NOTIFY_SOCKET": str(short / "notify")}
    proc, first = _start(["serve", "--config", config, "--port", "0", "--warehouse", tmp_path / "flag"], env)
    try:
        ready = sock.recv(4096).decode()
        assert "READY=1" in ready.splitlines() and f"MAINPID={proc.pid}" in ready.splitlines(), ready
        uri = re.search(r"grpc://[\d.]+:\d+", first).group(0)
        assert uri in ready and not uri.endswith(":8815")  # the flag's port 0 won over the file's 8815
        assert f"warehouse {tmp_path / 'flag'}" in first  # the flag's warehouse
        metrics = re.search(r"metrics (http://[\d.:]+)/metrics", first).group(1)  # the file's metrics-port
        with urllib.request.urlopen(f"{metrics}/healthz", timeout=10) as r:
            assert (r.status, r.read()) == (200, b"ok\n")
        client = Client(uri, timeout=10)
        try:
            assert client.health().version
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        assert sock.recv(4096).decode().startswith("STOPPING=1")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        sock.close()
        os.unlink(short / "notify")
        os.rmdir(short)


@pytest.mark.timeout(60)
def test_the_shipped_config_and_unit_are_valid(tmp_path):
    """deploy/serve.toml loads (every key known, every value taken); the systemd unit passes
    `systemd-analyze verify` where systemd is installed."""
    parser = build_parser()
    settings = serve_config.load(str(DEPLOY / "serve.toml"), parser.command_parsers["serve"])
    assert settings["port"] == 8815 and settings["metrics_port"] == 9464
    unit = (DEPLOY / "flight-paimon.service").read_text()
    assert "Type=notify" in unit and "--config /etc/flight-paimon/serve.toml" in unit
    if not _systemd_analyze():
        pytest.skip("systemd-analyze is not installed here: the unit's syntax is not verified")
    # verify checks that ExecStart's program exists: point it at this venv's flight_cli.
    flight_cli = Path(sys.executable).parent / "flight_cli"
    local = tmp_path / "flight-paimon.service"
    local.write_text(unit.replace("/opt/flight-paimon/bin/flight_cli", str(flight_cli)))
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", str(local)], capture_output=True, text=True,
                         timeout=50)
    problems = [line for line in out.stderr.splitlines() if "flight-paimon.service" in line]
    assert out.returncode == 0 and problems == [], out.stderr


def _systemd_analyze() -> bool:
    try:
        subprocess.run(["systemd-analyze", "--version"], capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True
