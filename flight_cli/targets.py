"""The table names flight_cli prints and takes: `push:NAME`, `paimon:DB.TABLE` (or just `DB.TABLE`).

`list` prints each table so, and `tail` and `drop` take exactly that, so a name can be copied
from one to the other.
"""

from __future__ import annotations

from flight_cli.args import CliError
from flight_server.wire import names


def spelled(path: list[str]) -> str:
    """A list_flights descriptor path (`["push", NAME]`, `["paimon", "DB.TABLE"]`) as a target."""
    return f"{path[0]}:{'/'.join(path[1:])}" if len(path) > 1 else "/".join(path) or "?"


def parse(text: str, flag: str, bare_push: bool = False) -> tuple[str, str]:
    """(names.PUSH or names.PAIMON, name). A bare NAME without a dot is a push table only where
    `bare_push` (drop's older spelling); a bare DB.TABLE is always a Paimon table."""
    if text.startswith(names.PUSH + ":"):
        return names.PUSH, text[len(names.PUSH) + 1:]
    table = text.removeprefix(names.PAIMON + ":")
    db, dot, rest = table.partition(".")
    if db and dot and rest and "." not in rest:
        return names.PAIMON, table
    if bare_push and table == text and "." not in text:
        return names.PUSH, text
    raise CliError(f"{flag} {text!r} is neither push:NAME nor DB.TABLE (or paimon:DB.TABLE); `flight_cli list` "
                   "prints the names.")
