"""structlog setup, called only by entry points (flight_cli, scripts); modules just get_logger()."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def no_color() -> bool:
    """https://no-color.org: NO_COLOR set and not empty turns colour off in every output."""
    return os.environ.get("NO_COLOR", "") != ""


def configure(level: str = "info") -> None:
    """JSON lines when stderr is not a TTY, console lines (coloured unless NO_COLOR) when it is; all
    on stderr."""
    renderer = (
        structlog.dev.ConsoleRenderer(colors=not no_color()) if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
