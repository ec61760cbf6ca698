"""One grammar for sizes and durations (flight_server.wire.units): Java Paimon's MemorySize and
TimeUtils.parseDuration, read the same by table options and by the server's byte flags."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flight_cli.main import build_parser
from flight_server.maintenance.options import MaintenanceOptions
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.units import parse_bytes, parse_duration_ms, parse_flag_bytes

pytestmark = pytest.mark.timeout(30)

MiB = 1 << 20
UNITS = {1: ("b", "bytes"), 1 << 10: ("k", "kb", "kibibytes"), MiB: ("m", "mb", "mebibytes"),
         1 << 30: ("g", "gb", "gibibytes"), 1 << 40: ("t", "tb", "tebibytes")}
DURATIONS = {86_400_000: ("d", "day", "days"), 3_600_000: ("h", "hour", "hours"),
             60_000: ("min", "m", "minute", "minutes"), 1000: ("s", "sec", "secs", "second", "seconds"),
             1: ("ms", "milli", "millis", "millisecond", "milliseconds")}


def test_mb_is_mib_as_in_paimon():
    assert parse_bytes("64MB") == parse_bytes("64mb") == parse_bytes("64 m") == 64 * 1048576
    assert parse_flag_bytes("64MiB") == parse_flag_bytes("64MB") == 64 * 1048576
    assert parse_bytes("1 gb") == parse_bytes("1G") == parse_bytes(" 1\tgibibytes ") == 1 << 30


def test_every_size_unit_in_any_case_with_or_without_a_space():
    for factor, units in UNITS.items():
        for unit in units:
            for text in (f"3{unit}", f"3 {unit}", f"3{unit.upper()}", f"  3  {unit.title()}  "):
                assert parse_bytes(text) == 3 * factor, text
                assert parse_flag_bytes(text) == 3 * factor, text


def test_a_bare_number_is_bytes_and_zero_is_a_size_but_no_flag():
    assert parse_bytes("1048576") == parse_flag_bytes("1048576") == 1048576
    assert parse_bytes("0") == parse_bytes("0 kb") == 0  # as Java: a size, if not a useful one
    assert parse_bytes("9223372036854775807") == (1 << 63) - 1
    with pytest.raises(ValueError, match="'0' is not a size .*at least one byte"):
        parse_flag_bytes("0")


@pytest.mark.parametrize("text", ["", "  ", "lots", "mb", "-1", "+1", "1.5g", "64MiB", "64 KiB", "10 pb", "1e9",
                                  "6 4mb", "64 m b", "9223372036854775808", "8388608tb", "1_000"])
def test_what_paimon_refuses_is_refused_naming_the_text_and_a_valid_value(text):
    with pytest.raises(ValueError) as e:
        parse_bytes(text)
    message = str(e.value)
    assert message.startswith(f"{text!r} is not a size (") and "e.g. 256mb" in message, message
    assert "\n" not in message


def test_flags_also_take_what_they_took_before_where_it_is_plain():
    assert parse_flag_bytes("2GiB") == 2 << 30 and parse_flag_bytes("512 KiB") == 512 << 10
    assert parse_flag_bytes("1tib") == 1 << 40
    assert parse_flag_bytes("1.5GiB") == 1536 * MiB and parse_flag_bytes("0.5 mb") == MiB // 2
    for text in ("lots", "64XB", "1e9", "-1MiB", "0.1"):
        with pytest.raises(ValueError, match=f"^'{text}' is not a size .*e.g. 64MiB"):
            parse_flag_bytes(text)


def test_every_duration_unit():
    for factor, units in DURATIONS.items():
        for unit in units:
            for text in (f"7{unit}", f"7 {unit}", f"7{unit.upper()}"):
                assert parse_duration_ms(text) == 7 * factor, text
    assert parse_duration_ms("1 h") == 3_600_000 and parse_duration_ms("30min") == 1_800_000
    assert parse_duration_ms("10 s") == 10_000 and parse_duration_ms("100 ms") == 100
    assert parse_duration_ms("1d") == 86_400_000 and parse_duration_ms("100") == 100  # no unit: ms
    # below a millisecond, rounded down as Java's Duration.toMillis
    for unit in ("\u00b5s", "micro", "micros", "microsecond", "microseconds"):
        assert parse_duration_ms(f"2999 {unit}") == 2, unit
    for unit in ("ns", "nano", "nanos", "nanosecond", "nanoseconds"):
        assert parse_duration_ms(f"2999999{unit}") == 2, unit


@pytest.mark.parametrize("text", ["", "h", "1 hr", "2 mins", "10us", "1.5h", "-1s", "1 h 30 min", "1 week",
                                  "106751991168d", "9223372036854775808ns"])
def test_durations_paimon_refuses_are_refused_naming_the_text(text):
    with pytest.raises(ValueError) as e:
        parse_duration_ms(text)
    message = str(e.value)
    assert message.startswith(f"{text!r} is not a duration (") and "e.g. 1 h" in message, message


def test_table_options_and_flags_agree():
    parser = build_parser()
    for text in ("64MB", "64 mb", "64m", "1g", "1048576", "3 kibibytes"):
        flag = parser.parse_args(["serve", "--warehouse", "w", "--max-memory", text, "--commit-bytes", text])
        option = MaintenanceOptions.of("db.t", {"target-file-size": text}, primary_key=False)
        assert flag.max_memory == flag.commit_bytes == option.target_file_size == parse_bytes(text), text
    option = MaintenanceOptions.of("db.t", {"snapshot.time-retained": "2 h", "consumer.expiration-time": "1d"},
                                   primary_key=True)
    assert option.time_retained_ms == 7_200_000 and option.consumer_expiration_ms == 86_400_000


def test_a_refused_option_or_flag_names_itself(capsys):
    with pytest.raises(InvalidRequest) as e:
        MaintenanceOptions.of("db.t", {"target-file-size": "256MiB"}, primary_key=False)
    assert "'db.t'" in str(e.value) and "'target-file-size'" in str(e.value) and "'256MiB'" in str(e.value)
    with pytest.raises(InvalidRequest, match="'snapshot.time-retained': '1 hr' is not a duration"):
        MaintenanceOptions.of("db.t", {"snapshot.time-retained": "1 hr"}, primary_key=False)
    with pytest.raises(InvalidRequest, match="'compaction.min.file-num': '0' is not an integer >= 1"):
        MaintenanceOptions.of("db.t", {"compaction.min.file-num": "0"}, primary_key=False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["register", "t", "--schema", "id:int64", "--capacity-bytes", "lots"])
    err = capsys.readouterr().err
    assert "argument --capacity-bytes: 'lots' is not a size" in err and "e.g. 64MiB" in err, err


# -- any text (Hypothesis) -------------------------------------------------------------------

LONG_MAX = (1 << 63) - 1
NANOS = {unit: ms * 10**6 for ms, units in DURATIONS.items() for unit in units}
NANOS.update({u: 1000 for u in ("\u00b5s", "micro", "micros", "microsecond", "microseconds")})
NANOS.update({u: 1 for u in ("ns", "nano", "nanos", "nanosecond", "nanoseconds")})
SIZE_UNITS = {unit: factor for factor, units in UNITS.items() for unit in units}
blank = st.text(alphabet=" \t", max_size=2)


def _cased(draw_case: list[bool], unit: str) -> str:
    return "".join(c.upper() if up else c for c, up in zip(unit, draw_case + [False] * len(unit)))


@given(n=st.integers(0, 1 << 70), unit=st.sampled_from(["", *SIZE_UNITS]), case=st.lists(st.booleans(), max_size=9),
       pad=st.tuples(blank, blank, blank))
def test_any_whole_number_of_any_size_unit_is_that_many_bytes_or_refused_past_a_long(n, unit, case, pad):
    text = f"{pad[0]}{n}{pad[1] if unit else ''}{_cased(case, unit)}{pad[2]}"
    want = n * SIZE_UNITS.get(unit, 1)
    if want > LONG_MAX:
        with pytest.raises(ValueError, match="past a signed 64-bit count"):
            parse_bytes(text)
    else:
        assert parse_bytes(text) == want


@given(n=st.integers(0, 1 << 70), unit=st.sampled_from(["", *NANOS]), pad=st.tuples(blank, blank))
def test_any_whole_number_of_any_duration_unit_is_its_milliseconds_rounded_down(n, unit, pad):
    text = f"{pad[0]}{n}{pad[1] if unit else ''}{unit}"
    want = n * NANOS[unit] // 10**6 if unit else n
    if n > LONG_MAX or want > LONG_MAX:
        with pytest.raises(ValueError, match="past a signed 64-bit count"):
            parse_duration_ms(text)
    else:
        assert parse_duration_ms(text) == want


@given(whole=st.integers(0, 1 << 20), fraction=st.text(alphabet="0123456789", min_size=1, max_size=6),
       unit=st.sampled_from(["kib", "MiB", "GiB", "tib", "mb", "k", "b"]))
def test_a_flags_fraction_is_rounded_down_to_a_whole_byte(whole, fraction, unit):
    factor = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}.get(unit.lower()) or SIZE_UNITS[unit]
    want = (whole * 10 ** len(fraction) + int(fraction)) * factor // 10 ** len(fraction)
    if want == 0:
        with pytest.raises(ValueError, match="at least one byte"):
            parse_flag_bytes(f"{whole}.{fraction}{unit}")
    else:
        assert parse_flag_bytes(f"{whole}.{fraction}{unit}") == want


@given(text=st.text(max_size=24) | st.from_regex(r"\s*[0-9]{1,22}(\.[0-9]{0,3})?\s*[a-zA-Z\u00b5]{0,12}\s*",
                                                  fullmatch=True))
def test_any_text_is_a_value_or_one_line_naming_it_never_another_error(text):
    for parse, what in ((parse_bytes, "size"), (parse_flag_bytes, "size"), (parse_duration_ms, "duration")):
        try:
            value = parse(text)
        except ValueError as e:
            assert str(e).startswith(f"{text!r} is not a {what} (") and "\n" not in str(e).replace(repr(text), "")
        else:
            assert 0 <= value <= LONG_MAX
