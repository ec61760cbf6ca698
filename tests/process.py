"""`flight_cli serve` as a child process: started on a free port, its URI read from its first line.

The one way tests, the demo and the benchmarks start a real server process (in the tests, forked from
the test process's zygote: tests/zygote.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests import zygote

ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict:
    """The environment for a child Python that must import this checkout's packages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class ServerProcess:
    """`flight_cli serve --port 0`; `uri` is what it listens on. Stop it with `stop()` or `with`."""

    def __init__(self, warehouse: str, *extra: str, log_level: str | None = None,
                 stderr=subprocess.PIPE, command: list[str] | None = None):
        levels = ["--log-level", log_level] if log_level else []
        argv = command or [sys.executable, "-m", "flight_cli", *levels, "serve", "--port", "0",
                           "--warehouse", warehouse, *extra]
        self.proc = zygote.popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=child_env(), cwd=ROOT)
        self.first_line = self.proc.stdout.readline()
        match = re.search(r"grpc(\+tls)?://[\d.]+:\d+", self.first_line)
        if not match:
            self.proc.kill()
            detail = self.proc.stderr.read()[-2000:] if self.proc.stderr else ""
            raise RuntimeError(f"the server did not start: {self.first_line!r} {detail}")
        self.uri = match.group(0)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
