"""The test run's servers and producers, forked from a process that has already imported them.

A `flight_cli serve` spends most of its 1.5-2 CPU s of start importing (pypaimon's catalog imports
pyarrow.dataset, pandas and polars), a producer most of its 0.9; a suite starts several hundred
of them. So each test process starts one zygote: a child Python that imports those modules once,
starts no Python thread, and forks a process for each `python -m flight_cli serve ...` or `python -m
PROGRAM ...` (PROGRAMS) the tests start. Each fork is a process of its own, as `subprocess.Popen`
would start it: it runs the module as `__main__` with the argv, environment, working directory,
session and standard streams it was given; signals, exit codes, pipes and /proc are its own. Only
the interpreter's start and the imports are shared.

`popen(argv, ...)` and `run(argv, ...)` are the tests' way in: a `ForkedProcess` (the part of
`subprocess.Popen` that tests use: pid, stdin/stdout/stderr, poll, wait, send_signal, kill,
terminate, communicate, returncode) when FLIGHT_PAIMON_TEST_ZYGOTE=1 (the suite's conftest sets
it) and the command is one of those; `subprocess`'s own otherwise. The demo and the benchmarks
start their processes the plain way.

The zygote reaps its children and reports each exit code to the test process over the socket it
takes requests on. It ends when the test process closes that socket (or dies).
"""

from __future__ import annotations

import atexit
import io
import itertools
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = "FLIGHT_PAIMON_TEST_ZYGOTE"
MAX_MESSAGE = 1 << 20
START_TIMEOUT_S = 120.0
# The test run's producer and consumer programs, started by the dozen in the fault tests: they import
# pyarrow.flight and this repo's client, which the zygote has imported.
PROGRAMS = frozenset({"chaos.producer", "chaos.consumer", "producers.examples.counter", "producers.examples.events",
                      "producers.raw_grpc.producer", "tests.crashing_producer"})
# What `flight_cli serve` and those programs import before they do anything (compat imports pypaimon,
# and pypaimon its read path: pyarrow.dataset, pandas, polars); `python -X importtime -m ...` lists them.
PRELOAD = ("producers", "producers.raw_grpc.stubs", "producers.raw_grpc.rows", "flight_cli.main", "flight_cli.serve",
           "flight_cli.logs", "flight_cli.sd_notify", "flight_server.auth", "flight_server.paimon.compat",
           "flight_server.server")


def popen(argv: list[str], *, stdin=None, stdout=None, stderr=None, env: dict | None = None, cwd=None,
          text: bool = False, start_new_session: bool = False):
    """`subprocess.Popen(argv, ...)` with these arguments, forked from the zygote where it can be."""
    if not _forkable(argv, env):
        return subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd, text=text,
                                start_new_session=start_new_session)
    return _zygote().start(argv, stdin=stdin, stdout=stdout, stderr=stderr, env=env, cwd=cwd, text=text,
                           start_new_session=start_new_session)


def run(argv: list[str], *, input=None, capture_output: bool = False, text: bool = False,  # noqa: A002
        timeout: float | None = None, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, ...)` with these arguments, forked from the zygote where it can be."""
    if not _forkable(argv, env):
        return subprocess.run(argv, input=input, capture_output=capture_output, text=text, timeout=timeout,
                              env=env, cwd=cwd)
    pipe = subprocess.PIPE if capture_output else None
    proc = popen(argv, stdin=None if input is None else subprocess.PIPE, stdout=pipe, stderr=pipe, env=env,
                 cwd=cwd, text=text)
    try:
        out, err = proc.communicate(input, timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _forkable(argv: list[str], env: dict | None) -> bool:
    from flight_cli.parser import command_in  # argparse only

    if os.environ.get(ENV) != "1" or argv[:2] != [sys.executable, "-m"] or len(argv) < 3:
        return False
    # flight_cli only for `serve`: a client command's process is one without numpy and pyarrow's extras
    # (flight_cli's main), which the zygote has imported.
    if not (argv[2] in PROGRAMS or argv[2] == "flight_cli" and command_in(argv[3:]) == "serve"):
        return False
    # Variables the interpreter reads at its start (other than the path, which the zygote has) cannot
    # differ from the zygote's: it started once.
    env = os.environ if env is None else env
    return all(env.get(k) == os.environ.get(k) for k in {*env, *os.environ}
               if k.startswith("PYTHON") and k not in ("PYTHONPATH", "PYTHONUNBUFFERED"))


_lock = threading.Lock()
_the_zygote: Zygote | None = None


def _zygote() -> Zygote:
    global _the_zygote
    with _lock:
        if _the_zygote is None or _the_zygote.dead is not None:
            _the_zygote = Zygote()
        return _the_zygote


class ZygoteDied(RuntimeError):
    """The zygote ended: the exit codes of the processes it forked are no longer known."""


class Zygote:
    """The test process's side: starts the zygote, sends it starts, collects its children's exits."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.zygote", str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours
        self.dead: str | None = None
        self.codes: dict[int, int] = {}  # fork number -> exit code (pids are reused: 32768 of them here)
        self.changed = threading.Condition()
        self.started: list[tuple[int, int]] = []  # (pid, fork number) of the forks not yet handed out
        self.send_lock = threading.Lock()
        self.sock.settimeout(START_TIMEOUT_S)  # its imports, on a loaded machine
        try:
            ready = self.sock.recv(MAX_MESSAGE)
        except TimeoutError:
            ready = b""
        self.sock.settimeout(None)
        if json.loads(ready or b"{}").get("ready") is not True:
            self.proc.kill()
            raise ZygoteDied(f"the test zygote did not start (exit code {self.proc.wait(60)})")
        threading.Thread(target=self._read, name="test-zygote-reader", daemon=True).start()
        atexit.register(self.close)

    def start(self, argv, *, stdin, stdout, stderr, env, cwd, text, start_new_session) -> ForkedProcess:
        fds, ours = _child_fds(stdin, stdout, stderr)
        request = {"argv": argv, "env": dict(os.environ if env is None else env), "cwd": str(cwd or os.getcwd()),
                   "new_session": start_new_session}
        try:
            with self.send_lock, self.changed:
                socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
                while not self.started and self.dead is None:
                    self.changed.wait()
                if self.dead is not None:
                    raise ZygoteDied(self.dead)
                pid, number = self.started.pop(0)
        except BaseException:
            for fd in ours:
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return ForkedProcess(self, pid, number, argv, *(None if fd is None else _wrap(fd, mode, text)
                                                 for fd, mode in zip(ours, ("w", "r", "r"))))

    def _read(self) -> None:
        why = "the test zygote closed its socket"
        try:
            while message := self.sock.recv(MAX_MESSAGE):
                m = json.loads(message)
                with self.changed:
                    if "started" in m:
                        self.started.append((m["started"], m["number"]))
                    else:
                        self.codes[m["exited"]] = m["code"]
                    self.changed.notify_all()
        except OSError as e:
            why = f"the test zygote's socket failed: {e}"
        with self.changed:
            self.dead = why
            self.changed.notify_all()

    def wait(self, number: int, timeout: float | None) -> int | None:
        """Fork `number`'s exit code; None if it has not ended within `timeout` s."""
        with self.changed:
            self.changed.wait_for(lambda: number in self.codes or self.dead is not None, timeout)
            if number in self.codes:
                return self.codes[number]
            if self.dead is not None:
                raise ZygoteDied(f"{self.dead}: the exit of its fork {number} is not known")
            return None

    def close(self) -> None:
        """End the zygote (the processes it forked run on, as a Popen's children do)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread's recv, and the zygote's
        except OSError:
            pass  # already shut: the zygote had ended
        self.sock.close()
        self.proc.wait(60)


def _child_fds(stdin, stdout, stderr):
    """The child's fds 0-2 (to send; closed here once sent) and the test process's ends of its pipes."""
    fds: list[int] = []
    ours: list[int | None] = []
    for i, spec in enumerate((stdin, stdout, stderr)):
        if spec == subprocess.PIPE:
            r, w = os.pipe()
            fds.append(r if i == 0 else w)
            ours.append(w if i == 0 else r)
            continue
        ours.append(None)
        if spec is None:
            fds.append(os.dup(i))
        elif spec == subprocess.DEVNULL:
            fds.append(os.open(os.devnull, os.O_RDWR))
        elif spec == subprocess.STDOUT and i == 2:
            fds.append(os.dup(fds[1]))
        else:
            fds.append(os.dup(spec if isinstance(spec, int) else spec.fileno()))
    return fds, ours


def _wrap(fd: int, mode: str, text: bool):
    return open(fd, mode) if text else open(fd, mode + "b")


class ForkedProcess:
    """What tests use of `subprocess.Popen`, for a process the zygote forked."""

    def __init__(self, zygote: Zygote, pid: int, number: int, args, stdin, stdout, stderr):
        self.zygote, self.pid, self.number, self.args = zygote, pid, number, args
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.wait(self.number, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.wait(self.number, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reported reaped by the zygote (its pid free for the system to reuse)
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass  # reaped, its exit not reported yet: as Popen.send_signal does (bpo-40550)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, input=None, timeout: float | None = None):  # noqa: A002 (Popen's name)
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        out: dict[str, object] = {}
        readers = [threading.Thread(target=lambda n=name, f=f: out.__setitem__(n, f.read()), daemon=True)
                   for name, f in (("stdout", self.stdout), ("stderr", self.stderr)) if f is not None]
        for t in readers:
            t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        for t in readers:  # to the pipes' end (a process the fork started may hold them), as Popen does
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        return out.get("stdout"), out.get("stderr")

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *exc) -> None:
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                f.close()
        self.wait()


# The zygote's side.

def _serve(sock: socket.socket):
    """Fork a child per request and report each child's exit; returns (in the child only) its request."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears of exits
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    forks: dict[int, int] = {}  # pid -> fork number, for the forks not yet reaped
    numbers = itertools.count()
    sock.send(json.dumps({"ready": True}).encode())
    while True:
        for key, _ in selector.select():
            if key.fileobj is wake_r:
                os.read(wake_r, 4096)
                _reap(sock, forks)
                continue
            message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
            if not message:
                return None  # the test process is gone
            pid = os.fork()
            if pid == 0:
                selector.close()
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_r, wake_w):
                    os.close(fd)
                sock.close()
                return json.loads(message), fds
            for fd in fds:
                os.close(fd)
            forks[pid] = next(numbers)
            sock.send(json.dumps({"started": pid, "number": forks[pid]}).encode())


def _reap(sock: socket.socket, forks: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sock.send(json.dumps({"exited": forks.pop(pid), "code": os.waitstatus_to_exitcode(status)}).encode())


def _become(request: dict, fds: list[int]) -> None:
    """In the fork: take the request's streams, session, directory, environment and argv."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    if request["new_session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                                   line_buffering=os.isatty(1), write_through=unbuffered)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                                   errors="backslashreplace", line_buffering=True,
                                                   write_through=unbuffered)
    sys.argv = ["-m", *request["argv"][3:]]  # as `python -m MODULE ...` has them (runpy sets argv[0])


def main(fd: int) -> None:
    import atexit
    import importlib
    import runpy

    import flight_cli

    # polars registers an exit function that waits for its spill cleaner, a thread polars starts at its
    # import: a fork has no such thread, so at its exit it would wait for ever. The forks drop it.
    register, polars_at_exit = atexit.register, []
    atexit.register = lambda f, *a, **k: (polars_at_exit.append(f), register(f, *a, **k))[1]
    importlib.import_module("polars")
    atexit.register = register
    entry = flight_cli.main
    for name in PRELOAD:
        importlib.import_module(name)
    # Importing the submodule flight_cli.main binds it over the package's entry function of that name
    # (as a process's own `main()` does once it has started); `python -m flight_cli` calls the function.
    flight_cli.main = entry  # type: ignore[assignment]
    # No Python thread. The native ones the imports start (jemalloc's background threads of pyarrow
    # and polars, OpenBLAS's and Arrow's pools, polars' spill cleaner) are the libraries' to handle at
    # a fork (their atfork handlers), as under multiprocessing's `fork`; gRPC starts none until a
    # server or channel is made.
    if threading.active_count() != 1:
        raise SystemExit(f"the test zygote has Python threads after its imports: {threading.enumerate()}")
    child = _serve(socket.socket(fileno=fd))
    if child is None:
        return
    for f in polars_at_exit:
        atexit.unregister(f)
    _become(*child)
    module = child[0]["argv"][2]
    sys.modules.pop(module, None)  # a fresh `python -m` has not imported it (runpy would warn)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
