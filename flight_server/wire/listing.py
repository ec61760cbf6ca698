"""ListFlights' criteria: a name prefix (UTF-8 bytes; empty: every table), or one page of the tables
as a JSON object `{"prefix", "after", "limit"}` (docs/protocol.md, "Listing tables").

A page is the tables in the order of their spelled names (`paimon:DB.TABLE`, `push:NAME`, as
`flight_cli list` prints them) after `after`, at most `limit` of them: the server plans only those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.values import is_int, parse_json_object

KEYS = ("prefix", "after", "limit")


@dataclass(frozen=True)
class ListQuery:
    prefix: str = ""
    after: str | None = None  # a spelled name: the page starts after it
    limit: int | None = None

    @property
    def paged(self) -> bool:
        return self.after is not None or self.limit is not None

    def criteria(self) -> bytes:
        if not self.paged:
            return self.prefix.encode()
        return json.dumps({k: v for k, v in (("prefix", self.prefix), ("after", self.after), ("limit", self.limit))
                           if v is not None}).encode()

    def page(self, spelled: list[str]) -> list[str]:
        """The names of this page, sorted."""
        chosen = sorted(n for n in spelled if self.after is None or n > self.after)
        return chosen if self.limit is None else chosen[:self.limit]


def parse(criteria: bytes) -> ListQuery:
    """A prefix, or a page: criteria that is a JSON object is a page (no table name starts with `{"`)."""
    text = criteria.decode("utf-8", "replace") if criteria else ""
    if not text.startswith('{"'):
        return ListQuery(text)
    value = parse_json_object(criteria, "list_flights criteria")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise InvalidRequest(f"list_flights criteria takes {', '.join(KEYS)}, not {unknown[0]!r}.")
    prefix, after, limit = value.get("prefix", ""), value.get("after"), value.get("limit")
    if not isinstance(prefix, str) or not (after is None or isinstance(after, str)):
        raise InvalidRequest(f"list_flights criteria: 'prefix' and 'after' are strings; got {text[:100]!r}.")
    if limit is not None and not (is_int(limit) and limit >= 0):
        raise InvalidRequest(f"list_flights criteria: 'limit' is a whole number >= 0; got {limit!r}.")
    return ListQuery(prefix, after, limit)
