"""The retry loops, each a tenacity policy: what is retried, how often or until when, and what is
raised at the end (a sink's calls; pypaimon's EARLIEST hint read again; a Spark stream's first
full scan chosen again). Real failing calls that count their attempts; no server, no timing asserts."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pyarrow.flight as flight
import pytest

from flight_server.paimon import compat
from producers.paimon_sink import retrying
from producers.sink import SinkError
from spark_reader.flight_io import SourceError
from spark_reader.options import parse
from spark_reader.stream_paimon import _PROTECT_ATTEMPTS, PaimonStreamReader

pytestmark = pytest.mark.timeout(60)


class Failing:
    """A call that raises the given errors in turn, then returns `result`; it counts its calls."""

    def __init__(self, *errors: BaseException, result=None):
        self.errors, self.result, self.calls = list(errors), result, 0

    def __call__(self, *args):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def test_a_sink_call_is_made_again_while_the_server_is_away_then_returns_its_result():
    call = Failing(flight.FlightUnavailableError("connection refused"), flight.FlightCancelledError("shutting down"),
                   OSError("Flight returned unavailable error, with message: x. Detail: Unavailable"), result="schema")
    assert retrying("open sink 'orders'", 30, call) == "schema" and call.calls == 4


def test_a_sink_calls_answer_is_raised_at_once_not_retried():
    denied = flight.FlightUnauthorizedError("no write grant")
    call = Failing(denied, result="never")
    with pytest.raises(flight.FlightUnauthorizedError) as e:
        retrying("open sink 'orders'", 30, call)
    assert e.value is denied and call.calls == 1


def test_a_sink_call_gives_up_at_its_deadline_naming_what_it_could_not_do():
    errors = [flight.FlightUnavailableError(f"refused {i}") for i in range(100)]
    call = Failing(*errors)
    with pytest.raises(SinkError, match=r"^Could not reconnect sink 'orders' within 0.2 s: refused \d+") as e:
        retrying("reconnect sink 'orders'", 0.2, call)
    assert 2 <= call.calls < 100 and e.value.__cause__ is errors[call.calls - 1]  # the last error, chained
    lost = ConnectionResetError("the stream broke")
    with pytest.raises(SinkError) as e:
        retrying("reconnect sink 'orders'", 0.0, Failing(flight.FlightUnavailableError("refused")), cause=lost)
    assert e.value.__cause__ is lost  # a reconnect says what broke the stream in the first place


class Snapshots:
    """A snapshot manager whose EARLIEST hint reads fail with `errors` first; its directory is real."""

    def __init__(self, directory, *errors: BaseException, earliest: int | None = 4):
        self.read = Failing(*errors, result=SimpleNamespace(id=earliest) if earliest is not None else None)
        self.snapshot_dir, self.file_io = str(directory), self

    def get_latest_snapshot(self):
        return SimpleNamespace(id=9)

    def try_get_earliest_snapshot(self):
        return self.read()

    def exists(self, path: str) -> bool:  # the file_io's two calls compat makes, over the real directory
        return os.path.isdir(path)

    def list_status(self, path: str):
        return [SimpleNamespace(path=f"{path}/{name}") for name in os.listdir(path)]


def test_the_earliest_hint_is_read_again_while_it_names_an_expired_snapshot_then_the_directory_is_listed(tmp_path):
    for name in ("snapshot-6", "snapshot-7", "EARLIEST", "LATEST"):
        (tmp_path / name).write_text("{}")
    racing = Snapshots(tmp_path, *[FileNotFoundError("snapshot-3")] * 3)
    assert compat.earliest_snapshot_id(racing) == 4 and racing.read.calls == 4
    expiring = Snapshots(tmp_path, *[FileNotFoundError("snapshot-3")] * 100)
    assert compat.earliest_snapshot_id(expiring) == 6 and expiring.read.calls == 100  # then it lists
    torn = Snapshots(tmp_path, ValueError("torn hint"))
    assert compat.earliest_snapshot_id(torn) == 6 and torn.read.calls == 1  # not retried: listed at once
    assert compat.earliest_snapshot_id(Snapshots(tmp_path, earliest=None)) == 6


def _stream(admit, record):
    """A Paimon stream of a consumer: its first batch's full scan, chosen by `admit`, kept by `record`."""
    opts = parse({"uri": "grpc://localhost:1", "table": "db.t", "consumer-id": "job1"})
    stream = SimpleNamespace(opts=opts, _admit=admit, _record=record)
    stream._protect_once = lambda: PaimonStreamReader._protect_once(stream)
    return stream


def test_a_first_full_scan_whose_snapshot_expires_before_it_is_kept_is_chosen_again():
    expired = SourceError("Paimon table 'db.t': snapshot 3 expired")
    choose, record = Failing(result=5), Failing(expired, expired)
    assert PaimonStreamReader._protected_full_scan(_stream(choose, record)) == 5
    assert choose.calls == record.calls == 3
    other = SourceError("Paimon table 'db.t' does not exist")
    record = Failing(other)
    with pytest.raises(SourceError) as e:
        PaimonStreamReader._protected_full_scan(_stream(Failing(result=5), record))
    assert e.value is other and record.calls == 1
    choose = Failing(expired)  # choosing's own errors are not retried, "expired" or not
    with pytest.raises(SourceError) as e:
        PaimonStreamReader._protected_full_scan(_stream(choose, Failing()))
    assert e.value is expired and choose.calls == 1
    record = Failing(*[expired] * _PROTECT_ATTEMPTS)
    with pytest.raises(SourceError, match=f"expired {_PROTECT_ATTEMPTS} times before its consumer 'job1' could keep "
                                          "it; raise snapshot.time-retained") as e:
        PaimonStreamReader._protected_full_scan(_stream(Failing(result=5), record))
    assert record.calls == _PROTECT_ATTEMPTS and e.value.__cause__ is expired
    empty = Failing(result=0)  # nothing to scan yet: nothing to keep
    assert PaimonStreamReader._protected_full_scan(_stream(empty, Failing(expired))) == 0 and empty.calls == 1
