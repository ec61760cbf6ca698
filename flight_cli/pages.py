"""Which tables `list` and `stats` print: a prefix or a shell pattern, and a page of them by name
(`--limit N`, `--after NAME`)."""

from __future__ import annotations

import fnmatch
import sys

from flight_server.wire import names

GLOB = "*?["


def is_pattern(text: str) -> bool:
    return any(c in text for c in GLOB)


def server_prefix(pattern: str) -> str:
    """What the server can filter by: the text before the pattern's first wildcard, without a kind."""
    head = pattern
    for c in GLOB:
        head = head.split(c, 1)[0]
    for kind in (names.PUSH, names.PAIMON):
        if head.startswith(kind + ":"):
            return head[len(kind) + 1:]
        if f"{kind}:".startswith(head):  # 'pu*', 'paimon*': a kind, not yet a name
            return ""
    return head


def matches(pattern: str, kind: str, name: str) -> bool:
    """A pattern with a kind (`push:or*`) matches that kind's names; one without, either kind's."""
    if pattern.startswith((names.PUSH + ":", names.PAIMON + ":")):
        return fnmatch.fnmatchcase(f"{kind}:{name}", pattern)
    return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(f"{kind}:{name}", pattern)


def page(spelled: list[str], limit: int | None, after: str | None, command: str,
         total: bool = True) -> list[str]:
    """The names (as printed) of one page, sorted; stderr says how to ask for the next one (and,
    where `spelled` holds every table after `after`, how many there are)."""
    names_ = sorted(n for n in spelled if after is None or n > after)
    if limit is None or len(names_) <= limit:
        return names_
    shown = names_[:limit]
    of = f" of {len(names_)}" if total else ""
    print(f"flight_cli {command}: {limit}{of} tables shown; the next page: --after {shown[-1]}", file=sys.stderr)
    return shown
