"""Sizes, durations and points in time as Paimon reads them, for table options, the server's flags,
the CLI, the Spark reader and actions' bodies (no Flight imports; the CLI imports it at start-up).

`parse_bytes` is Java Paimon's `MemorySize.parseBytes`, `parse_duration_ms` its
`TimeUtils.parseDuration(text).toMillis()` (paimon-api, org.apache.paimon.options/.utils): a
whole number (ASCII digits, no sign, no fraction), optional whitespace, then a unit, any case.

- Sizes are 1024-based whatever the spelling: b | bytes, k | kb | kibibytes, m | mb | mebibytes,
  g | gb | gibibytes, t | tb | tebibytes; no unit is bytes. `64mb` = `64 MB` = 64 MiB = 67,108,864.
- Durations: d | day | days, h | hour | hours, min | m | minute | minutes, s | sec | secs | second |
  seconds, ms | milli | millis | millisecond | milliseconds, µs | micro | micros | microsecond |
  microseconds, ns | nano | nanos | nanosecond | nanoseconds; no unit is milliseconds. Below a
  millisecond the result is rounded down, as Java's Duration.toMillis.
- A value past a signed 64-bit count (of bytes, or of milliseconds) is refused, as Java does.

`parse_flag_bytes` (the server's byte flags: --max-memory, --commit-bytes, --capacity-bytes) takes
the same, and also what those flags took before one grammar: the spellings KiB, MiB, GiB, TiB and a
fraction (`1.5GiB`, rounded down to a whole byte); the size must be positive.

`parse_timestamp_ms` is the one reader of a point in time (`flight_cli tail --timestamp`,
`--older-than`, the Spark options scan.timestamp-millis and scan.timestamp, the actions'
`older_than`): epoch milliseconds (ASCII digits, 0 or more, as scan.timestamp-millis), or a time
as Paimon's scan.timestamp and procedures take it, `yyyy-MM-dd HH:mm:ss[.fff]` or `yyyy-MM-dd` in
local time, or ISO 8601 (`2026-11-24T12:00:00Z`, `...+02:00`; anything `datetime.fromisoformat`
reads). With `now_ms` (the CLI), a duration with its unit in the grammar above (`7d`, `1 h`) is that
long before `now_ms`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_JAVA_TRIM = "".join(map(chr, range(33)))  # String.trim(): every char up to U+0020
_LONG_MAX = (1 << 63) - 1
_BYTES = {unit: 1 << (10 * power) for power, units in enumerate(
    [("b", "bytes"), ("k", "kb", "kibibytes"), ("m", "mb", "mebibytes"), ("g", "gb", "gibibytes"),
     ("t", "tb", "tebibytes")]) for unit in units}
_NANOS = {unit: nanos for nanos, units in [
    (86_400 * 10**9, ("d", "day", "days")), (3_600 * 10**9, ("h", "hour", "hours")),
    (60 * 10**9, ("min", "m", "minute", "minutes")), (10**9, ("s", "sec", "secs", "second", "seconds")),
    (10**6, ("ms", "milli", "millis", "millisecond", "milliseconds")),
    (10**3, ("\u00b5s", "micro", "micros", "microsecond", "microseconds")),  # µs: the micro sign, as Java
    (1, ("ns", "nano", "nanos", "nanosecond", "nanoseconds"))] for unit in units}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_RELATIVE = re.compile(r"[0-9]+\s*[^\W\d_]+")  # `7d`, `1 h`, `30min`: a duration (ago); a date has no letters


@dataclass(frozen=True)
class _Grammar:
    what: str
    units: dict[str, int]  # a unit's worth in base units
    known: str  # the units, said in an error
    example: str
    default: int = 1  # no unit: this many base units
    per: int = 1  # base units in one of the result's
    fractions: bool = False

    def parse(self, text: str) -> int:
        trimmed = text.strip(_JAVA_TRIM)
        match = re.match(r"([0-9]+)(?:\.([0-9]+))?" if self.fractions else r"([0-9]+)()", trimmed)
        if not match:
            raise self.invalid(text, "it does not start with a whole number" if trimmed else "it is empty")
        whole, fraction = match.group(1), match.group(2) or ""
        unit = trimmed[match.end():].strip(_JAVA_TRIM).lower()
        if unit[:1] in (".", ","):
            raise self.invalid(text, "a whole number is needed, then the unit")
        if unit and unit not in self.units:
            raise self.invalid(text, f"unit {unit!r} is not one of {self.known}")
        value = int(whole + fraction) * self.units.get(unit, self.default) // (self.per * 10 ** len(fraction))
        if int(whole) > _LONG_MAX or value > _LONG_MAX:
            raise self.invalid(text, "it is past a signed 64-bit count")
        return value

    def invalid(self, text: str, why: str) -> ValueError:
        return ValueError(f"{text!r} is not a {self.what} ({why}); write e.g. {self.example}")


_SIZE = _Grammar("size", _BYTES, "b, k/kb, m/mb, g/gb, t/tb (1024-based)", "256mb (= 256 MiB), 1gb or 1048576")
_DURATION = _Grammar("duration", _NANOS, "d, h, min/m, s, ms, \u00b5s, ns, or day(s), hour(s), minute(s), "
                     "sec(s), second(s), milli(s), ...", "1 h, 30min, 10 s or 100ms", default=10**6, per=10**6)
_FLAG_SIZE = _Grammar("size", {**_BYTES, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40},
                      "b, k/kb/KiB, m/mb/MiB, g/gb/GiB, t/tb/TiB (all 1024-based)", "64MiB, 2gb or 1048576",
                      fractions=True)


def parse_bytes(text: str) -> int:
    """A size in bytes, as Paimon's MemorySize: `64mb` = 64 MiB; ValueError naming `text` otherwise."""
    return _SIZE.parse(text)


def parse_duration_ms(text: str) -> int:
    """A duration in milliseconds, as Paimon's TimeUtils.parseDuration: `1 h` = 3,600,000."""
    return _DURATION.parse(text)


def parse_flag_bytes(text: str) -> int:
    """A positive size for a server flag: Paimon's grammar, plus KiB..TiB and fractions (`1.5GiB`)."""
    value = _FLAG_SIZE.parse(text)
    if value <= 0:
        raise _FLAG_SIZE.invalid(text, "it must be at least one byte")
    return value


def parse_timestamp_ms(value: int | str, now_ms: int | None = None) -> int:
    """A point in time as epoch milliseconds: `1764000000000`, `'2026-11-24 12:00:00'` (local time),
    `'2026-11-24T12:00:00Z'`; with `now_ms`, also `'7d'` (7 days before `now_ms`). A ValueError
    naming `value` and the forms otherwise; the caller says which option it was."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _not_a_time(value, now_ms, f"it is a {type(value).__name__}")
    text = value.strip() if isinstance(value, str) else str(value)
    if re.fullmatch(r"-?[0-9]+", text):
        millis = int(text) if len(text) <= 20 else -1  # past 64 bits either way (and int() refuses 4,300 digits)
    elif now_ms is not None and _RELATIVE.fullmatch(text):
        return now_ms - parse_duration_ms(str(value))  # a str (an int has no unit); a bad unit: the duration grammar's own error
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise _not_a_time(value, now_ms, "") from None
        try:  # naive: local time, as Paimon's scan.timestamp and procedures (that day's offset)
            millis = ((moment if moment.tzinfo else moment.astimezone()) - _EPOCH) // _MS
        except (ValueError, OverflowError, OSError):  # a naive year 1 or 9999 the platform cannot place
            millis = -1
    if not 0 <= millis <= _LONG_MAX:
        raise _not_a_time(value, now_ms, "it must be from 1970-01-01T00:00:00Z on, within a signed 64-bit count "
                          "of milliseconds")
    return millis


def _not_a_time(value: object, now_ms: int | None, why: str) -> ValueError:
    ago = ", or a duration ago such as 1h or 7d" if now_ms is not None else ""
    return ValueError(f"{value!r} is not epoch ms (1764000000000), a local time such as '2026-11-24 12:00:00' "
                      f"or ISO 8601 such as '2026-11-24T12:00:00Z'{ago}" + (f" ({why})" if why else ""))
