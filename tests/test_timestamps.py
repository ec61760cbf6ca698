"""One reader of a point in time (flight_server.wire.units.parse_timestamp_ms) for the CLI's --timestamp
and --older-than, the Spark options scan.timestamp-millis and scan.timestamp, and the actions'
`older_than`: epoch ms, Paimon's 'yyyy-MM-dd HH:mm:ss' in local time, ISO 8601; each caller's error
names its option."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flight_cli.args import CliError, instant_ms
from flight_server.actions import older_than_ms
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.units import parse_timestamp_ms
from spark_reader.options import OptionError, parse

pytestmark = pytest.mark.timeout(60)

LONG_MAX = (1 << 63) - 1
UTC = UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Whole milliseconds from 1970 until the year 9998 (local time then stays within datetime's range).
MOMENTS = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 31)).map(
    lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
OFFSETS = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))


def test_each_form_paimon_takes_is_the_same_instant():
    utc_noon = 1795521600000  # 2026-11-24T12:00:00Z
    assert parse_timestamp_ms("1795521600000") == parse_timestamp_ms(1795521600000) == utc_noon
    assert parse_timestamp_ms(" 1795521600000\n") == utc_noon
    assert parse_timestamp_ms("2026-11-24T12:00:00Z") == parse_timestamp_ms("2026-11-24 12:00:00+00:00") == utc_noon
    assert parse_timestamp_ms("2026-11-24T14:00:00.000+02:00") == utc_noon
    assert parse_timestamp_ms("2026-11-24T12:00:00.123Z") == utc_noon + 123
    local_noon = round(datetime(2026, 11, 24, 12).timestamp() * 1000)  # Paimon's form: this machine's local time
    assert parse_timestamp_ms("2026-11-24 12:00:00") == parse_timestamp_ms("2026-11-24T12:00:00") == local_noon
    assert parse_timestamp_ms("2026-11-24") == round(datetime(2026, 11, 24).timestamp() * 1000)
    assert parse_timestamp_ms("0") == 0 and parse_timestamp_ms(str(LONG_MAX)) == LONG_MAX


def test_a_duration_with_its_unit_is_that_long_ago_only_where_a_now_is_given():
    now = 1_800_000_000_000
    assert parse_timestamp_ms("7d", now_ms=now) == now - 7 * 86_400_000
    assert parse_timestamp_ms(" 1 h ", now_ms=now) == parse_timestamp_ms("60min", now_ms=now) == now - 3_600_000
    assert parse_timestamp_ms("1764000000000", now_ms=now) == 1764000000000  # a bare number is still epoch ms
    with pytest.raises(ValueError, match="'7 parsecs' is not a duration .*unit 'parsecs'"):
        parse_timestamp_ms("7 parsecs", now_ms=now)
    with pytest.raises(ValueError, match="'7d' is not epoch ms"):  # the server and Spark have no "now" of the user's
        parse_timestamp_ms("7d")


@pytest.mark.parametrize("value, why", [
    ("yesterday", ""), ("", ""), ("2026-13-01 00:00:00", ""), ("12 apples", ""),
    ("-1", "from 1970-01-01T00:00:00Z on"), (-1, "from 1970-01-01T00:00:00Z on"),
    ("1969-12-31T23:59:59.999Z", "from 1970-01-01T00:00:00Z on"), (str(LONG_MAX + 1), "signed 64-bit"),
    ("9" * 5000, "signed 64-bit"), (True, "it is a bool"), (1.5, "it is a float"), (None, "it is a NoneType"),
])
def test_what_is_not_a_point_in_time_is_one_error_naming_it_and_the_forms(value, why):
    with pytest.raises(ValueError) as e:
        parse_timestamp_ms(value)
    said = str(e.value)
    assert said.startswith(f"{value!r} is not epoch ms (1764000000000), a local time such as '2026-11-24 12:00:00' "
                           "or ISO 8601 such as '2026-11-24T12:00:00Z'") and why in said


@given(st.integers(0, LONG_MAX), st.sampled_from(["", " ", "\t"]))
def test_any_epoch_millis_is_itself(millis, pad):
    assert parse_timestamp_ms(f"{pad}{millis}{pad}") == parse_timestamp_ms(millis) == millis


@given(MOMENTS, OFFSETS, st.sampled_from(["T", " "]))
def test_any_iso_time_with_an_offset_is_its_exact_millisecond(moment, offset, sep):
    aware = moment.replace(tzinfo=offset)
    assert parse_timestamp_ms(aware.isoformat(sep=sep)) == (aware - EPOCH) // timedelta(milliseconds=1)
    if offset == UTC:
        assert parse_timestamp_ms(aware.isoformat(sep=sep).replace("+00:00", "Z")) == parse_timestamp_ms(
            aware.isoformat(sep=sep))


@given(MOMENTS, st.sampled_from(["seconds", "milliseconds"]))
def test_any_local_time_is_the_instant_this_machine_gives_it(moment, spec):
    text = moment.isoformat(sep=" ", timespec=spec)  # 'yyyy-MM-dd HH:mm:ss[.SSS]', as Paimon's scan.timestamp
    expected = datetime.fromisoformat(text).timestamp() * 1000
    assert parse_timestamp_ms(text) == round(expected)


@given(st.text(max_size=40), st.sampled_from([None, 1_800_000_000_000]))
def test_any_text_is_a_time_or_one_value_error_naming_it(text, now):
    try:
        millis = parse_timestamp_ms(text, now_ms=now)
    except ValueError as e:
        assert repr(text) in str(e) and "\n" not in str(e).replace(repr(text), "")
    else:
        assert isinstance(millis, int) and (now is not None or 0 <= millis <= LONG_MAX)


def test_each_caller_names_its_option():
    with pytest.raises(CliError, match=r"^--older-than 'last week' is not epoch ms .* or a duration ago such as 1h"):
        instant_ms("last week", "--older-than")
    assert instant_ms(None, "--timestamp") is None and instant_ms("2026-11-24T12:00:00Z", "--timestamp") == 1795521600000
    with pytest.raises(InvalidRequest, match="^Action 'expire_snapshots': 'older_than' must be epoch milliseconds or "
                                             "a timestamp: 'last week' is not epoch ms"):
        older_than_ms("last week", "expire_snapshots")
    assert older_than_ms("2026-11-24 14:00:00+02:00", "remove_orphan_files") == older_than_ms(1795521600000, "x")
    base = {"uri": "grpc://localhost:1", "table": "db.t"}
    for key in ("scan.timestamp-millis", "scan.timestamp"):
        with pytest.raises(OptionError, match=f"^Option '{key}': 'noon' is not epoch ms"):
            parse({**base, key: "noon"})


def test_spark_takes_paimons_scan_timestamp_as_a_start_from_that_time():
    base = {"uri": "grpc://localhost:1", "table": "db.t"}
    by_text = parse({**base, "scan.timestamp": "2026-11-24T12:00:00Z"})
    by_millis = parse({**base, "scan.timestamp-millis": "1795521600000"})
    assert by_text == by_millis and by_text.scan_mode == "from-timestamp" and by_text.timestamp_millis == 1795521600000
    with pytest.raises(OptionError, match="'scan.timestamp-millis' and 'scan.timestamp' conflict"):
        parse({**base, "scan.timestamp": "2026-11-24 12:00:00", "scan.timestamp-millis": "1"})
    with pytest.raises(OptionError, match="goes with scan.mode 'from-timestamp', not 'latest'"):
        parse({**base, "scan.timestamp": "2026-11-24 12:00:00", "scan.mode": "latest"})
