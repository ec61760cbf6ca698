"""What a scenario is, how one run is judged, and the processes a run starts (all stopped by pid).

Every run ends in one outcome:
- `ok`: what the protocol promises happened (a clean end with every row, or an error naming the
  cause; for resumable paths, every row once);
- `truncation`: a clean end with rows missing (the one thing the product promises never happens);
- `hang`: something that should have ended within 10 s of the fault did not;
- `wrong_error`: an error, but not the one the protocol promises (or rows altered before it);
- `crash`: a process the scenario did not kill died (the server, above all).
Lost and duplicated rows are counted where a path promises exactly-once or at-least-once.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests import zygote
from tests.process import ROOT, ServerProcess, child_env

OUTCOMES = ("ok", "truncation", "hang", "wrong_error", "crash")
HANG_S = 10.0  # a fault's consequences must be over within this


class Verdict(Exception):
    """Ends a run with an outcome other than ok."""

    def __init__(self, outcome: str, detail: str):
        assert outcome in OUTCOMES, outcome
        super().__init__(detail)
        self.outcome = outcome


def hang(detail: str) -> Verdict:
    return Verdict("hang", detail)


def wrong_error(detail: str) -> Verdict:
    return Verdict("wrong_error", detail)


def truncation(detail: str) -> Verdict:
    return Verdict("truncation", detail)


@dataclass
class Run:
    outcome: str = "ok"
    detail: str = ""
    lost: int = 0
    duplicated: int = 0  # where exactly-once is promised
    redelivered: int = 0  # where at-least-once is promised: rows delivered again (allowed)
    seconds: float = 0.0


@dataclass
class Scenario:
    group: str
    name: str
    promise: str  # what the run checks, one line for the report
    fn: Callable[[Context], Run | None]
    short: int  # runs in the CI version (0: only in the full version, where another covers it in CI)
    full: int  # runs in the full version
    setup: Callable[[Context], object] | None = None


SCENARIOS: list[Scenario] = []


def scenario(group: str, name: str, promise: str, short: int = 2, full: int = 20):
    """Register `fn(ctx) -> Run | None` (None: ok) as a scenario."""
    def register(fn):
        SCENARIOS.append(Scenario(group, name, promise, fn, short, full))
        return fn
    return register


class Context:
    """One run: its random source, a scratch directory, and every process it starts.

    `server()` is shared by the runs of a scenario (started on first use); a run that kills
    servers starts its own with `own_server()`."""

    def __init__(self, rnd: random.Random, workdir: Path, shared: dict, short: bool = False):
        self.rnd = rnd
        self.short = short  # the CI version: a scenario may do less per run
        self.dir = workdir
        self.procs: list[subprocess.Popen] = []
        self.killed: set[int] = set()
        self._shared = shared

    # -- processes -----------------------------------------------------------------------

    def warehouse(self) -> str:
        return self._shared.setdefault("warehouse", str(self._mkdir(self.dir.parent / "warehouse")))

    def server(self) -> ServerProcess:
        if "server" not in self._shared:
            self._shared["server"] = ServerProcess(self.warehouse(), *self._shared.get("server_args", ()),
                                                   stderr=subprocess.DEVNULL)
        return self._shared["server"]

    def own_server(self, *extra: str, warehouse: str | None = None, port: int | None = None) -> ServerProcess:
        args = list(extra)
        if port is not None:
            args = ["--port", str(port), *args]  # the later --port wins over ServerProcess's --port 0
        proc = ServerProcess(warehouse or self.warehouse(), *args, stderr=subprocess.DEVNULL)
        self.procs.append(proc.proc)
        return proc

    def python(self, *args: str, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=None) -> subprocess.Popen:
        proc = zygote.popen([sys.executable, *args], env=child_env(), cwd=ROOT, text=True,
                            stdout=stdout, stderr=stderr, stdin=stdin)
        self.procs.append(proc)
        return proc

    def started(self, proc: subprocess.Popen, what: str, first: str = "sent") -> None:
        """Wait for `proc`'s first stdout line, which must start with `first`; otherwise a wrong
        error naming the line, the exit code and the end of stderr (the process is killed first if
        it still runs, so reading its stderr cannot block)."""
        line = proc.stdout.readline()
        if line.startswith(first):
            return
        if proc.poll() is None:
            self.kill(proc)
        code = proc.wait(HANG_S)
        raise wrong_error(f"{what} did not start: first line {line[:200]!r}, exit code {code}, "
                          f"stderr {proc.stderr.read()[-300:]!r}")

    def kill(self, proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to a process of this run; a SIGKILL/SIGTERM'd process's death is not a crash."""
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.killed.add(proc.pid)
        if proc.poll() is None:
            os.kill(proc.pid, sig)

    def exited(self, proc: subprocess.Popen, what: str, timeout: float = HANG_S) -> int:
        """Wait for `proc` to exit; a hang if it takes over `timeout` s."""
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise hang(f"{what} still running {timeout:.0f} s after the fault") from None

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = HANG_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise hang(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.02)

    def fault(self, proc: subprocess.Popen, how: str, low: float, high: float) -> None:
        """`sigkill`: SIGKILL `proc` at a random moment in [low, high) s; `sigstop`: SIGSTOP it
        then, after a random pause, SIGKILL it. Any other `how` is a fault of the process's own."""
        if how not in ("sigkill", "sigstop"):
            return
        self.sleep_random(low, high)
        if how == "sigstop":
            self.kill(proc, signal.SIGSTOP)
            self.sleep_random(0.2, 1.0)
        self.kill(proc)

    def sleep_random(self, low: float, high: float) -> float:
        """The fault's moment: a random pause in [low, high) seconds."""
        pause = self.rnd.uniform(low, high)
        time.sleep(pause)
        return pause

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.killed.add(proc.pid)
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    @staticmethod
    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    @staticmethod
    def _mkdir(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        return path


def server_crash(ctx: Context, shared: dict) -> str | None:
    """A sentence if a server of this run died without being killed by it."""
    procs = [p for p in ctx.procs if p.pid not in ctx.killed and p.args[:3] == [sys.executable, "-m", "flight_cli"]
             and "serve" in p.args]
    if "server" in shared:
        procs.append(shared["server"].proc)
    dead = [p for p in procs if p.poll() is not None]
    return f"the server (pid {dead[0].pid}) exited with {dead[0].returncode}" if dead else None


def run_scenario(sc: Scenario, runs: int, seed: int, root: Path, short: bool = False, log=print) -> list[Run]:
    """`runs` runs of one scenario, each with its own random moment; the shared server stopped after."""
    shared: dict = {}
    results: list[Run] = []
    base = root / f"{sc.group}-{sc.name}".replace(" ", "_")
    try:
        for i in range(runs):
            ctx = Context(random.Random(f"{seed}-{sc.name}-{i}"), Context._mkdir(base / f"run-{i}"), shared, short)
            start = time.monotonic()
            try:
                result = sc.fn(ctx) or Run()
            except Verdict as v:
                result = Run(v.outcome, str(v))
            except Exception as e:  # noqa: BLE001 - the harness reports what it did not expect, and goes on
                result = Run("wrong_error", f"unexpected {type(e).__name__}: {e} | "
                                            f"{traceback.format_exc(limit=3).splitlines()[-3:]}")
            finally:
                ctx.stop_all()
            crashed = server_crash(ctx, shared)
            if crashed:
                result = Run("crash", f"{crashed}; the run said: {result.outcome} {result.detail}", result.lost,
                             result.duplicated, result.redelivered)
                shared.pop("server", None)
            result.seconds = time.monotonic() - start
            results.append(result)
            if result.outcome != "ok" or result.lost or result.duplicated or os.environ.get("CHAOS_VERBOSE"):
                log(f"  {sc.group}/{sc.name} run {i}: {result.outcome} lost={result.lost} "
                    f"duplicated={result.duplicated} {result.detail[:300]}")
    finally:
        if "server" in shared:
            shared["server"].stop()
        shutil.rmtree(base, ignore_errors=True)
    return results


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="flight-paimon-chaos-"))
