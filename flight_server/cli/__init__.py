"""flight_cli: serve, and the client commands (`flight_cli --help` lists them all).

`main` gives the process one glibc malloc arena before anything imports pyarrow (importing
pyarrow.flight starts a thread with an arena of its own, see wire/allocator.py); importing this
package does nothing.
"""


def main(argv: list[str] | None = None) -> int:
    from flight_server.wire import allocator

    allocator.one_malloc_arena()
    from flight_server.cli.main import main as run  # imports pyarrow: after the malloc set-up

    return run(argv)
