"""The --auth file's schema (pydantic), and its errors as one sentence naming the field and what to write.

The format is auth.py's (and docs/protocol.md's): `{"principals": [{"name", "token_sha256" or
"token", "grants": [{"tables", "allow"}]}]}`; other top-level keys are ignored, as they always
were. Types are strict (JSON's: `"grants": {}` is not a list, `"allow": "read"` is not a list).
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from flight_server.wire.actions import (  # the grants, named once in the wire layer
    ADMIN,
    READ,
    WRITE,
)

GRANTS = (READ, WRITE, ADMIN)
_KEYS = "keys: name, token_sha256 or token, grants"
_GRANT_SHAPE = '{"tables": "PATTERN", "allow": [...]}'


class AuthConfigError(ValueError):
    """The --auth file is unreadable or malformed; the message names the file, the entry and the field."""


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class GrantEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    tables: Annotated[str, Field(min_length=1)]  # a shell-style glob
    allow: Annotated[list[Literal[READ, WRITE, ADMIN]], Field(min_length=1)]


class PrincipalEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: Annotated[str, Field(pattern=r"\S")]  # not empty, not only spaces
    token: Annotated[str | None, Field(min_length=16)] = None
    token_sha256: Annotated[str | None, Field(pattern=r"^[0-9a-fA-F]{64}$")] = None
    grants: list[GrantEntry]

    @model_validator(mode="after")
    def _one_token(self) -> PrincipalEntry:
        if (self.token is None) == (self.token_sha256 is None):
            raise ValueError('needs exactly one of "token_sha256" (hex of sha256 of the token, preferred) or "token"')
        return self

    @property
    def digest(self) -> str:
        return token_sha256(self.token) if self.token is not None else self.token_sha256.lower()


class AuthFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    principals: Annotated[list[PrincipalEntry], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique(self) -> AuthFile:
        names, digests = set(), set()
        for i, p in enumerate(self.principals):
            if p.name in names:
                raise ValueError(f"principal {p.name!r} appears twice (again at principals[{i}]); principal names "
                                 "are unique")
            if p.digest in digests:
                raise ValueError(f"principal {p.name!r} has the same token as another principal (at principals[{i}]); "
                                 "give each its own")
            names.add(p.name)
            digests.add(p.digest)
        return self


def validate(doc, path: str) -> AuthFile:
    """`doc` (the file's JSON) as an AuthFile; AuthConfigError naming the first mistake otherwise."""
    try:
        return AuthFile.model_validate(doc)
    except ValidationError as e:
        raise AuthConfigError(_sentence(doc, _first(e.errors()), f"--auth file {path!r}")) from None


def _first(errors: list[dict]) -> dict:
    """The error to report: the first, unless an unknown key sits beside it (a misspelt key is
    both unknown and missing; its name is what the user typed)."""
    first = errors[0]
    unknown = [e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == first["loc"][:-1]]
    return unknown[0] if unknown else first


def _sentence(doc, error: dict, where: str) -> str:
    """One sentence in the words of the format: which entry, what to write, and the field's path."""
    loc = tuple(error["loc"])
    words = _words(doc, loc, error["type"], error.get("ctx") or {}, where)
    return f"{words} (at {_path(loc)})." if loc else f"{words}."


def _words(doc, loc: tuple, kind: str, ctx: dict, where: str) -> str:
    if kind == "value_error":  # a model validator's own sentence
        return f"{where}, {_entry(doc, loc[1])} {ctx['error']}" if len(loc) >= 2 else f"{where}, {ctx['error']}"
    if len(loc) <= 1:
        return f'{where} must be {{"principals": [{{"name", "token_sha256", "grants"}}, ...]}} with at least one principal'
    entry = f"{where}, {_entry(doc, loc[1])}"
    if len(loc) == 2:
        return f"{entry} is not a JSON object"
    field = loc[2]
    if kind == "extra_forbidden" and len(loc) == 3:
        return f"{entry} has an unknown key {field!r} ({_KEYS})"
    if field == "name":
        return f'{entry} needs a non-empty string "name"'
    if field == "token":
        return f'{entry}: "token" must be a string of at least 16 characters'
    if field == "token_sha256":
        return f'{entry}: "token_sha256" must be 64 hex digits (e.g. `printf %s TOKEN | sha256sum`)'
    if len(loc) == 3:  # "grants" missing or not a list
        return f'{entry} needs "grants": [{{"tables": "PATTERN", "allow": ["read", ...]}}] (an empty list grants nothing)'
    grant = f"{entry}, grant {loc[3]}"
    if len(loc) == 4:
        return f"{grant} must be {_GRANT_SHAPE}"
    if kind == "extra_forbidden":
        return f"{grant} must be {_GRANT_SHAPE}: {loc[4]!r} is not one of its keys"
    if kind == "missing":
        return f'{grant} must be {_GRANT_SHAPE}: "{loc[4]}" is missing'
    if loc[4] == "tables":
        return f'{grant}: "tables" must be a non-empty glob, e.g. "orders*" or "db.*"'
    return f'{grant}: "allow" must list some of {", ".join(GRANTS)}; got {_value(doc, loc[:5])!r}'


def _entry(doc, index: int) -> str:
    """A principal as the message names it: by its name where it has one, else by its position."""
    name = _value(doc, ("principals", index, "name"))
    return f"principal {name!r}" if isinstance(name, str) and name.strip() else f"principal {index}"


def _value(doc, loc: tuple):
    for key in loc:
        try:
            doc = doc[key]
        except (KeyError, IndexError, TypeError):
            return None
    return doc


def _path(loc: tuple) -> str:
    """`principals[0].grants[1].allow`: the field as a JSON path reads it."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in loc).lstrip(".")
