"""structlog setup, called only by entry points (flight_cli, scripts); modules just get_logger()."""

from __future__ import annotations

import logging
import os
import sys


def no_color() -> bool:
    """https://no-color.org: NO_COLOR set and not empty turns colour off in every output."""
    return os.environ.get("NO_COLOR", "") != ""


# The client libraries log through the standard library (a library leaves configuration to the
# application): under an entry point their records are rendered as the server's are, at its level.
CLIENT_LOGGERS = ("producers", "spark_reader")


def configure(level: str = "info") -> None:
    """JSON lines when stderr is not a TTY, console lines (coloured unless NO_COLOR) when it is; all
    on stderr. Standard-library records (the client libraries', and other libraries' warnings) go
    the same way."""
    import structlog  # here: structlog imports rich's tracebacks and asyncio, a tenth of a second

    numeric = logging.getLevelName(level.upper())
    renderer = (
        structlog.dev.ConsoleRenderer(colors=not no_color()) if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    stamped = [structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True)]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            *stamped,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processor=renderer, foreign_pre_chain=[structlog.stdlib.add_logger_name, *stamped]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))  # other libraries: their warnings and errors only
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(numeric)


class _FirstRecord(logging.Handler):
    """Stands in until a record arrives, then sets up `configure` and hands the record on."""

    def __init__(self, level: str):
        super().__init__()
        self.wanted = level

    def emit(self, record: logging.LogRecord) -> None:
        configure(self.wanted)
        for handler in logging.getLogger().handlers:
            handler.handle(record)


def configure_on_first_record(level: str = "info") -> None:
    """As `configure`, done when the first record comes: a client command that logs nothing (most
    runs: client commands log through the standard library only) never imports structlog."""
    numeric = logging.getLevelName(level.upper())
    root = logging.getLogger()
    root.handlers[:] = [_FirstRecord(level)]
    root.setLevel(max(numeric, logging.WARNING))
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(numeric)
