"""The --auth file: the example in docs/protocol.md loads, and every mistake is one clear sentence."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from flight_server.auth import AuthConfig, AuthConfigError, token_sha256
from flight_server.wire.errors import PermissionDenied, Unauthenticated
from tests.conftest import ROOT, child_env

pytestmark = pytest.mark.timeout(60)


def doc_example() -> dict:
    text = (ROOT / "docs" / "protocol.md").read_text()
    block = re.search(r"\*\*Tokens\.\*\*.*?```json\n(.*?)\n```", text, re.S).group(1)
    return json.loads(block.replace("<hex of sha256(token)>", token_sha256("etl-token-0123456789")))


def test_the_documented_example_authenticates_and_grants_as_described():
    config = AuthConfig.parse(doc_example())
    etl = config.authenticate([b"Bearer etl-token-0123456789"])
    assert etl.name == "etl" and etl.allows("write", "orders_eu") and etl.allows("read", "db.orders")
    assert not etl.allows("admin", "orders_eu") and not etl.allows("read", "db.secret")
    with pytest.raises(PermissionDenied, match="Principal 'etl' may not admin push table 'orders_eu'"):
        etl.require("admin", "orders_eu", "push table 'orders_eu'")
    ops = config.authenticate(["bearer a clear-text token of 16+ characters"])
    assert ops.allows("admin", "anything.at_all")
    with pytest.raises(Unauthenticated, match="requires a bearer token"):
        config.authenticate(None)
    with pytest.raises(Unauthenticated, match="not known"):
        config.authenticate(["Bearer nope"])


MISTAKES = [
    ({}, "must be {\"principals\""),
    ({"principals": [{"token": "0123456789abcdef", "grants": []}]}, "principal 0 needs a non-empty string \"name\""),
    ({"principals": [{"name": "a", "grants": []}]}, "principal 'a' needs exactly one of \"token_sha256\""),
    ({"principals": [{"name": "a", "token_sha256": "xyz", "grants": []}]}, "must be 64 hex digits"),
    ({"principals": [{"name": "a", "token": "short", "grants": []}]}, "at least 16 characters"),
    ({"principals": [{"name": "a", "token": "0123456789abcdef", "grants": [{"tables": "*", "allow": ["drop"]}]}]},
     "\"allow\" must list some of read, write, admin"),
    ({"principals": [{"name": "a", "token": "0123456789abcdef", "grants": [{"table": "*", "allow": ["read"]}]}]},
     "grant 0 must be {\"tables\""),
    ({"principals": [{"name": "a", "token": "0123456789abcdef", "grants": []},
                     {"name": "b", "token": "0123456789abcdef", "grants": []}]}, "same token as another principal"),
    ({"principals": [{"name": "a", "token": "0123456789abcdef", "grants": []},
                     {"name": "a", "token": "fedcba9876543210", "grants": []}]}, "appears twice"),
    ({"principals": [{"name": "a", "token": "0123456789abcdef", "grant": []}]}, "unknown key 'grant'"),
]


@pytest.mark.parametrize("doc, message", MISTAKES)
def test_a_malformed_auth_file_is_refused_naming_the_entry(doc, message):
    with pytest.raises(AuthConfigError) as e:
        AuthConfig.parse(doc, "auth.json")
    assert message in str(e.value) and "--auth file 'auth.json'" in str(e.value)


def test_serve_with_a_bad_auth_file_exits_with_the_reason(tmp_path):
    bad = tmp_path / "auth.json"
    bad.write_text("{not json")
    for path, message in ((bad, "is not JSON"), (tmp_path / "missing.json", "cannot read --auth file")):
        out = subprocess.run([sys.executable, "-m", "flight_server.cli", "serve", "--port", "0", "--auth", str(path),
                              "--warehouse", str(tmp_path / "w")], capture_output=True, text=True, timeout=60,
                             env=child_env(), cwd=ROOT)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
