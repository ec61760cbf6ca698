"""The short version of scripts/chaos.py: every fault and abuse scenario a few times, and a short
soak (the full counts and the 30-minute soak run by hand: docs/reliability.md). A scenario whose
short count is 0 runs only in the full version: two of the four Spark driver kills (a driver
start and a restart each, the suite's dearest runs), whose directions and table kinds the other
two cover here (a Paimon table written, a push table read) and whose restarts from a checkpoint
without a kill tests/test_spark_paimon.py and tests/test_spark_push_streams.py cover."""

from __future__ import annotations

import pytest

from chaos.harness import SCENARIOS, run_scenario
from chaos.scenarios import load
from chaos.soak import soak

load()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("sc", [s for s in SCENARIOS if s.short], ids=lambda s: f"{s.group}: {s.name}")
def test_scenario_short(sc, tmp_path):
    results = run_scenario(sc, sc.short, seed=1, root=tmp_path, short=True)
    assert len(results) == sc.short
    bad = [r for r in results if r.outcome != "ok" or r.lost or r.duplicated]
    assert bad == [], bad


def test_every_group_of_scenarios_has_runs_in_the_short_version():
    groups = {s.group for s in SCENARIOS}
    assert groups >= {"producer", "consumer", "server", "shared", "maintenance", "spark", "abuse"}, groups
    assert {s.group for s in SCENARIOS if s.short} == groups
    assert all(s.full for s in SCENARIOS), "a scenario that never runs"


@pytest.mark.timeout(120)
def test_a_short_soak_moves_traffic_and_the_follow_misses_nothing(tmp_path):
    result = soak(20, tmp_path, plot=None, spark=False)
    assert result["push_tables"] > 5 and result["push_bad"] == 0, result["summary"]
    assert result["durable_batches"] > 20 and result["missed"] == 0, result["summary"]
