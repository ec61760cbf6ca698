"""flight_cli: serve, and the client commands (`flight_cli --help` lists them all).

Importing this package does nothing. `main`, the process's entry, sets the process up for the
command it runs before anything imports pyarrow, runs it (main.py), and ends a client
command's process as soon as its output is out.
"""

import os
import sys


def main(argv: list[str] | None = None) -> int:
    from flight_cli.parser import command_in  # argparse only: no pyarrow yet

    argv = sys.argv[1:] if argv is None else argv
    command = command_in(argv)
    if command in ("serve", "tail"):
        # The commands that move batches between threads for long: one glibc malloc arena, set
        # before pyarrow.flight starts a thread with an arena of its own (wire/allocator.py).
        from flight_server.wire import allocator

        allocator.one_malloc_arena()
    if command != "serve" and "numpy" not in sys.modules:
        # The client commands use no numpy (a client install has none), but where it is installed
        # `import pyarrow` imports it: 0.2-0.25 s of CPU, more than the rest of a command.
        sys.modules["numpy"] = None  # pyarrow then starts as it does without numpy
    from flight_cli.main import main as run

    status = run(argv)
    if command != "serve":
        _end_now(status)
    return status


def _end_now(status: int) -> None:
    """End a client command's process once its output is flushed. Its work is done (a tail has
    cancelled its reads): Python's teardown of what pyarrow and gRPC loaded only costs CPU, 0.02-0.03
    s of a command's 0.2 (scripts/bench_cli_startup.py). A failed flush is left to Python's exit."""
    import logging

    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        return
    os._exit(status)
