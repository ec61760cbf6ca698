"""The suite's zygote (tests/zygote.py) starts what a plain `python -m` starts: the same exit codes,
streams, refusals, working directory and environment, and a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from tests import zygote
from tests.process import ROOT, ServerProcess, child_env

pytestmark = pytest.mark.timeout(120)


def test_a_forked_server_is_a_process_of_its_own_that_exits_as_a_plain_one(warehouse):
    server = ServerProcess(warehouse)
    assert isinstance(server.proc, zygote.ForkedProcess)  # the suite sets FLIGHT_PAIMON_TEST_ZYGOTE=1
    proc = psutil.Process(server.proc.pid)
    assert proc.pid not in (os.getpid(), server.proc.zygote.proc.pid)
    assert proc.cmdline()[:3] == [sys.executable, "-m", "tests.zygote"]  # what /proc says of a fork
    server.proc.send_signal(signal.SIGTERM)  # a clean stop: the server's own handler, exit code 0
    assert server.proc.wait(60) == 0
    assert "shutting_down" in server.proc.stderr.read()
    killed = ServerProcess(warehouse)
    killed.proc.kill()
    assert killed.proc.wait(60) == -signal.SIGKILL
    assert killed.proc.poll() == -signal.SIGKILL
    killed.proc.kill()  # a signal after its end is no error, as with Popen


def test_a_refused_start_says_the_same_forked_or_plain(tmp_path):
    argv = [sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--warehouse", "wh", "--commit-bytes", "lots"]
    forked = zygote.run(argv, capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    assert forked.returncode == plain.returncode == 2
    assert forked.stderr == plain.stderr and "--commit-bytes" in forked.stderr
    assert forked.stdout == plain.stdout == ""


def test_a_fork_takes_its_working_directory_environment_and_stdin(tmp_path):
    program = [sys.executable, "-m", "producers.examples.counter", "nowhere", "--batches", "1"]
    env = {**child_env(), "FLIGHT_PAIMON_URI": "grpc://127.0.0.1:1"}  # read by the program at its start
    forked = zygote.run(program, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    plain = subprocess.run(program, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert forked.returncode == plain.returncode != 0
    assert "127.0.0.1:1" in forked.stderr and forked.stderr == plain.stderr
    relative = zygote.run([sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--warehouse", "./wh",
                           "--commit-bytes", "lots"], capture_output=True, text=True, timeout=60,
                          env=child_env(), cwd=tmp_path)
    assert relative.returncode == 2 and str(ROOT) not in relative.stderr


def test_what_is_not_forked_is_started_by_subprocess(tmp_path):
    tail = zygote.popen([sys.executable, "-m", "flight_cli", "list", "--uri", "grpc://127.0.0.1:1"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    assert isinstance(tail, subprocess.Popen)  # a client command: a process without the zygote's imports
    tail.communicate(timeout=60)
    other = {**child_env(), "PYTHONWARNINGS": "error"}  # read by an interpreter at its start
    assert isinstance(zygote.popen([sys.executable, "-m", "producers.examples.counter", "--help"],
                                   stdout=subprocess.DEVNULL, env=other), subprocess.Popen)
