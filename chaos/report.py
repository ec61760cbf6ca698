"""Figures of the runs: a line per scenario while running, docs/reliability.md at the end."""

from __future__ import annotations

import datetime
import platform
from collections import Counter

from chaos.harness import OUTCOMES, Run, Scenario

# What these runs found, how it was fixed, and the test that keeps it fixed.
FOUND = [
    "A server killed while pypaimon rewrote a consumer's progress file (truncate, then write) left it "
    "empty, and every later follow of that consumer failed. Progress is now written beside the file and "
    "renamed over it; a torn file is an error naming the file (tests/test_paimon_follow.py).",
    "A stopping server's gRPC cancels the calls it still holds: named durable producers now resend after a "
    "CANCELLED they did not cause, and the committer's UNAVAILABLE wins over the call's cancellation "
    "(tests/test_ingest.py).",
    "Shutdown ends follows and durable writes with UNAVAILABLE, not a clean end (tests/test_paimon_follow.py).",
    "1,000 idle views made every call take seconds: waiting streams back off to 0.5 s between cancellation "
    "checks (the idle-streams scenario above).",
    "The soak's RSS climbed with the age of its durable table: pypaimon 2.1 leaves manifest merging to "
    "external maintenance, so each commit read and rewrote a manifest list one longer than the last (28 ms a "
    "commit at 300 snapshots, 181 ms at 2,400). The server now merges small manifests on commit as Java "
    "Paimon does: ~7 ms a commit at any age (scripts/bench_commit_history.py; "
    "tests/test_ingest.py::test_many_small_commits_keep_few_manifests_and_every_snapshot_reads_whole).",
    "Dropping a push table gives the freed heap back to the OS (malloc_trim), and its metric series go with "
    "it (tests/test_metrics.py).",
    "Maintenance killed mid-expiry (Java Paimon's order: data files, then manifests, then snapshot files) left "
    "listed snapshots naming deleted files. Expiry now deletes each snapshot file first, then what the next "
    "snapshot no longer reads, and the next run starts by finishing the data files its earliest snapshot removed "
    "(chaos/maintenance_faults.py, 20 runs).",
    "A server killed while writing the EARLIEST hint left it empty, and pypaimon failed on it; it is written "
    "beside and renamed over.",
    "A snapshot expired between pypaimon's existence check and its read raised instead of reading as gone; every "
    "snapshot read goes through compat.snapshot, which treats that as gone (an ingest commit had failed on it).",
]


def counts(results: list[Run]) -> Counter:
    c = Counter(r.outcome for r in results)
    c["lost"] = sum(r.lost for r in results)
    c["duplicated"] = sum(r.duplicated for r in results)
    c["redelivered"] = sum(r.redelivered for r in results)
    return c


def ok(results: list[Run]) -> bool:
    return all(r.outcome == "ok" and not r.lost and not r.duplicated for r in results)


def all_ok(rows) -> bool:
    return all(ok(results) for _, results in rows)


def line(sc: Scenario, results: list[Run], seconds: float) -> str:
    c = counts(results)
    figures = " ".join(f"{k}={c[k]}" for k in (*OUTCOMES, "lost", "duplicated", "redelivered"))
    return f"{'OK ' if ok(results) else 'BAD'} {sc.group}: {sc.name}: runs={len(results)} {figures} ({seconds:.0f} s)"


def soak_line(soak: dict) -> str:
    return f"{'OK ' if soak['ok'] else 'BAD'} soak: {soak['summary']}"


def markdown(rows, soak: dict | None, command: str, seconds: float) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Reliability: fault, abuse and soak runs",
        "",
        f"From `.venv/bin/python {command}` on {when} ({platform.machine()}, "
        f"{seconds / 60:.0f} min), against the code of this commit. Each run puts the fault at a random moment "
        "(seeded: the same command repeats the same moments). Outcomes: **ok** (what the protocol "
        "promises), **silent truncation** (a clean end with rows missing), **hang** (not over 10 s after "
        "the fault), **wrong error** (an error that does not name the cause, or altered rows), **crash** "
        "(a server died that the run did not kill). **Lost** and **duplicated** count rows where the "
        "path promises exactly-once (or at-least-once: duplicates allowed, said in the promise).",
        "",
        "| group | scenario | promise | runs | ok | silent truncation | hang | wrong error | crash | lost | "
        "duplicated | redelivered (at-least-once) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc, results in rows:
        c = counts(results)
        out.append(f"| {sc.group} | {sc.name} | {sc.promise} | {len(results)} | {c['ok']} | {c['truncation']} | "
                   f"{c['hang']} | {c['wrong_error']} | {c['crash']} | {c['lost']} | {c['duplicated']} | "
                   f"{c['redelivered']} |")
    out += ["", "Reproduce one scenario: `.venv/bin/python scripts/chaos.py --only \"NAME\" --runs N` (a part of "
            "the name is enough); the CI version is `scripts/chaos.py --short` (tests/test_chaos.py).", ""]
    bad = [(sc, r) for sc, results in rows for r in results if r.outcome != "ok" or r.lost or r.duplicated]
    if bad:
        out += ["## Runs that were not ok", ""]
        out += [f"- {sc.group}: {sc.name}: {r.outcome}, lost {r.lost}, duplicated {r.duplicated}: {r.detail}"
                for sc, r in bad]
        out.append("")
    out += ["## Found by these runs and fixed", ""] + [f"- {f}" for f in FOUND] + [""]
    if soak:
        verdict = ("within its bounds (RSS trend within +/-5%, threads and open files flat, nothing missed)"
                   if soak["ok"] else "**not within its bounds** (RSS trend within +/-5%, threads and open files "
                   "flat, nothing missed): see the figures")
        out += ["## Soak", "", f"`.venv/bin/python {soak['command']}` ({soak['when']}): {verdict}. {soak['markdown']}", ""]
    return "\n".join(out)
