"""flight_cli's argument types and help formatting: argparse only, so `--version` and `--help`
import nothing heavy (no pyarrow, pypaimon or the server)."""

from __future__ import annotations

import argparse
import os
import time

from flight_server.wire.units import (
    parse_duration_ms,
    parse_flag_bytes,
    parse_timestamp_ms,
)

DEFAULT_URI = "grpc://127.0.0.1:8815"
URI_SCHEMES = ("grpc://", "grpc+tcp://", "grpc+tls://", "grpc+unix://")


class CliError(Exception):
    """A usage mistake (a bad flag or value, an unreadable file, a port taken): one line on stderr,
    exit code 2, no traceback."""


# The exit codes, one meaning each (documented in `flight_cli --help`).
OK, FAILED, USAGE, NOT_FOUND, INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = (f"exit codes: {OK} done; {FAILED} the server refused or failed the call, or cannot be reached; "
              f"{USAGE} a usage error (a bad flag, name or value: nothing was done); {NOT_FOUND} not found (no such "
              f"table, snapshot or tag); {INTERRUPTED} interrupted by Ctrl-C (tail ends {OK}: Ctrl-C is how it ends).")


class HELP(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's "(default: X)" only where the help does not state the default itself and there is
    one to state: each default shows once, and never as "(default: None)". Lines of a description
    or epilog that start with two spaces (examples) are kept as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text or "unset:" in text:
            return text
        return super()._get_help_string(action)

    def _fill_text(self, text, width, indent):
        return "\n".join(line if line.startswith("  ") or not line else super(HELP, self)._fill_text(line, width, indent)
                         for line in text.splitlines())


def examples(*lines: str) -> str:
    """An epilog of example command lines, kept as written."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def size(text: str) -> int:
    """A byte flag: Paimon's size grammar (64mb = 64MiB = 64m, all 1024-based), as flight_server.wire.units."""
    try:
        return parse_flag_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def warehouse(text: str) -> str:
    """A local warehouse as an absolute path: pypaimon-rust cannot plan or read a relative one
    (pypaimon then falls back to its slower Python scanner on every read). URIs stay as given."""
    return text if "://" in text else os.path.abspath(os.path.expanduser(text))


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; pass 0 or more")
    return value


def duration_ms(text: str) -> int:
    """A positive duration flag in milliseconds, in Paimon's grammar (`1 d`, `12h`, `30min`)."""
    try:
        value = parse_duration_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration")
    return value


def duration_or_off_ms(text: str) -> int:
    """A duration flag in milliseconds where 0 turns the thing off (Paimon's grammar: `10 min`, `0`;
    a negative one is no duration)."""
    try:
        return parse_duration_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def instant_ms(text: str | None, flag: str) -> int | None:
    """A point-in-time flag (`--timestamp`, `--older-than`) as epoch ms, read here in this machine's
    local time: epoch ms, '2026-11-24 12:00:00', ISO 8601, or a duration with its unit (`7d`, `1h`:
    Paimon's grammar) as that long ago; a usage error naming the flag otherwise."""
    if text is None:
        return None
    try:
        return parse_timestamp_ms(text, now_ms=int(time.time() * 1000))
    except ValueError as e:
        raise CliError(f"{flag} {e}") from None


def option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. file.format=parquet")
    return key, value


def choice(value: str, choices, flag: str) -> str:
    """`value` if it is one of `choices`, else a usage error that suggests the nearest ("did you mean")."""
    if value in choices:
        return value
    import difflib  # only for the mistake: every command's start-up imports this module

    near = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    raise CliError(f"{flag} {value!r} is not one of {', '.join(choices)}" + (f"; did you mean {near[0]!r}?" if near else "."))


def check_uri(text: str) -> str:
    """A server URI with a scheme gRPC takes (a bare HOST:PORT, or http://, is one line saying which)."""
    if "://" not in text:
        raise CliError(f"--uri {text!r} has no scheme; use grpc://{text} (or grpc+tls://).")
    if not text.startswith(URI_SCHEMES):
        raise CliError(f"--uri {text!r}: flight-paimon speaks gRPC, not {text.split('://', 1)[0]}://; use "
                       "grpc://HOST:PORT, or grpc+tls://HOST:PORT for a server with --tls-cert.")
    return text
