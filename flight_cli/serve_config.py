"""`flight_cli serve --config FILE`: serve's settings from a TOML file, as servers take them.

Every serve flag is a key: its name without the leading `--` (`metrics-port = 9464`; `_` for `-`
works too), its value as TOML writes it (a number, a string such as "64MiB" or "1 min", true for
`insecure`, a list for `advertise`, a table for `warehouse-option`). A flag given on the command
line wins over its key; `warehouse-option` merges, the flag winning for its KEY. A key that is no
flag, or a value the flag would refuse, is one line naming the file and the key ("did you mean").

The values go through the flags' own argparse types and choices: one definition of each setting.
argparse only: nothing here imports pyarrow or the server.
"""

from __future__ import annotations

import argparse
import difflib
import tomllib

from flight_cli.args import CliError

_UNSET = object()
MERGED = {"warehouse_option"}  # the file's KEY=VALUE pairs and the flags' merge (the flag wins per KEY)


def settings(serve: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """serve's keys (its long flags without `--`) and their actions; `--config` and `--help` are none."""
    out = {}
    for action in serve._actions:  # argparse has no public list of a parser's actions
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in ("help", "config"):
            out[longs[0][2:]] = action
    return out


def given(argv: list[str]) -> set[str]:
    """The dests the command line itself sets (a second parse, with every default a marker)."""
    from flight_cli.parser import build_parser

    probe = build_parser()
    for parser in (probe, probe.command_parsers["serve"]):
        for action in parser._actions:
            if action.default is not argparse.SUPPRESS:  # an append flag appends to its default: None
                action.default = None if isinstance(action, argparse._AppendAction) else _UNSET
    return {dest for dest, value in vars(probe.parse_args(argv)).items() if value is not _UNSET and value is not None}


def _flatten(table: dict, prefix: str = "") -> list[tuple[str, object]]:
    """`s3.endpoint = "..."` under [warehouse-option] is TOML's nested table {s3: {endpoint: ...}}."""
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append((prefix + key, value))
    return out


def _text(value) -> str:
    """A scalar as a flag would spell it (TOML's true is Paimon's `true`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ValueError(f"{value!r} is not a string, number or boolean")


_NUMBERS = {int: "a whole number", float: "a number"}


def _convert(action: argparse.Action, value: str):
    try:
        converted = action.type(value) if action.type is not None else value
    except ValueError:
        if action.type not in _NUMBERS:
            raise
        raise ValueError(f"{value!r} is not {_NUMBERS[action.type]}") from None
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"not one of {', '.join(map(str, action.choices))}")
    return converted


def value_of(key: str, action: argparse.Action, value):
    """The file's value as the flag's parsed value; ValueError (or argparse's type error) saying why not."""
    if action.nargs == 0:  # a switch (--insecure)
        if not isinstance(value, bool):
            raise ValueError(f"{value!r} is not true or false")
        return value
    if isinstance(action, argparse._AppendAction):
        if action.dest in MERGED and isinstance(value, dict):
            return [(k, _text(v)) for k, v in _flatten(value)]
        items = value if isinstance(value, list) else [value]
        return [_convert(action, _text(item)) for item in items]
    if isinstance(value, bool) and action.type is not None:
        raise ValueError(f"{value!r} is not a {getattr(action.type, '__name__', 'value')}")
    if isinstance(value, float) and action.type is int:
        raise ValueError(f"{value!r} is not a whole number")
    if isinstance(value, (list, dict)):
        raise ValueError(f"{value!r} is a {type(value).__name__}; {key} takes one value")
    return _convert(action, _text(value))


def load(path: str, serve: argparse.ArgumentParser) -> dict[str, object]:
    """The file's settings by dest, converted as the flags convert them; CliError naming the file
    and the key for anything the flags would not take."""
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except OSError as e:
        raise CliError(f"cannot read --config {path!r}: {e.strerror}.") from None
    except tomllib.TOMLDecodeError as e:
        raise CliError(f"--config {path!r} is not TOML: {e}.") from None
    known = settings(serve)
    out = {}
    for raw, value in document.items():
        key = raw.replace("_", "-")
        action = known.get(key)
        if action is None:
            near = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise CliError(f"{path}: unknown key {raw!r}; {hint}the keys are serve's flags without the "
                           "leading -- (flight_cli serve --help).")
        try:
            out[action.dest] = value_of(key, action, value)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
            raise CliError(f"{path}: {raw} = {value!r}: {e}.".replace("..", ".")) from None
    return out


def apply(args: argparse.Namespace, argv: list[str], serve: argparse.ArgumentParser) -> None:
    """Put the file's settings into `args` where the command line did not set them."""
    from_file = load(args.config, serve)
    flags = given(argv)
    for dest, value in from_file.items():
        if dest in MERGED and dest in flags:
            setattr(args, dest, value + list(getattr(args, dest)))
        elif dest not in flags:
            setattr(args, dest, value)
