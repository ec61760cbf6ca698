"""Soak: mixed traffic against one server process for a while, its RSS, threads and open files
sampled every second from /proc, and a plot.

Traffic: push tables registered, filled by a producer, drained by a consumer and dropped, over and
over; a named producer writing durably into a Paimon table; a follow (`flight_cli tail`) of that
table; a Spark stream of it (optional). At the end the follow must have seen every durable row.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import threading
import time
from pathlib import Path

from chaos.harness import Context
from chaos.push_faults import Drain
from producers import Client
from producers.examples.counter import SCHEMA as PUSH_SCHEMA
from producers.examples.counter import make_batch
from producers.examples.events import SCHEMA as EVENTS_SCHEMA

DURABLE_ROWS = 200


def sample(pid: int) -> tuple[float, int, int]:
    """(RSS MiB, threads, open files) of a process."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rss = int(fields["VmRSS"].split()[0]) / 1024
    return rss, int(fields["Threads"]), len(os.listdir(f"/proc/{pid}/fd"))


def push_cycles(uri: str, stop: threading.Event, counts: dict) -> None:
    """Register, fill (50 batches, 1000 rows), drain, drop: a fresh push table each cycle."""
    client = Client(uri, timeout=10)
    n = 0
    while not stop.is_set():
        name = f"soak{n}"
        client.register(name, PUSH_SCHEMA, capacity=8)
        drain = Drain(client, name)
        with client.sink(name, 0) as sink:
            for i in range(50):
                sink.write(make_batch(i * 1000, 1000))
        drain.thread.join(30)
        if drain.error is not None or len(drain.ids) != 50_000:
            counts["push_bad"] = counts.get("push_bad", 0) + 1
        client.drop(name)
        counts["push_tables"] = n = n + 1
        time.sleep(0.2)
    client.close()


def trend(samples: list[tuple[float, float]]) -> float:
    """The least-squares change over the samples' span, as a fraction of their mean."""
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mv = sum(v for _, v in samples) / n
    slope = sum((t - mt) * (v - mv) for t, v in samples) / sum((t - mt) ** 2 for t, _ in samples)
    return slope * (samples[-1][0] - samples[0][0]) / mv


def soak(seconds: float, root: Path, plot: Path | None, spark: bool = True) -> dict:
    import random

    ctx = Context(random.Random(0), root / "soak", {})
    ctx.dir.mkdir(parents=True, exist_ok=True)
    server = ctx.own_server()
    uri, table = server.uri, "db.soak"
    client = Client(uri, timeout=10)
    client.create_table(table, EVENTS_SCHEMA)
    stop, counts = threading.Event(), {}
    pushes = threading.Thread(target=push_cycles, args=(uri, stop, counts), daemon=True)
    pushes.start()
    durable = ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", "soak", "--batches",
                         "100000000", "--rows", str(DURABLE_ROWS), "--rate", "4", stdout=subprocess.DEVNULL)
    follow = ctx.python("-m", "flight_cli", "tail", table, "--uri", uri, "--from", "earliest",
                        "--format", "jsonl", "--poll-interval-ms", "200")
    followed: set[int] = set()
    reader = threading.Thread(target=lambda: [followed.add(json.loads(line)["seq"]) for line in follow.stdout],
                              daemon=True)
    reader.start()
    stream = None
    if spark:
        stream = ctx.python("-m", "chaos.spark_job", uri, "--read", f"paimon:{table}", "--out",
                            str(ctx.dir / "out"), "--checkpoint", str(ctx.dir / "ckpt"), "--trigger-ms", "1000",
                            stdout=subprocess.DEVNULL)
    series: list[tuple[float, float, int, int]] = []
    start = time.monotonic()
    try:
        while (t := time.monotonic() - start) < seconds:
            series.append((t, *sample(server.proc.pid)))
            for proc, what in ((durable, "the durable producer"), (follow, "the follow"), (stream, "the Spark stream")):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"{what} exited with {proc.returncode} after {t:.0f} s: "
                                       f"{(proc.stderr.read() or '')[-400:]}")
            time.sleep(max(0.0, (len(series)) - (time.monotonic() - start)))
        stop.set()
        ctx.kill(durable)
        last = client.producer_state(table, "soak")
        ctx.wait_for(lambda: last is None or all(s in followed for s in range(last + 1)), "the follow to catch up",
                     timeout=60)
        missed = sum(1 for s in range((last or -1) + 1) if s not in followed)
        pushes.join(60)
    finally:
        ctx.stop_all()
        client.close()
    return summarise(series, seconds, counts, (last or -1) + 1, missed, plot)


def summarise(series, seconds: float, counts: dict, durable_batches: int, missed: int, plot: Path | None) -> dict:
    window = [s for s in series if s[0] >= seconds - 600] if seconds >= 1200 else series[len(series) // 2:]
    rss_trend = trend([(t, r) for t, r, _, _ in window])
    threads = [n for _, _, n, _ in window]
    files = [n for _, _, _, n in window]
    ok = (abs(rss_trend) <= 0.05 and max(threads) - min(threads) <= 8 and max(files) - min(files) <= 16
          and missed == 0 and not counts.get("push_bad"))
    summary = (f"{seconds / 60:.0f} min: {counts.get('push_tables', 0)} push tables filled, drained and dropped "
               f"({counts.get('push_bad', 0)} bad), {durable_batches} durable batches, {missed} missed by the follow; "
               f"RSS {series[0][1]:.0f} -> {series[-1][1]:.0f} MiB, trend over the "
               f"{'last 10 minutes' if seconds >= 1200 else 'second half'} {rss_trend * 100:+.1f}%; threads "
               f"{min(threads)}-{max(threads)}, open files {min(files)}-{max(files)} in that window")
    markdown = summary
    if plot is not None:
        draw(series, plot)
        markdown = f"{summary}.\n\n![server RSS, threads and open files over the soak]({plot.name})"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {"ok": ok, "summary": summary, "markdown": markdown, "rss_trend": rss_trend, "when": when,
            "missed": missed, "push_tables": counts.get("push_tables", 0), "push_bad": counts.get("push_bad", 0),
            "durable_batches": durable_batches}


def draw(series, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s[0] / 60 for s in series]
    fig, axes = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    for ax, i, label in zip(axes, (1, 2, 3), ("RSS (MiB)", "threads", "open files")):
        ax.plot(t, [s[i] for s in series], linewidth=0.8)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("minutes")
    fig.suptitle("flight-paimon server under mixed traffic (scripts/chaos.py --soak-minutes)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
