"""The --auth file: the example in docs/protocol.md loads, and every mistake is one clear sentence."""

from __future__ import annotations

import json
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flight_server.auth import AuthConfig, AuthConfigError, token_sha256
from flight_server.wire.errors import PermissionDenied, Unauthenticated
from tests import zygote
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


T16 = "0123456789abcdef"
FIELD_MISTAKES = [  # the field's path, and the words that say what to write there
    ({"principals": [{"name": "a", "token": T16, "grants": []}, 7]}, "principals[1]", "principal 1 is not a JSON object"),
    ({"principals": [{"name": " ", "token": T16, "grants": []}]}, "principals[0].name", 'non-empty string "name"'),
    ({"principals": [{"name": "a", "token": 1234567890123456, "grants": []}]}, "principals[0].token",
     "at least 16 characters"),
    ({"principals": [{"name": "a", "token": T16, "token_sha256": "a" * 64, "grants": []}]}, "principals[0]",
     "exactly one of"),
    ({"principals": [{"name": "a", "token": T16}]}, "principals[0].grants", 'needs "grants": [{"tables"'),
    ({"principals": [{"name": "a", "token": T16, "grants": {}}]}, "principals[0].grants", "needs \"grants\""),
    ({"principals": [{"name": "a", "token": T16, "grants": [{"tables": "", "allow": ["read"]}]}]},
     "principals[0].grants[0].tables", "must be a non-empty glob"),
    ({"principals": [{"name": "a", "token": T16, "grants": [{"tables": "x", "allow": "read"}]}]},
     "principals[0].grants[0].allow", "\"allow\" must list some of read, write, admin; got 'read'"),
    ({"principals": [{"name": "a", "token": T16, "grants": [{"tables": "x", "allow": ["read", "drop"]}]}]},
     "principals[0].grants[0].allow[1]", "got ['read', 'drop']"),
    ({"principals": [{"name": "a", "token": T16, "grants": [{"tables": "x", "allow": []}]}]},
     "principals[0].grants[0].allow", "got []"),
    ({"principals": [{"name": "a", "token": T16, "grants": [{"tables": "x"}]}]},
     "principals[0].grants[0].allow", '"allow" is missing'),
    ({"principals": [{"name": "a", "token": T16, "grants": [{"tables": "x", "allow": ["read"], "deny": []}]}]},
     "principals[0].grants[0].deny", "'deny' is not one of its keys"),
    ({"principals": [{"name": "a", "token": T16, "grants": []}, {"name": "b", "token": "x" * 16, "gratns": []}]},
     "principals[1].gratns", "principal 'b' has an unknown key 'gratns'"),
]


@pytest.mark.parametrize("doc, path, says", FIELD_MISTAKES)
def test_a_malformed_field_is_named_by_its_path_with_what_to_write(doc, path, says):
    with pytest.raises(AuthConfigError) as e:
        AuthConfig.parse(doc, "auth.json")
    message = str(e.value)
    assert message.startswith("--auth file 'auth.json', ") and says in message, message
    assert message.endswith(f" (at {path}).") and "\n" not in message, message


def test_other_top_level_keys_are_ignored_and_hex_digests_in_any_case_are_one_token():
    upper = token_sha256("etl-token-0123456789").upper()
    config = AuthConfig.parse({"comment": "kept as before", "principals": [{"name": "etl", "token_sha256": upper,
                                                                             "grants": []}]})
    assert config.authenticate(["Bearer etl-token-0123456789"]).name == "etl"
    with pytest.raises(AuthConfigError, match=r"principal 'b' has the same token .*\(at principals\[1\]\)"):
        AuthConfig.parse({"principals": [{"name": "a", "token_sha256": upper, "grants": []},
                                         {"name": "b", "token_sha256": upper.lower(), "grants": []}]})


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                    max_leaves=12)
KEYS = st.sampled_from(["name", "token", "token_sha256", "grants", "tables", "allow", "principals", "read", "x"])
ENTRY = st.dictionaries(KEYS, JSON | st.sampled_from([T16, "a" * 64, ["read"], [{"tables": "*", "allow": ["read"]}]]),
                        max_size=5)


@given(st.one_of(JSON, st.fixed_dictionaries({"principals": st.lists(ENTRY, max_size=3)})))
def test_any_json_is_a_config_or_one_line_naming_the_file(doc):
    try:
        AuthConfig.parse(doc, "auth.json")
    except AuthConfigError as e:
        assert str(e).startswith("--auth file 'auth.json'") and "\n" not in str(e), str(e)


def test_serve_with_a_bad_auth_file_exits_with_the_reason(tmp_path):
    bad = tmp_path / "auth.json"
    bad.write_text("{not json")
    for path, message in ((bad, "is not JSON"), (tmp_path / "missing.json", "cannot read --auth file")):
        out = zygote.run([sys.executable, "-m", "flight_cli", "serve", "--port", "0", "--auth", str(path),
                              "--warehouse", str(tmp_path / "w")], capture_output=True, text=True, timeout=60,
                             env=child_env(), cwd=ROOT)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
