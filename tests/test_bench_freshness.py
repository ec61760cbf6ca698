"""scripts/bench's staleness check: a benchmark result is stale once a commit after the one it measured
changes the code it measures, and the report names its figures; `run` stamps the commit, date and
load. A temp git repository and synthetic results: no benchmark runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_freshness  # noqa: E402
import bench_report  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, "flight_server/push/log.py", "v1\n", "push log")
    commit(repo, "flight_server/paimon/read.py", "v1\n", "paimon read")
    return repo


def push_result(measured_at: str | None) -> dict:
    data = {"throughput": {"ratio": 0.9, "end_to_end_mib_s": 900, "baseline_mib_s": 1000},
            "latency": {"p50_ms": 0.4, "p99_ms": 2.0},
            "rss": {"pushed_gib": 4.0, "growth_mib": 100, "idle_rss_mib": 190, "peak_rss_mib": 290,
                    "bound_growth_mib": 164}}
    if measured_at:
        data["measured"] = {"commit": measured_at, "uncommitted": [], "date": "2026-11-27 10:30 UTC", "minutes": 5.0,
                            "load_1min": {"start": 0.5, "median": 1.1, "max": 1.9, "samples": 20, "every_s": 15.0},
                            "cpus": 2}
    return data


def test_a_result_goes_stale_only_when_the_code_it_measures_changes(repo: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    head = git(repo, "rev-parse", "HEAD")
    (results / "push.json").write_text(json.dumps(push_result(head)))
    assert bench_freshness.stale(results, repo) == {}

    commit(repo, "flight_server/paimon/read.py", "v2\n", "paimon read faster")  # not push's code
    assert bench_freshness.stale(results, repo) == {}

    changed = commit(repo, "flight_server/wire/messages.py", "v1\n", "wire: a new message")
    why = bench_freshness.stale(results, repo)
    assert list(why) == ["push"]
    assert f"measured at {head[:7]}" in why["push"]
    assert f"{changed[:7]} wire: a new message" in why["push"]
    assert "1 commit(s) changed flight_server/push/, flight_server/wire/" in why["push"]

    (results / "push.json").write_text(json.dumps(push_result(changed)))  # measured again at the change
    assert bench_freshness.stale(results, repo) == {}


def test_a_result_without_a_stamp_or_with_an_unknown_commit_is_stale(repo: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "push.json").write_text(json.dumps(push_result(None)))
    assert "no commit recorded" in bench_freshness.stale(results, repo)["push"]
    (results / "push.json").write_text(json.dumps(push_result("0" * 40)))
    assert "a commit this repository does not have" in bench_freshness.stale(results, repo)["push"]


def test_the_report_check_fails_naming_each_stale_figure(repo: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "push.json").write_text(json.dumps(push_result(git(repo, "rev-parse", "HEAD"))))
    assert bench_report.check(results, repo) == 0
    commit(repo, "flight_server/push/log.py", "v2\n", "push log: bounded")
    assert bench_report.check(results, repo) == 1
    err = capsys.readouterr().err
    figures = [line for line in err.splitlines() if line.startswith("  stale figure: push | ")]
    assert len(figures) == 3  # the throughput, latency and RSS rows, each named
    assert "end-to-end / raw do_put throughput" in err
    assert "push log: bounded" in err


def test_run_stamps_the_commit_date_and_load_it_measured(repo: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (repo / "flight_server/push/log.py").write_text("edited, not committed\n")
    out = results / "push.json"
    writer = f"import json; json.dump({{'throughput': {{'ratio': 1.0}}}}, open({str(out)!r}, 'w'))"
    assert bench_freshness.run("push", [sys.executable, "-c", writer], results, repo) == 0
    measured = json.loads(out.read_text())["measured"]
    assert measured["commit"] == git(repo, "rev-parse", "HEAD")
    assert measured["uncommitted"] == ["flight_server/push/log.py"]
    assert measured["date"].endswith(" UTC") and measured["minutes"] >= 0
    assert measured["load_1min"]["samples"] >= 1 and measured["load_1min"]["max"] >= measured["load_1min"]["median"]
    assert "uncommitted changes" in bench_freshness.describe(measured)

    assert bench_freshness.run("push", [sys.executable, "-c", "raise SystemExit(3)"], results, repo) == 3
