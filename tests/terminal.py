"""A child process on a pseudo-terminal (its controlling terminal), and what a terminal shows of it."""

from __future__ import annotations

import os
import pty
import re
import select
import signal

from tests.conftest import ROOT, child_env, wait_for

SGR = re.compile(rb"\x1b\[([0-9;]*)m")


class Terminal:
    """`argv` with stdin, stdout and stderr on one pty of `columns` columns; `screen` is every
    byte it wrote. Stop it with `stop()` (SIGTERM, then SIGKILL)."""

    def __init__(self, argv: list[str], env: dict | None = None, columns: int = 100):
        environment = {**child_env(), "COLUMNS": str(columns), "TERM": "xterm-256color", **(env or {})}
        environment = {k: v for k, v in environment.items() if v is not None}  # None: unset it
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            try:
                os.chdir(ROOT)
                os.execve(argv[0], argv, environment)
            finally:
                os._exit(127)
        self.screen = b""
        self.status: int | None = None

    def read_until(self, done, what: str, timeout: float = 20) -> None:
        """Read until `done(screen)` (or a bytes pattern appears); fail naming `what` after `timeout`."""
        check = (lambda s: done in s) if isinstance(done, bytes) else done

        def shown() -> bool:
            if not check(self.screen) and not self._read(0.1):
                assert check(self.screen), f"the child ended before {what}: {self.screen[-800:]!r}"
            return check(self.screen)

        wait_for(shown, lambda: f"{what}: {self.screen[-800:]!r}", timeout)

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 20) -> int:
        """The exit code, reading its output meanwhile (a full pty would block it)."""

        def exited() -> bool:
            if self.status is None:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = os.waitstatus_to_exitcode(status)
                    self._drain()
                else:
                    self._read(0.05)
            return self.status is not None

        wait_for(exited, lambda: f"the child to exit: {self.screen[-800:]!r}", timeout)
        return self.status

    def _read(self, wait_s: float) -> bool:
        """Add to `screen` what the child wrote, waiting up to `wait_s` for some; False once it has
        gone (EIO on the master)."""
        if select.select([self.fd], [], [], wait_s)[0]:
            try:
                self.screen += os.read(self.fd, 65536)
            except OSError:
                return False
        return True

    def _drain(self) -> None:
        """Add what an exited child wrote that is still in the pty (flight_cli ends at once after
        its last line: the line may not have been read yet)."""
        while select.select([self.fd], [], [], 0)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return  # EIO: all of it was read
            if not data:
                return
            self.screen += data

    def stop(self) -> None:
        if self.status is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.wait(10)
            except AssertionError:
                os.kill(self.pid, signal.SIGKILL)
                self.wait(10)
        os.close(self.fd)


def colours(screen: bytes) -> list[bytes]:
    """The SGR sequences in `screen` that set a colour (foreground or background; bold is a style)."""
    return [m for m in SGR.findall(screen)
            if any(p and (30 <= int(p) <= 49 or 90 <= int(p) <= 107) for p in m.split(b";"))]


def visible_lines(screen: bytes) -> list[str]:
    """The lines as a terminal leaves them: what follows each line's last carriage return (which
    returns the cursor to the line's start, and ESC[K erases the rest), without styles."""
    lines = []
    for line in screen.split(b"\r\n"):
        shown = line.split(b"\r")[-1].replace(b"\x1b[K", b"")
        lines.append(SGR.sub(b"", shown).decode("utf-8", "replace"))
    return lines
