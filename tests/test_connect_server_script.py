"""scripts/connect-server in the background, as the README says: `start` returns once the Connect
server serves (on 127.0.0.1 unless told otherwise) and prints its sc:// address, `status` and
`stop` find it by its pid file, and `stop` ends that process only."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest

from tests.conftest import ROOT, child_env, wait_for

SCRIPT = str(ROOT / "scripts" / "connect-server")


def run(env: dict, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


@pytest.mark.timeout(400)
def test_start_status_stop_in_the_background_on_loopback(tmp_path):
    env = {**child_env(), "SPARK_LOG_DIR": str(tmp_path / "logs")}
    env.pop("SPARK_CONNECT_HOST", None)
    env.pop("SPARK_PID_DIR", None)
    pid = None
    try:
        started = run(env, "start", "--master", "local[1]", "--conf", "spark.connect.grpc.binding.port=0",
                      "--conf", "spark.ui.enabled=false")
        assert started.returncode == 0, started.stdout + started.stderr
        url = started.stdout.strip()
        assert url.startswith("sc://127.0.0.1:"), started.stdout
        port = int(url.rsplit(":", 1)[1])
        pid_files = [f for f in os.listdir(tmp_path / "logs") if f.endswith(".pid")]
        assert len(pid_files) == 1, os.listdir(tmp_path / "logs")
        pid = int((tmp_path / "logs" / pid_files[0]).read_text())
        listening = [c.laddr for c in psutil.Process(pid).net_connections("tcp") if c.status == psutil.CONN_LISTEN]
        assert [a.ip.removeprefix("::ffff:") for a in listening if a.port == port] == ["127.0.0.1"], listening

        from pyspark.sql.connect.session import SparkSession as ConnectSession

        session = ConnectSession.builder.remote(url).create()
        try:
            assert session.range(5).count() == 5
        finally:
            session.stop()
        assert run(env, "status").returncode == 0
        again = run(env, "start")
        assert again.returncode == 1 and f"already running as process {pid}" in again.stderr, again.stderr
        stopped = run(env, "stop")
        assert stopped.returncode == 0 and f"stopped process {pid}" in stopped.stdout, stopped.stdout + stopped.stderr
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not (tmp_path / "logs" / pid_files[0]).exists()
        assert run(env, "status").returncode == 3
        assert run(env, "stop").returncode == 0, "stopping what is not running is no error"
        bad = run(env, "stop", "--master", "local[1]")
        assert bad.returncode == 2 and "takes no arguments" in bad.stderr
    finally:
        if pid is not None and psutil.pid_exists(pid):  # the test failed with the server still up: this pid only
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                     "the connect server to stop", timeout=60)
