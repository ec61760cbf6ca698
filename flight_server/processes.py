"""Worker processes of the server (the compaction rewrites, the commit workers): started with
`spawn`, never forked (gRPC's threads), each answering on its end of a pipe once it is ready."""

from __future__ import annotations

import multiprocessing
import time

POLL_S = 0.2  # a start waiting for its worker checks this often whether the server is closing
START_TIMEOUT_S = 120.0  # a worker that has not said it is ready by then is killed


class NotStarted(RuntimeError):
    """The worker died, timed out or the server closed before it said it was ready."""


def start(target, args: tuple, name: str, closed=lambda: False, timeout_s: float = START_TIMEOUT_S):
    """A daemon process running `target(conn, *args)`, once it sent its first message (ready):
    returns (the process, the server's end of the pipe)."""
    ctx = multiprocessing.get_context("spawn")  # never fork a process with gRPC's threads
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(child, *args), name=name, daemon=True)
    proc.start()
    child.close()
    deadline = time.monotonic() + timeout_s
    while not parent.poll(POLL_S):  # a server closing meanwhile does not wait for the start
        if closed() or time.monotonic() > deadline or not proc.is_alive():
            proc.kill()
            proc.join(10)
            why = ("the server is stopping" if closed() else f"it did not start in {timeout_s:.0f} s"
                   if time.monotonic() > deadline else f"it ended (exit code {proc.exitcode})")
            parent.close()
            raise NotStarted(why)
    try:
        parent.recv()
    except EOFError:
        proc.join(10)
        parent.close()
        raise NotStarted(f"it ended (exit code {proc.exitcode})") from None
    return proc, parent


def stop(proc, conn) -> None:
    """Close the pipe and end the process (killed if it still runs)."""
    if conn is not None:
        conn.close()
    if proc is not None:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
