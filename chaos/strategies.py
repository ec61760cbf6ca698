"""Hypothesis strategies for every JSON body, command, path and ticket field of the protocol, and
what a refusal must never contain; shared by tests/test_wire_hypothesis.py and chaos/abuse.py."""

from __future__ import annotations

import json
import re

from hypothesis import strategies as st

from flight_server.wire import names

LEAKS = re.compile(r"Traceback|File \"|\.py\b|site-packages|/work/|/tmp/|/root/")
KEYS = list(names.PAIMON_KEYS) + ["name", "schema", "capacity", "partitions", "writers", "partition", "message",
                                  "offsets", "push", "start", "end", "end_marker", "idle_timeout_s",
                                  "next_snapshot", "kind", "request", "mode", "uid", "group", "bucket"]
TEXT = st.one_of(st.sampled_from(["orders", "db.orders", "db.missing", "t", "", "0", "latest", "snapshot:2",
                                  "\ud800", "../x", "a/b", "db..t", "x" * 300, "=", "in", "id"]),
                 st.text(max_size=12))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT,
                    st.sampled_from([2**63, -2**63 - 1, 10**30, 1e308]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)), max_leaves=15)
OBJECTS = st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6)


COLUMNS = st.sampled_from(["id", "name", "amount", "region", "nope", ""])
CONDITIONS = st.lists(st.one_of(
    st.tuples(COLUMNS, st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "in", "is_null", "is_not_null", "~"]),
              st.one_of(SCALARS, st.lists(SCALARS, max_size=3))).map(list),
    st.tuples(COLUMNS, st.sampled_from(["is_null", "in"])).map(list), JSON), max_size=3)
PAIMON_COMMANDS = st.fixed_dictionaries({names.TABLE: st.one_of(st.just("db.orders"), TEXT)}, optional={
    names.SNAPSHOT: SCALARS, names.FROM_SNAPSHOT: SCALARS, names.TO_SNAPSHOT: SCALARS,
    names.FOLLOW: st.one_of(st.booleans(), SCALARS), names.START: TEXT, names.CONSUMER_ID: TEXT,
    names.POLL_INTERVAL_MS: SCALARS, names.COLUMNS: st.one_of(st.lists(COLUMNS, max_size=3), JSON),
    names.FILTER: st.one_of(CONDITIONS, JSON), names.BUCKETS: st.one_of(st.lists(st.integers(-1, 3), max_size=3), JSON),
    names.CHANGELOG: st.one_of(st.booleans(), SCALARS), "extra": SCALARS,
})


def encode(value) -> bytes:
    return json.dumps(value).encode("utf-8", "surrogatepass")
