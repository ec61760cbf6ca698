"""flight_cli's entry: parse the command line, run the chosen command, and turn errors into one
line and an exit code (`flight_cli --help` lists them) in this one place.

Only the chosen command's module is imported, after parsing: `--version` and `--help` load no
pyarrow, and client commands never load pypaimon or the server.
"""

from __future__ import annotations

import importlib
import os
import sys

from flight_cli.args import FAILED, INTERRUPTED, NOT_FOUND, OK, USAGE, CliError
from flight_cli.parser import build_parser, command_in

__all__ = ["build_parser", "main"]


# What an extra brings (pyproject.toml): a command that needs one names the extra to install.
EXTRAS = {"pypaimon": "server", "pypaimon_rust": "server", "fastavro": "server", "prometheus_client": "server",
          "pydantic": "server", "pyspark": "spark"}


def _command(spec: str):
    module, _, function = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as e:
        extra = EXTRAS.get((e.name or "").partition(".")[0])
        if extra is None:
            raise
        raise CliError(f"needs the {extra} part of flight-paimon ({e.name} is not installed): "
                       f"pip install 'flight-paimon[{extra}]'") from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(command_in(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if args.version_uri is not None and not args.version:
        parser.error("--uri before a command goes with --version only: put it after the command "
                     "(flight_cli COMMAND --uri URI)")
    if args.command is None and not args.version:
        parser.error("the following arguments are required: COMMAND")
    if args.version:
        if args.version_uri is None:
            from flight_server.wire.version import VERSION

            print(f"flight_cli {VERSION}")
            return OK
        args.command, args.func, args.uri = "--version", "flight_cli.version:cmd_version", args.version_uri
    if args.command == "serve" and args.config is not None:
        from flight_cli import serve_config

        try:
            serve_config.apply(args, sys.argv[1:] if argv is None else argv, parser.command_parsers["serve"])
        except CliError as e:
            print(f"flight_cli serve: {e}", file=sys.stderr)
            return USAGE
    if args.command != "serve":
        # gRPC's C core writes a failed TLS handshake to stderr as a raw line of its own, before the
        # one line below says what failed and what to pass; GRPC_VERBOSITY=ERROR (or DEBUG) shows it.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from flight_cli import logs

    if args.command == "serve":
        logs.configure(args.log_level)
    else:  # client commands log through the standard library: structlog only once a record comes
        logs.configure_on_first_record(args.log_level)
    where = f"flight_cli {args.command}"
    try:
        status = _command(args.func)(args)
        sys.stdout.flush()  # a closed pipe raises here, not in the flush at exit (exit code 120)
        return status
    except BrokenPipeError:
        # `flight_cli list | head -1`: the reader has all it wanted, which is no error. Point stdout
        # at /dev/null so the flush at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CliError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:  # tail handles its own; one landing as it returns still ends it quietly
        return OK if args.command == "tail" else INTERRUPTED
    except Exception as e:  # noqa: BLE001 - sorted below; anything else is a bug and keeps its traceback
        code = _exit_code(e, args, where)
        if code is None:
            raise
        return code


def _exit_code(e: Exception, args, where: str) -> int | None:
    import pyarrow as pa
    import pyarrow.flight as flight

    from flight_server.wire.errors import (
        NotFound,
        Unavailable,
        connection_hint,
        error_message,
        from_flight,
    )

    if not isinstance(e, (flight.FlightError, pa.ArrowException, KeyError, ValueError)):
        return None  # a bug: it keeps its traceback
    kind = from_flight(e)  # the kind the server's status (or its code) says
    if isinstance(kind, Unavailable):
        hint, uri = connection_hint(e), getattr(args, "uri", "?")
        if hint:  # it answered, in TLS or not: the sentence says what to pass, gRPC's detail adds nothing
            print(f"{where}: cannot connect to {uri}:{hint}", file=sys.stderr)
        else:
            print(f"{where}: cannot reach a flight-paimon server at {uri}: is `flight_cli serve` running there? "
                  f"({error_message(e)})", file=sys.stderr)
        return FAILED
    print(f"{where}: {error_message(e)}", file=sys.stderr)
    if isinstance(kind, NotFound):  # the server's NOT_FOUND
        return NOT_FOUND
    if isinstance(e, flight.FlightError):  # refused or failed
        return FAILED
    return USAGE  # the server's INVALID_ARGUMENT, or a bad value here
