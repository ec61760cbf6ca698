"""Sizes and durations as Paimon reads them, for table options and the server's flags (no Flight imports).

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
