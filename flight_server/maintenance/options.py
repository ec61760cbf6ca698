"""The maintenance a table asks for, read from its own Paimon options (Paimon's names, and its
grammar for sizes and durations, flight_server.wire.units: `target-file-size` 256mb is 256 MiB).

Paimon's defaults assume about one commit a minute; durable ingest commits up to ten a second, so
where that matters the server's defaults differ, and docs/protocol.md says why:
- `snapshot.num-retained.max` 1000 (Paimon: no limit, `snapshot.time-retained` 1 h decides): an
  hour at ten commits a second is 36,000 snapshots, each with its own manifest lists;
- `snapshot.expire.limit` 100 a run (Paimon: 10 a commit): expiry runs after a burst of commits;
- `consumer.expiration-time` 1 d (Paimon: never): a consumer that stopped reading would keep
  every later snapshot, and so every file, forever.
Compaction keeps Paimon's `compaction.min.file-num` (5), `compaction.max.file-num` (50) and
`target-file-size`: tiny files (below target / 16) merge by size tiers 16x apart, larger ones once,
when they add up to the target (compaction.tier_pick), so each byte is rewritten a few times, not once
per compaction. Primary-key tables keep Paimon's
merge-tree options and defaults:
`num-sorted-run.compaction-trigger` (5), `num-levels` (trigger + 1),
`compaction.max-size-amplification-percent` (200), `compaction.small-file-ratio` (0.7).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from flight_server.wire.errors import InvalidRequest
from flight_server.wire.units import parse_bytes, parse_duration_ms

CHANGELOG_RETENTION = ("changelog.num-retained.min", "changelog.num-retained.max", "changelog.time-retained")
T = TypeVar("T")  # an option's parsed value
D = TypeVar("D")  # its default


# Files from target / PART_FILES up are "part files": at that size what a file costs a read besides
# its rows (opening it, its dictionaries) is a few percent (docs/benchmarks_maintenance.md, "What
# part files cost a read").
PART_FILES = 16


@dataclass(frozen=True)
class MaintenanceOptions:
    """What the server does for one table after its commits (and what the actions default to)."""

    min_file_num: int = 5
    max_file_num: int = 50
    target_file_size: int = 256 << 20
    size_ratio_percent: int = 1
    retain_min: int = 10
    retain_max: int = 1000
    time_retained_ms: int = 3_600_000
    expire_limit: int = 100
    consumer_expiration_ms: int | None = 86_400_000
    sorted_run_trigger: int = 5  # primary-key tables: Paimon's universal compaction
    num_levels: int | None = None  # None: sorted_run_trigger + 1
    max_size_amp_percent: int = 200
    small_file_ratio: float = 0.7
    changelog_retained: tuple[str, ...] = ()  # changelog.num-retained.* / changelog.time-retained set here
    enabled: bool = True  # Paimon's `write-only`: this writer neither compacts nor expires

    @property
    def compaction_file_size(self) -> int:
        """Files smaller than this are compacted; larger ones are left alone (Paimon's
        compactionFileSize: a rewrite's files roll a little under the target, and must not be
        rewritten again to grow by a few percent)."""
        return int(self.target_file_size * self.small_file_ratio)

    @property
    def part_file_size(self) -> int:
        """Append files at least this large are compacted once, when they add up to the target
        (compaction.tier_pick): target-file-size / PART_FILES (16 MiB by default)."""
        return max(1, self.target_file_size // PART_FILES)

    @staticmethod
    def of(table_name: str, options: dict[str, str], primary_key: bool) -> MaintenanceOptions:
        d = MaintenanceOptions(target_file_size=(128 if primary_key else 256) << 20)

        def get(key: str, parse: Callable[[str], T], default: D) -> T | D:
            raw = options.get(key)
            if raw is None:
                return default
            try:
                return parse(str(raw))
            except ValueError as e:  # sizes and durations say why, in Paimon's grammar (flight_server.wire.units)
                grammar = parse in (parse_bytes, parse_duration_ms)
                why = str(e) if grammar else f"{str(raw)!r} is not {parse.__doc__}"
                raise InvalidRequest(f"Paimon table {table_name!r}: option {key!r}: {why}; fix it with "
                                     "ALTER TABLE ... SET.") from None

        out = MaintenanceOptions(
            min_file_num=get("compaction.min.file-num", _count, d.min_file_num),
            max_file_num=get("compaction.max.file-num", _count, d.max_file_num),
            target_file_size=get("target-file-size", parse_bytes, d.target_file_size),
            size_ratio_percent=get("compaction.size-ratio", _count0, d.size_ratio_percent),
            retain_min=get("snapshot.num-retained.min", _count, d.retain_min),
            retain_max=get("snapshot.num-retained.max", _count, d.retain_max),
            time_retained_ms=get("snapshot.time-retained", parse_duration_ms, d.time_retained_ms),
            expire_limit=get("snapshot.expire.limit", _count, d.expire_limit),
            consumer_expiration_ms=get("consumer.expiration-time", parse_duration_ms, d.consumer_expiration_ms),
            sorted_run_trigger=get("num-sorted-run.compaction-trigger", _count, d.sorted_run_trigger),
            num_levels=get("num-levels", _count, None),
            max_size_amp_percent=get("compaction.max-size-amplification-percent", _count, d.max_size_amp_percent),
            small_file_ratio=get("compaction.small-file-ratio", _ratio, d.small_file_ratio),
            changelog_retained=tuple(k for k in CHANGELOG_RETENTION if k in options),
            enabled=get("write-only", _flag, False) is False,
        )
        if out.retain_max < out.retain_min:
            raise InvalidRequest(f"Paimon table {table_name!r}: snapshot.num-retained.max ({out.retain_max}) is "
                                 f"below snapshot.num-retained.min ({out.retain_min}).")
        if out.num_levels is not None and out.num_levels < 2:
            raise InvalidRequest(f"Paimon table {table_name!r}: num-levels ({out.num_levels}) must be at least 2.")
        if out.max_file_num < out.min_file_num:
            raise InvalidRequest(f"Paimon table {table_name!r}: compaction.max.file-num ({out.max_file_num}) is "
                                 f"below compaction.min.file-num ({out.min_file_num}).")
        return out


def _count(text: str) -> int:
    """an integer >= 1"""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _count0(text: str) -> int:
    """an integer >= 0"""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _ratio(text: str) -> float:
    """a number between 0 and 1"""
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    """true or false"""
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"
