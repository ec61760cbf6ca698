"""docs/protocol.md cannot drift: every JSON example in it is parsed and sent to a real server."""

from __future__ import annotations

import json
import re

import pyarrow.flight as flight

from flight_server.wire.actions import ACTIONS, Message
from producers.examples.counter import SCHEMA, make_batch
from tests.conftest import ROOT
from tests.paimon_tables import Warehouse, rows

EXAMPLE = re.compile(r"<!-- example: (\w+) (\w+) -->\s*```json\n(.*?)\n```", re.S)


def examples() -> list[tuple[str, str, dict]]:
    text = (ROOT / "docs" / "protocol.md").read_text()
    return [(kind, name, json.loads(body)) for kind, name, body in EXAMPLE.findall(text)]


def test_every_json_example_in_the_protocol_doc_is_accepted_by_a_real_server(client, warehouse):
    found = examples()
    assert len(found) == 22, [(k, n) for k, n, _ in found]  # a new example must be counted here
    # What the examples name: push table "orders" with two batches, Paimon table db.orders with
    # two snapshots, and (created by the register example itself) push table "clicks".
    wh = Warehouse(warehouse)
    wh.commit(wh.create("orders", buckets=2), rows(0, 10))
    wh.commit("db.orders", rows(10, 10))
    with client.register_streaming_table("orders", SCHEMA) as sink:
        sink.write(make_batch(0, 5))
        sink.write(make_batch(5, 5))
    for kind, name, body in found:
        if kind == "action":
            result = client.action(name, body)
            assert isinstance(result, dict), (name, result)
            # The result's JSON is its type's, key for key and in order: read as the type and written back.
            typed = ACTIONS[name].result.from_json(result, name)
            assert json.dumps(typed.to_json()) == json.dumps(result), (name, result)
            if name == "offsets":  # the two batches of "orders" are held: nothing was committed yet
                # (both appended after the example's timestamp_ms 0: the first is at_timestamp)
                assert result == {"partitions": {"0": {"committed": 0, "next_seq": 2, "state": "eof", "at_timestamp": 0}}}
                assert client.offsets(body["name"], body["timestamp_ms"]) == typed.partitions
            if name == "register":
                assert result == {"name": body["name"], "partitions": body["partitions"], "capacity": body["capacity"],
                                  "capacity_bytes": body["capacity_bytes"], "writers": body["writers"]}
        elif "push" in body and "producer" in body:  # a named producer's do_put into a push partition, sent twice: taken once
            client.register(body["push"], SCHEMA)
            for _ in range(2):
                client.push_named(body["push"], body["partition"], body["producer"], [(0, make_batch(0, 5))])
            assert client.stats(body["push"]).push[body["push"]].partitions["0"].next_seq == 1
        elif "write" in body:  # a durable write's do_put target: one batch into db.orders, acked once committed
            sink = client.paimon_sink(body["write"], producer=body["producer"])
            sink.write(rows(100, 3))
            sink.close()
            assert sink.acked == 1 and client.producer_state(body["write"], body["producer"]) == 0
        else:
            fi = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(body)),
                                               options=client.options())
            assert fi.endpoints, (name, body)
            if name == "replay":  # read the range, so that the commit example that follows may pass it
                got = client.flight.do_get(fi.endpoints[0].ticket, options=client.options()).read_all()
                assert got.column("id").to_pylist() == list(range(10))
            elif not body.get("follow"):
                total = sum(client.flight.do_get(ep.ticket, options=client.options()).read_all().num_rows
                            for ep in fi.endpoints)
                assert total > 0, body


def test_the_action_table_is_the_wire_layers():
    """docs/protocol.md's action table is made from flight_server.wire.actions.ACTIONS, which the
    server dispatches, checks grants and answers list_actions from; every result is a type there."""
    from flight_server.wire.actions import doc_table

    assert doc_table() in (ROOT / "docs" / "protocol.md").read_text()
    assert all(issubclass(a.result, Message) for a in ACTIONS.values()), "an action answers a free dict"
