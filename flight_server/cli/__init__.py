"""flight_cli: serve | register | tail | list | stats.

The server's process gets one glibc malloc arena, set here, before anything imports pyarrow:
importing pyarrow.flight starts a thread with an arena of its own (see wire/allocator.py).
"""

from flight_server.wire import allocator

MALLOC_TUNED = allocator.one_malloc_arena()

from flight_server.cli.main import main  # noqa: E402  (after the malloc set-up above)

__all__ = ["main"]
