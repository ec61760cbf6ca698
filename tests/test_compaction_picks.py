"""What compaction picks (flight_server.maintenance.compaction), on made-up files, without a table:
a primary-key bucket's sorted runs and Paimon's universal compaction, and the append tiers' picks
(more examples of `tier_pick` and `settle_pick` in test_maintenance.py)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from flight_server.maintenance.compaction import (
    pick_runs,
    sorted_runs,
    tier_bounds,
    tier_pick,
)
from flight_server.maintenance.options import MaintenanceOptions
from flight_server.maintenance.store import LiveFile

pytestmark = pytest.mark.timeout(120)

OPTS = MaintenanceOptions()  # trigger 5, size ratio 1%, size amplification 200%
MAX_LEVEL = 5


def _file(name: str, size: int, level: int, max_seq: int = 0) -> LiveFile:
    return LiveFile(None, name, size, 1, max_seq, level, max_seq=max_seq)


def _runs(*runs: tuple[int, int]) -> list:
    """(level, size) per run, in the order given (newest first, as sorted_runs gives them)."""
    return [(level, [_file(f"r{i}", size, level)]) for i, (level, size) in enumerate(runs)]


def _names(runs) -> list[str]:
    return [f.name for _, files in runs for f in files]


def test_sorted_runs_are_each_level0_file_newest_first_then_each_level_above():
    files = [_file("a", 10, 0, max_seq=3), _file("b", 10, 2), _file("c", 10, 0, max_seq=9), _file("d", 10, 2),
             _file("e", 10, 1), _file("f", 10, 0, max_seq=5)]
    runs = sorted_runs(files)
    assert [(level, [f.name for f in fs]) for level, fs in runs] == \
        [(0, ["c"]), (0, ["f"]), (0, ["a"]), (1, ["e"]), (2, ["b", "d"])]
    assert sorted_runs([]) == []


def test_fewer_sorted_runs_than_the_trigger_are_left_alone():
    assert pick_runs(_runs((0, 10), (0, 10), (0, 10), (5, 10)), OPTS, MAX_LEVEL) is None


def test_newer_runs_past_the_size_amplification_merge_everything_into_the_top_level():
    runs = _runs((0, 10), (0, 10), (0, 10), (0, 10), (5, 10))  # 40 newer bytes over 10: 400% > 200%
    assert pick_runs(runs, OPTS, MAX_LEVEL) == (MAX_LEVEL, runs)


def test_the_newest_runs_of_similar_size_merge_into_the_level_below_the_next_run():
    runs = _runs((0, 100), (0, 100), (3, 1000), (4, 10_000), (5, 100_000))
    level, chosen = pick_runs(runs, OPTS, MAX_LEVEL)
    assert (level, _names(chosen)) == (2, ["r0", "r1"])


def test_past_the_trigger_enough_of_the_newest_runs_merge_to_get_back_to_it():
    runs = _runs((0, 1), (0, 100), (1, 10_000), (2, 1 << 20), (3, 100 << 20), (5, 10 << 30))  # none alike
    level, chosen = pick_runs(runs, OPTS, MAX_LEVEL)
    assert len(runs) - len(chosen) + 1 <= OPTS.sorted_run_trigger
    assert (level, _names(chosen)) == (1, ["r0", "r1", "r2"])


bucket = st.lists(st.tuples(st.integers(0, MAX_LEVEL), st.integers(1, 1 << 30)), max_size=14)
options = st.builds(lambda trigger, ratio, amp: MaintenanceOptions(sorted_run_trigger=trigger, size_ratio_percent=ratio,
                                                                   max_size_amp_percent=amp),
                    st.integers(2, 8), st.integers(0, 50), st.integers(50, 400))


@given(files=bucket, opts=options)
@example(files=[(0, 1), (0, 1), (2, 3), (3, 10)],  # one pick leaves 3 runs over a trigger of 2 (as Java's)
         opts=MaintenanceOptions(sorted_run_trigger=2, size_ratio_percent=0, max_size_amp_percent=50))
def test_a_universal_pick_keeps_the_runs_a_valid_levelled_bucket(files, opts):
    runs = sorted_runs([_file(f"f{i}", size, level, max_seq=i) for i, (level, size) in enumerate(files)])
    picked = pick_runs(runs, opts, MAX_LEVEL)
    if len(runs) < opts.sorted_run_trigger:
        assert picked is None
        return
    if len(runs) > opts.sorted_run_trigger:
        assert picked is not None, "past the trigger something always merges"
    if picked is None:
        return
    level, chosen = picked
    left = runs[len(chosen):]
    assert chosen == runs[:len(chosen)] and len(chosen) >= 2, "the newest runs, at least two"
    assert 1 <= level <= MAX_LEVEL and all(lv <= level for lv, _ in chosen), "never level 0, never down"
    assert all(lv > level for lv, _ in left), "the runs left out stay above the output: one run a level"
    # Paimon's UniversalCompaction may leave the bucket past the trigger after one pick (the
    # newest runs of similar size merge first, into the level below the next run); each pick
    # merges at least two runs into one, so picks again bring it back within the trigger.
    picks = 1
    while picked is not None:
        level, chosen = picked
        merged = _file(f"m{picks}", sum(f.size for _, fs in chosen for f in fs), level)
        runs = [(level, [merged]), *runs[len(chosen):]]
        picked = pick_runs(runs, opts, MAX_LEVEL)
        picks += 1
        assert picks <= len(files), "every pick merges at least two runs"
    assert len(runs) <= opts.sorted_run_trigger, "the picks bring the bucket back within the trigger"


tiny_or_parts = st.lists(st.integers(1, 1 << 18), max_size=60)
append_options = st.builds(lambda lo, extra, target: MaintenanceOptions(min_file_num=lo, max_file_num=lo + extra,
                                                                        target_file_size=target),
                           st.integers(2, 8), st.integers(0, 40), st.sampled_from([1 << 16, 1 << 18, 1 << 20]))


@given(sizes=tiny_or_parts, opts=append_options)
def test_an_append_pick_is_small_files_of_one_kind_in_the_buckets_order(sizes, opts):
    files = [_file(f"f{i}", size, 0) for i, size in enumerate(sizes)]
    chosen = tier_pick(files, opts)
    if not chosen:
        return
    positions = [files.index(f) for f in chosen]
    assert positions == sorted(positions), "in the bucket's order"
    assert opts.min_file_num <= len(chosen) <= opts.max_file_num
    assert all(f.size < opts.compaction_file_size for f in chosen), "target-size files are left alone"
    tiny = [f.size < opts.part_file_size for f in chosen]
    assert all(tiny) or not any(tiny), "tiny files and part files never merge together"
    if all(tiny) and len(chosen) < opts.max_file_num:
        bound = next(b for b in tier_bounds(opts) if b > max(f.size for f in chosen))
        assert sum(f.size for f in chosen) >= bound, "a tier's merge reaches its bound: its bytes move up a tier"
    if not any(tiny) and len(chosen) < opts.max_file_num:
        assert sum(f.size for f in chosen) >= opts.target_file_size, "part files wait to add up to the target"
