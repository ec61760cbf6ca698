"""Who may do what: principals, their bearer tokens and their grants per table (no Flight imports).

`serve --auth FILE` loads an `AuthConfig`:

    {"principals": [{"name": "etl", "token_sha256": "<hex of sha256(token)>",
                     "grants": [{"tables": "orders*", "allow": ["read", "write"]}]}]}

(`"token"` in clear text is accepted too; auth_file.py holds the schema). Table patterns are shell-style globs over push table
names and Paimon `DB.TABLE` names. Three grants, each independent of the others (an action's grant is its `Action.grant` in
wire/actions.py; health needs none):
- `read`: get_flight_info, get_schema, do_get, list_flights; stats, offsets, latest_snapshot,
  find_snapshot, consumer_progress
- `write`: do_put; commit (a push table's offsets), consumer_commit, producer_state, commit_staged,
  abort_staged
- `admin`: register, drop, fail, create_table, compact, expire_snapshots, remove_orphan_files,
  create_tag, delete_tag; with `admin` on `"*"`, the HTTP `/metrics` (its series name every table)

The server authenticates every call once (the middleware in `middleware.py`) and asks an
`Access` before it touches a table; this module is the one place a grant is decided. A token is
only ever hashed here: it is never stored, logged, put in an error or in a ticket.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass

from flight_server import auth_file
from flight_server.auth_file import GRANTS, AuthConfigError, token_sha256
from flight_server.wire.actions import (  # the grants, named once in the wire layer
    ADMIN,
    READ,
    WRITE,
)
from flight_server.wire.errors import PermissionDenied, Unauthenticated

__all__ = ["ADMIN", "ALLOW_ALL", "GRANTS", "READ", "WRITE", "Access", "AuthConfig", "AuthConfigError", "Grant",
           "Principal", "token_sha256"]


@dataclass(frozen=True)
class Grant:
    tables: str  # a shell-style glob
    allow: frozenset[str]


@dataclass(frozen=True)
class Principal:
    name: str
    grants: tuple[Grant, ...]

    def allows(self, grant: str, table: str) -> bool:
        return any(grant in g.allow and fnmatch.fnmatchcase(table, g.tables) for g in self.grants)

    def holds_everywhere(self, grant: str) -> bool:
        """Whether a grant on the pattern "*" gives `grant`: on every table, present and future."""
        return any(grant in g.allow and g.tables == "*" for g in self.grants)


@dataclass(frozen=True)
class Access:
    """What one call may do: its principal's grants, or everything when the server has no --auth."""

    principal: Principal | None = None

    @property
    def name(self) -> str | None:
        return self.principal.name if self.principal else None

    def allows(self, grant: str, table: str) -> bool:
        return self.principal is None or self.principal.allows(grant, table)

    def require(self, grant: str, table: str, what: str) -> None:
        """Raise PERMISSION_DENIED unless the principal holds `grant` on `table`; `what` is the
        table as a message names it ("push table 'x'", "Paimon table 'db.t'")."""
        if not self.allows(grant, table):
            raise PermissionDenied(
                f"Principal {self.name!r} may not {grant} {what}: it holds no {grant!r} grant on a pattern "
                f"matching {table!r}; ask the server's operator to add one to the --auth file."
            )

    def require_ticket(self, planned_for: str | None) -> None:
        """A ticket is served only to the principal it was planned for."""
        if self.principal is not None and planned_for != self.name:
            raise PermissionDenied(
                f"This ticket was planned for another principal than {self.name!r}; plan the read with "
                "your own token (get_flight_info) and use the tickets it returns."
            )


ALLOW_ALL = Access()


class AuthConfig:
    """The principals of an --auth file, looked up by the sha256 of their token."""

    def __init__(self, principals: list[tuple[str, Principal]]):
        self._by_hash = dict(principals)

    @classmethod
    def load(cls, path: str) -> AuthConfig:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise AuthConfigError(f"cannot read --auth file {path!r}: {e.strerror}.") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise AuthConfigError(f"--auth file {path!r} is not JSON ({e}).") from None
        return cls.parse(doc, path)

    @classmethod
    def parse(cls, doc: object, path: str = "<auth>") -> AuthConfig:
        """`doc` (the file's JSON) checked against auth_file's schema; AuthConfigError naming the field."""
        checked = auth_file.validate(doc, path)
        return cls([(p.digest, Principal(p.name, tuple(Grant(g.tables, frozenset(g.allow)) for g in p.grants)))
                    for p in checked.principals])

    def authenticate(self, authorization: list | None) -> Access:
        """The Access of an `authorization` header's values (`Bearer TOKEN`)."""
        values = [v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in authorization or []]
        bearer = [v[7:].strip() for v in values if v[:7].lower() == "bearer "]
        if not bearer:
            raise Unauthenticated(
                "This server requires a bearer token (header 'authorization: Bearer TOKEN'): pass "
                "flight_cli --token or FLIGHT_PAIMON_TOKEN, Client(token=...), or Spark's option 'token'."
            )
        principal = self._by_hash.get(token_sha256(bearer[0]))
        if principal is None:
            raise Unauthenticated(
                "The bearer token is not known to this server; check the token you pass "
                "(--token, FLIGHT_PAIMON_TOKEN, Client(token=...), option 'token')."
            )
        return Access(principal)

    def metrics_scraper(self, authorization: str | None) -> Access:
        """The Access of a /metrics scrape (`Authorization: Bearer TOKEN`). Its label values name
        every table, so only a principal with `admin` on "*" may read it: UNAUTHENTICATED without a
        known token, PERMISSION_DENIED for any other principal."""
        how = ("send the header 'Authorization: Bearer TOKEN' of a principal with 'admin' on tables \"*\" "
               "(Prometheus: authorization: {credentials: TOKEN} in the scrape config).")
        if not authorization or authorization[:7].lower() != "bearer ":
            raise Unauthenticated(f"/metrics needs a bearer token: {how}")
        principal = self._by_hash.get(token_sha256(authorization[7:].strip()))
        if principal is None:
            raise Unauthenticated(f"/metrics: the bearer token is not known to this server; {how}")
        if not principal.holds_everywhere(ADMIN):
            raise PermissionDenied(f"Principal {principal.name!r} may not read /metrics: its series name every "
                                   "table, so it needs an 'admin' grant on tables \"*\" in the --auth file.")
        return Access(principal)

    @property
    def principals(self) -> list[str]:
        return [p.name for p in self._by_hash.values()]

