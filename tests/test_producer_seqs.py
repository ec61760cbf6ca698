"""Named producers' seqs (flight_server.ingest.seqs.ProducerSeqs) over a made-up snapshot history
and real record files, without a server: what a table holds of each producer survives other
writers, expiry and restarts."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pypaimon.filesystem.local_file_io import LocalFileIO

from flight_server.ingest.seqs import PROPERTY, RECORD_DIR, ProducerSeqs

pytestmark = pytest.mark.timeout(120)


class History:
    """The snapshots of one table, as pypaimon's SnapshotManager answers for them."""

    def __init__(self):
        self.snaps: dict[int, SimpleNamespace] = {}
        self.next_id = 1

    def get_latest_snapshot(self):
        return self.snaps[max(self.snaps)] if self.snaps else None

    def try_get_earliest_snapshot(self):
        return self.snaps[min(self.snaps)] if self.snaps else None

    def get_snapshot_by_id(self, sid: int):
        return self.snaps.get(sid)

    def commit(self, properties: dict | None = None) -> int:
        sid, self.next_id = self.next_id, self.next_id + 1
        self.snaps[sid] = SimpleNamespace(id=sid, time_millis=1_000 * sid, properties=properties)
        return sid

    def expire(self, through: int) -> None:
        """Expire snapshots up to `through`, keeping the latest one."""
        for sid in [s for s in self.snaps if s <= through and s != max(self.snaps)]:
            del self.snaps[sid]


class Table:
    def __init__(self, path):
        self.table_path = str(path)
        self.file_io = LocalFileIO(str(path))
        self.history = History()

    def snapshot_manager(self) -> History:
        return self.history

    def records(self) -> list[str]:
        directory = f"{self.table_path}/{RECORD_DIR}"
        return sorted(os.listdir(directory)) if self.file_io.exists(directory) else []


@pytest.fixture
def table(tmp_path):
    return Table(tmp_path / "t")


def commit_as_server(seqs: ProducerSeqs, table: Table, updates: dict[str, int]) -> int:
    """What the group committer does: refresh, commit with the merged map, then say so."""
    seqs.refresh()
    sid = table.history.commit(seqs.properties(updates))
    seqs.committed(updates, sid)
    return sid


def test_a_table_without_snapshots_holds_no_producer_and_gets_no_record_directory(table):
    seqs = ProducerSeqs(table)
    assert seqs.last_seq("p") is None and seqs.seen is None
    assert seqs.refresh() is False and seqs.checkpoint() == 0
    assert not table.file_io.exists(f"{table.table_path}/{RECORD_DIR}")


def test_a_commits_properties_carry_the_whole_map_each_producer_at_its_highest_seq(table):
    seqs = ProducerSeqs(table)
    commit_as_server(seqs, table, {"a": 5})
    assert seqs.properties({"a": 3, "b": 1}) == {PROPERTY: '{"a":5,"b":1}'}
    assert seqs.properties({"a": 9}) == {PROPERTY: '{"a":9}'}
    assert seqs.last_seq("a") == 5, "properties() changes nothing until the commit is said done"


def test_seen_follows_only_an_unbroken_history_and_refresh_reads_other_writers_maps(table):
    seqs = ProducerSeqs(table)
    assert commit_as_server(seqs, table, {"a": 1}) == 1 and seqs.seen == 1
    table.history.commit({PROPERTY: json.dumps({"x": 7})})  # another server, snapshot 2
    seqs.committed({"a": 2}, table.history.commit(seqs.properties({"a": 2})))  # ours, 3, without a refresh
    assert (seqs.seen, seqs.latest, seqs.last_seq("x")) == (1, 3, None), "2 is not read yet: seen stays"
    assert seqs.refresh() and (seqs.seen, seqs.last_seq("x"), seqs.snapshot_of("x")) == (3, 7, 2)
    assert seqs.last_seq("a") == 2 and seqs.snapshot_of("a") == 3


def test_seqs_outlive_the_snapshots_that_carried_them(table):
    seqs = ProducerSeqs(table)
    for n in range(1, 4):
        commit_as_server(seqs, table, {"a": n, f"p{n}": 10 * n})
    assert seqs.checkpoint() == 3 and len(table.records()) == 1
    for _ in range(3):
        table.history.commit()  # compactions: no map
    table.history.expire(5)
    restarted = ProducerSeqs(table)
    assert {p: restarted.last_seq(p) for p in ("a", "p1", "p2", "p3")} == {"a": 3, "p1": 10, "p2": 20, "p3": 30}
    assert restarted.snapshot_of("a") == 6, "as of the latest snapshot at a start"


def test_a_server_whose_snapshots_expired_mid_walk_reads_the_records(table):
    ours, other = ProducerSeqs(table), ProducerSeqs(table)
    commit_as_server(ours, table, {"a": 1})
    commit_as_server(other, table, {"b": 4})
    commit_as_server(other, table, {"b": 5})
    assert other.checkpoint() == 3
    table.history.commit()
    table.history.expire(3)
    assert ours.refresh() and ours.last_seq("b") == 5 and ours.last_seq("a") == 1 and ours.seen == 4


def test_without_records_a_start_takes_the_latest_map_and_records_it(table):
    table.history.commit({PROPERTY: json.dumps({"a": 1})})
    table.history.commit({PROPERTY: json.dumps({"a": 2, "b": 1})})
    table.history.commit()  # another writer's, no map: walked past
    seqs = ProducerSeqs(table)
    assert (seqs.last_seq("a"), seqs.last_seq("b"), seqs.seen) == (2, 1, 3)
    assert len(table.records()) == 1, "recorded at once: the map lived only in snapshots"


def test_a_newer_record_subsumes_the_ones_this_server_read_or_wrote(table):
    seqs = ProducerSeqs(table)
    for n in range(1, 5):
        commit_as_server(seqs, table, {"a": n})
        seqs.checkpoint()
    assert len(table.records()) == 1
    assert seqs.checkpoint() == 4 and len(table.records()) == 1, "an unchanged map writes no record"


def test_records_of_a_history_that_changed_under_them_are_ignored(table):
    seqs = ProducerSeqs(table)
    for n in range(1, 4):
        commit_as_server(seqs, table, {"a": n})
    seqs.checkpoint()
    again = Table(table.table_path)  # the table created again in place: its records stay
    again.history.commit({PROPERTY: json.dumps({"b": 1})})
    fresh = ProducerSeqs(again)
    assert fresh.last_seq("a") is None and fresh.last_seq("b") == 1
    assert len(again.records()) == 1, "the ignored record is replaced by one of the new history"


def test_a_broken_record_or_property_is_refused_naming_it(table):
    table.history.commit({PROPERTY: "{not json"})
    with pytest.raises(ValueError, match=f"snapshot 1 has a {PROPERTY} property that is not JSON"):
        ProducerSeqs(table)
    other = Table(table.table_path + "2")
    other.history.commit({PROPERTY: json.dumps({"a": 1})})
    ProducerSeqs(other)
    [name] = other.records()
    other.file_io.write_file(f"{other.table_path}/{RECORD_DIR}/{name}", '{"seqs": {}}', overwrite=True)
    with pytest.raises(ValueError, match=f"the producer record .*{name} is not a valid record"):
        ProducerSeqs(other)


# A history of commits by two servers and by writers that carry no map, checkpoints, expiry as far
# as the records cover, and restarts: each server knows each producer's highest committed seq.
step = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from([0, 1]), st.dictionaries(st.sampled_from("abc"),
                                                                          st.integers(0, 50), max_size=2)),
    st.tuples(st.just("other_writer")), st.tuples(st.just("checkpoint"), st.sampled_from([0, 1])),
    st.tuples(st.just("expire")), st.tuples(st.just("restart"), st.sampled_from([0, 1])))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(step, max_size=25))
def test_every_server_knows_each_producers_highest_committed_seq_whatever_happened(tmp_path_factory, steps):
    table = Table(tmp_path_factory.mktemp("t"))
    servers = [ProducerSeqs(table), ProducerSeqs(table)]
    highest: dict[str, int] = {}
    covered = 0
    for kind, *args in steps:
        if kind == "commit":
            commit_as_server(servers[args[0]], table, args[1])
            for p, s in args[1].items():
                highest[p] = max(s, highest.get(p, s))
        elif kind == "other_writer":
            table.history.commit()
        elif kind == "checkpoint":
            covered = max(covered, servers[args[0]].checkpoint())
        elif kind == "expire":
            table.history.expire(covered)  # expiry never runs ahead of the records
        else:
            servers[args[0]] = ProducerSeqs(table)
    for seqs in servers:
        seqs.refresh()
        assert {p: seqs.last_seq(p) for p in highest} == highest
    assert {p: ProducerSeqs(table).last_seq(p) for p in highest} == highest
