"""The short version of scripts/chaos.py: every fault and abuse scenario a few times, and a short
soak (the full counts and the 30-minute soak run by hand: docs/reliability.md)."""

from __future__ import annotations

import pytest

from chaos.harness import SCENARIOS, run_scenario
from chaos.scenarios import load
from chaos.soak import soak

load()


@pytest.mark.timeout(400)
@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: f"{s.group}: {s.name}")
def test_scenario_short(sc, tmp_path):
    results = run_scenario(sc, sc.short, seed=1, root=tmp_path, short=True)
    assert len(results) == sc.short
    bad = [r for r in results if r.outcome != "ok" or r.lost or r.duplicated]
    assert bad == [], bad


@pytest.mark.timeout(120)
def test_a_short_soak_moves_traffic_and_the_follow_misses_nothing(tmp_path):
    result = soak(20, tmp_path, plot=None, spark=False)
    assert result["push_tables"] > 5 and result["push_bad"] == 0, result["summary"]
    assert result["durable_batches"] > 20 and result["missed"] == 0, result["summary"]
