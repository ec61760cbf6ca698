"""Prometheus metrics of one server (prometheus-client), `/metrics` and `/healthz` over HTTP.

Each server has its own registry, so several servers in one process (tests) never share counts.
Counters move where the work happens (one `add` per batch, none when metrics are off); queue
depths, open follows and maintenance are read when Prometheus scrapes.

Scrapes stay bounded however many tables the server has (Prometheus advises against unbounded
label values). Server-wide families have no `table` label and are always there. Every family with a
`table` label is named `flight_paimon_table_...` and has series only for tables active within the
table window (`--metrics-table-window`, 0: none): a stream moved their batches or a group commit
landed, or at a scrape their push partitions hold batches, a follow of them is open or their
maintenance state changed since the last scrape. At most
`max_tables` tables (`--metrics-max-tables`) have them: the first active ones; a table past it
counts in the totals and in `flight_paimon_metrics_omitted_tables` until a place frees. A table
idle longer than the window loses its series at the next scrape; active again, its counters
start from 0 (a counter reset, which rate() and increase() handle).

Names follow Prometheus' conventions: `flight_paimon_` once, then what is measured and its unit
(`_seconds`, `_bytes`, `_total` for counters, `_ratio` for a ratio), and `flight_paimon_build_info`
(value 1, the version as a label). prometheus-client's `_created` series (a gauge per counter and
histogram series) are turned off for the process.
"""

from __future__ import annotations

import math
import threading
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    make_wsgi_app,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    SummaryMetricFamily,
)

from flight_server.auth import AuthConfig
from flight_server.wire.errors import PermissionDenied, Unauthenticated
from flight_server.wire.version import VERSION

log = structlog.get_logger(__name__)

NAMESPACE = "flight_paimon"
TABLE = f"{NAMESPACE}_table"  # every family with a table label starts so
DEFAULT_TABLE_WINDOW_S = 600.0  # --metrics-table-window
DEFAULT_METRICS_MAX_TABLES = 1000  # --metrics-max-tables
WARN_EVERY_S = 60.0  # at most one warning a minute names a table the cap leaves out
SWEEP_EVERY_S = 1.0  # a full window looks for idle tables to make room at most this often
PUSH, PAIMON = "push", "paimon"


class Metrics:
    """The metrics one server records; `serve_http` exposes them.

    `table_window_s` and `max_tables`: which tables have per-table series (the module's docstring);
    `clock`: monotonic seconds, the window's clock."""

    def __init__(self, push_registry, paimon_source, maintainer=None, table_window_s: float = DEFAULT_TABLE_WINDOW_S,
                 max_tables: int = DEFAULT_METRICS_MAX_TABLES, clock=time.monotonic):
        # A process-wide switch of prometheus-client, read at each scrape.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.started = time.time()
        self._push = push_registry
        self._http: tuple[WSGIServer, threading.Thread] | None = None
        self.tables = TableWindow(table_window_s, max_tables, clock)
        r, ns = self.registry, NAMESPACE
        Gauge("build_info", "The server's flight-paimon version (value 1)", ["version"], namespace=ns,
              registry=r).labels(VERSION).set(1)
        self.rpcs = Counter("rpcs", "Finished RPCs by method and status", ["method", "status"], namespace=ns, registry=r)
        self.rpc_seconds = Histogram("rpc_duration_seconds", "RPC duration by method (streams: until they end)",
                                     ["method"], namespace=ns, registry=r,
                                     buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 2, 10, 60, 600))
        self.open_streams = Gauge("open_streams", "do_put and do_get streams now open", ["method"], namespace=ns,
                                  registry=r)
        self.rows = Counter("rows", "Rows moved, by table kind and direction (in: pushed, out: read), all tables",
                            ["kind", "direction"], namespace=ns, registry=r)
        self.bytes = Counter("bytes", "Arrow bytes moved, by table kind and direction, all tables",
                             ["kind", "direction"], namespace=ns, registry=r)
        self.commits = Counter("ingest_commits", "Group commits of durable writes, all tables", namespace=ns,
                               registry=r)
        self.commit_seconds = Histogram("ingest_commit_seconds", "Write + commit time of one group commit, all tables",
                                        namespace=ns, registry=r,
                                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5))
        self.committed_rows = Counter("ingest_committed_rows", "Rows committed by durable writes, all tables",
                                      namespace=ns, registry=r)
        self._maintenance = _MaintenanceCollector(maintainer)
        r.register(_ScrapeCollector(self.tables, push_registry, paimon_source, self._maintenance))
        # As prometheus-client's default registry has them: process_* (CPU, memory, open fds, start
        # time), python_info, python_gc_*.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

    def committed(self, table: str, rows: int, nbytes: int, seconds: float) -> None:
        """One group commit of durable writes landed."""
        self.commits.inc()
        self.commit_seconds.observe(seconds)
        self.committed_rows.inc(rows)
        self.tables.committed(table, rows, seconds)

    def served(self, kind: str, table, direction: str) -> Served:
        """What one stream counts its batches with (`Served.add`)."""
        return Served(self, kind, str(table), direction)

    def forget_push_table(self, name: str) -> None:
        """A dropped push table's series go (rows and bytes in, out and viewed, its partitions): a
        server that cycles tables all day keeps no series per table it ever had."""
        self.tables.forget((PUSH, name))

    def forget_paimon_table(self, name: str) -> None:
        """A dropped Paimon table's series go: rows and bytes, its group commits, and what its
        maintenance reported (until the maintainer reports something new of a table created again)."""
        self.tables.forget((PAIMON, name))
        self._maintenance.forget(name)

    def serve_http(self, host: str, port: int, auth: AuthConfig | None = None) -> tuple[WSGIServer, str]:
        """Serve `/metrics` and `/healthz` on a thread until `close` (any other path: 404); returns the
        server and its base URL.

        With `auth` (serve --auth) /metrics answers only a bearer token of a principal with `admin`
        on "*": its labels name every table, also those outside a reader's grants. /healthz stays
        open (it tells only whether the server serves: 200 "ok", or 503 "stopping" while it drains,
        as the `health` action says), so probes need no token."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO")
            if path == "/healthz":
                stopping = self._push.closing is not None
                start_response("503 Service Unavailable" if stopping else "200 OK", [("Content-Type", "text/plain")])
                return [b"stopping\n" if stopping else b"ok\n"]
            if path != "/metrics":  # prometheus-client's app would answer the metrics on any path
                start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
                return [b"Not found: this port serves /metrics and /healthz.\n"]
            if auth is not None:
                try:
                    auth.metrics_scraper(environ.get("HTTP_AUTHORIZATION"))
                except (Unauthenticated, PermissionDenied) as e:
                    headers = [("Content-Type", "text/plain; charset=utf-8")]
                    if isinstance(e, Unauthenticated):  # RFC 6750: a 401 names the scheme it wants
                        headers.append(("WWW-Authenticate", 'Bearer realm="flight-paimon metrics"'))
                    start_response("401 Unauthorized" if isinstance(e, Unauthenticated) else "403 Forbidden", headers)
                    return [f"{e}\n".encode()]
            return metrics_app(environ, start_response)

        httpd = make_server(host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
        thread = threading.Thread(target=httpd.serve_forever, args=(0.1,), name="metrics-http", daemon=True)
        thread.start()
        self._http = (httpd, thread)
        return httpd, f"http://{host}:{httpd.server_port}"

    def close(self, timeout: float) -> bool:
        """Stop serving HTTP and close the port; False if the thread outlived `timeout` s."""
        if self._http is None:
            return True
        (httpd, thread), self._http = self._http, None
        httpd.shutdown()  # returns once serve_forever's loop saw it (a poll: 0.1 s)
        httpd.server_close()
        thread.join(timeout)
        return not thread.is_alive()


class Served:
    """One stream's counting: the server-wide counters, and its table's while the table is shown."""

    __slots__ = ("_rows", "_bytes", "_tables", "_key", "_direction")

    def __init__(self, metrics: Metrics, kind: str, table: str, direction: str):
        self._rows, self._bytes = metrics.rows.labels(kind, direction), metrics.bytes.labels(kind, direction)
        self._tables, self._key, self._direction = metrics.tables, (kind, table), direction

    def add(self, rows: int, nbytes: int) -> None:
        """A batch of `rows` rows, `nbytes` Arrow bytes."""
        self._rows.inc(rows)
        self._bytes.inc(nbytes)
        self._tables.served(self._key, self._direction, rows, nbytes)


class _TableCounts:
    """One shown table's counters since its series (re)appeared, and when it was last active."""

    __slots__ = ("last", "rows", "bytes", "commits", "committed_rows", "commit_seconds")

    def __init__(self, now: float):
        self.last = now
        self.rows: dict[str, int] = {}  # by direction
        self.bytes: dict[str, int] = {}
        self.commits = self.committed_rows = 0
        self.commit_seconds = 0.0


class TableWindow:
    """Which tables have per-table series: those active within `window_s` (0: none), at most
    `max_tables` of them, the first to be active (a later one is omitted, counted in the totals
    only, until an idle table's place frees); a table idle longer than the window goes at the next
    scrape, or when a full window needs room."""

    def __init__(self, window_s: float, max_tables: int, clock=time.monotonic):
        if window_s < 0 or max_tables < 0:
            raise ValueError(f"the metrics table window ({window_s} s) and max tables ({max_tables}) cannot be "
                             "negative")
        self.window_s, self.max_tables, self.clock = window_s, max_tables, clock
        self.enabled = window_s > 0 and max_tables > 0
        self._lock = threading.Lock()
        self._shown: dict[tuple[str, str], _TableCounts] = {}  # (kind, table) -> its counts
        self._omitted: dict[tuple[str, str], float] = {}  # (kind, table) -> when last active
        self._swept = self._warned = -math.inf

    def served(self, key: tuple[str, str], direction: str, rows: int, nbytes: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            counts = self._admit(key, self.clock())
            if counts is not None:
                counts.rows[direction] = counts.rows.get(direction, 0) + rows
                counts.bytes[direction] = counts.bytes.get(direction, 0) + nbytes

    def committed(self, table: str, rows: int, seconds: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            counts = self._admit((PAIMON, table), self.clock())
            if counts is not None:
                counts.commits += 1
                counts.committed_rows += rows
                counts.commit_seconds += seconds

    def forget(self, key: tuple[str, str]) -> None:
        """A dropped table: its series go now."""
        with self._lock:
            self._shown.pop(key, None)
            self._omitted.pop(key, None)

    def scrape(self, active: list[tuple[str, str]]) -> tuple[dict[tuple[str, str], _TableCounts], dict[str, int], int]:
        """At a scrape: drop the tables idle past the window, count `active` (tables busy now: push
        partitions holding batches, open follows) as active; the shown tables with copies of their
        counts, the active tables by kind, and how many of them the cap omits."""
        if not self.enabled:
            return {}, {}, 0
        with self._lock:
            now = self.clock()
            self._sweep(now)
            for key in active:
                self._admit(key, now)
            shown = {key: _copy(c) for key, c in self._shown.items()}
            by_kind: dict[str, int] = {}
            for kind, _ in list(self._shown) + list(self._omitted):
                by_kind[kind] = by_kind.get(kind, 0) + 1
            return shown, by_kind, len(self._omitted)

    def _admit(self, key: tuple[str, str], now: float) -> _TableCounts | None:
        """`key` is active now: its counts, or None when the cap omits it (under the lock)."""
        counts = self._shown.get(key)
        if counts is not None:
            counts.last = now
            return counts
        if len(self._shown) >= self.max_tables and now - self._swept >= SWEEP_EVERY_S:
            self._sweep(now)
        if len(self._shown) >= self.max_tables:
            first = key not in self._omitted
            self._omitted[key] = now
            if first and now - self._warned >= WARN_EVERY_S:
                self._warned = now
                log.warning("metrics_table_omitted", table=key[1], kind=key[0], omitted=len(self._omitted),
                            max_tables=self.max_tables,
                            detail="this table's per-table series are left out: --metrics-max-tables tables active "
                                   "within --metrics-table-window have theirs (the server-wide totals count it)")
            return None
        self._omitted.pop(key, None)
        counts = self._shown[key] = _TableCounts(now)
        return counts

    def _sweep(self, now: float) -> None:
        self._swept = now
        idle_since = now - self.window_s
        for key in [k for k, c in self._shown.items() if c.last < idle_since]:
            del self._shown[key]
        for key in [k for k, last in self._omitted.items() if last < idle_since]:
            del self._omitted[key]


def _copy(counts: _TableCounts) -> _TableCounts:
    copy = _TableCounts(counts.last)
    copy.rows, copy.bytes = dict(counts.rows), dict(counts.bytes)
    copy.commits, copy.committed_rows, copy.commit_seconds = counts.commits, counts.committed_rows, counts.commit_seconds
    return copy


class _ScrapeCollector:
    """What a scrape reads: the shown tables' counters, queue depths, open follows and
    maintenance, server-wide and per shown table."""

    def __init__(self, tables: TableWindow, push_registry, paimon_source, maintenance: _MaintenanceCollector):
        self.tables, self.push, self.paimon, self.maintenance = tables, push_registry, paimon_source, maintenance

    def collect(self):
        queues = {t.name: [p.queued() for p in t.partitions] for t in self.push.tables()}
        lag = self.paimon.follow_lag()
        active = [(PUSH, name) for name, held in queues.items() if any(batches for batches, _ in held)]
        active += [(PAIMON, name) for name in lag]
        maintained, totals, changed = self.maintenance.read()
        active += [(PAIMON, name) for name in changed]
        shown, by_kind, omitted = self.tables.scrape(active)

        yield from self._counters(shown)
        total_batches = GaugeMetricFamily(f"{NAMESPACE}_push_queued_batches", "Batches all push partitions hold")
        total_bytes = GaugeMetricFamily(f"{NAMESPACE}_push_queued_bytes", "Bytes all push partitions hold")
        total_batches.add_metric([], sum(batches for held in queues.values() for batches, _ in held))
        total_bytes.add_metric([], sum(nbytes for held in queues.values() for _, nbytes in held))
        yield total_batches
        yield total_bytes
        batches = GaugeMetricFamily(f"{TABLE}_push_queued_batches", "Batches a push partition holds",
                                    labels=["table", "partition"])
        nbytes = GaugeMetricFamily(f"{TABLE}_push_queued_bytes", "Bytes a push partition holds",
                                   labels=["table", "partition"])
        for name, held in queues.items():
            if (PUSH, name) in shown:
                for p, (n, size) in enumerate(held):
                    batches.add_metric([name, str(p)], n)
                    nbytes.add_metric([name, str(p)], size)
        yield batches
        yield nbytes
        yield GaugeMetricFamily(f"{NAMESPACE}_open_follows", "Paimon follow streams now open",
                                value=self.paimon.open_follows)
        yield GaugeMetricFamily(f"{NAMESPACE}_follow_lag_snapshots",
                                "Committed snapshots the furthest-behind open follow of any table has yet to send",
                                value=max(lag.values(), default=0))
        per_table = GaugeMetricFamily(f"{TABLE}_follow_lag_snapshots",
                                      "Committed snapshots the furthest-behind open follow of a table has yet to send",
                                      labels=["table"])
        for table, snapshots in lag.items():
            if (PAIMON, table) in shown:
                per_table.add_metric([table], snapshots)
        yield per_table
        yield from self.maintenance.collect(maintained, totals, {name for kind, name in shown if kind == PAIMON})
        tables = GaugeMetricFamily(f"{NAMESPACE}_active_tables",
                                   "Tables active within --metrics-table-window (0: not counted), by kind",
                                   labels=["kind"])
        for kind in (PUSH, PAIMON):
            tables.add_metric([kind], by_kind.get(kind, 0))
        yield tables
        yield GaugeMetricFamily(f"{NAMESPACE}_metrics_omitted_tables",
                                "Active tables left without per-table series by --metrics-max-tables", value=omitted)

    @staticmethod
    def _counters(shown: dict[tuple[str, str], _TableCounts]):
        rows = CounterMetricFamily(f"{TABLE}_rows", "Rows moved, by table kind, table and direction",
                                   labels=["kind", "table", "direction"])
        nbytes = CounterMetricFamily(f"{TABLE}_bytes", "Arrow bytes moved, by table kind, table and direction",
                                     labels=["kind", "table", "direction"])
        commits = CounterMetricFamily(f"{TABLE}_ingest_commits", "Group commits of durable writes into the table",
                                      labels=["table"])
        committed = CounterMetricFamily(f"{TABLE}_ingest_committed_rows", "Rows the table's group commits committed",
                                        labels=["table"])
        seconds = SummaryMetricFamily(f"{TABLE}_ingest_commit_seconds",
                                      "Write + commit time of the table's group commits (count and sum)",
                                      labels=["table"])
        for (kind, table), c in shown.items():
            for direction, n in c.rows.items():
                rows.add_metric([kind, table, direction], n)
                nbytes.add_metric([kind, table, direction], c.bytes[direction])
            if c.commits:
                commits.add_metric([table], c.commits)
                committed.add_metric([table], c.committed_rows)
                seconds.add_metric([table], c.commits, c.commit_seconds)
        yield from (rows, nbytes, commits, committed, seconds)


class _MaintenanceCollector:
    """Per Paimon table this server maintains: its shape after the last round, and what was done;
    server-wide: the sums (counters that never go down: a table's counts stay in them after it is
    dropped or created again) and the latest rounds."""

    GAUGES = (("snapshots", "Snapshots the table keeps"), ("data_files", "Data files its latest snapshot reads"),
              ("data_bytes", "Bytes of those data files"))
    MAINTENANCE_GAUGES = (("uncommitted_files", "Files compactions wrote whose commit failed, left for orphan removal"),
                          ("uncommitted_bytes", "Bytes of those files"))
    COUNTERS = (("compactions", "COMPACT snapshots this server committed"),
                ("compacted_bytes", "Bytes of the data files those compactions rewrote"),
                ("ingested_bytes", "Bytes of the data files this server's group commits wrote"),
                ("expiries", "Expiry rounds that expired snapshots"),
                ("files_deleted", "Files expiry (data, changelog, manifest, index, statistics) and orphan removal "
                                  "deleted"))

    def __init__(self, maintainer):
        self.maintainer = maintainer
        self._lock = threading.Lock()
        self._forgotten: dict[str, dict] = {}  # a dropped table -> its state when dropped
        self._counted: dict[str, tuple] = {}  # a table -> its counters at the last scrape
        self._seen: dict[str, dict] = {}  # a table -> its settled state at the last scrape
        self._retired = [0] * len(self.COUNTERS)  # counts of tables gone or created again since

    def forget(self, name: str) -> None:
        """Leave a dropped table out while the maintainer reports of it what it did before the drop."""
        if self.maintainer is None:
            return
        state = self.maintainer.stats().get(name)
        if state is not None:
            with self._lock:
                self._forgotten[name] = _settled(state)

    def _tables(self) -> dict:
        tables = self.maintainer.stats()
        with self._lock:
            for name, then in list(self._forgotten.items()):
                if name in tables and _settled(tables[name]) == then:
                    del tables[name]
                else:  # gone, or changed since: a table created again under the name
                    del self._forgotten[name]
        return tables

    def _totals(self, tables: dict) -> list[int]:
        """The counters summed over `tables` plus what tables no longer there counted (under the lock)."""
        counted = {name: tuple(getattr(state, key) for key, _ in self.COUNTERS) for name, state in tables.items()}
        for name, then in self._counted.items():
            now = counted.get(name)
            if now is None or any(n < t for n, t in zip(now, then)):  # gone, or counting again from 0
                self._retired = [r + t for r, t in zip(self._retired, then)]
        self._counted = counted
        return [r + sum(c[i] for c in counted.values()) for i, r in enumerate(self._retired)]

    def read(self) -> tuple[dict, list[int], list[str]]:
        """At a scrape: each table's state, the server-wide counters, and the tables whose state
        changed since the last scrape (maintenance did something: they count as active)."""
        if self.maintainer is None:
            return {}, [0] * len(self.COUNTERS), []
        tables = self._tables()
        with self._lock:
            totals = self._totals(tables)
            seen = {name: _settled(state) for name, state in tables.items()}
            changed = [name for name, now in seen.items() if self._seen.get(name) != now]
            self._seen = seen
        return tables, totals, changed

    def collect(self, tables: dict, totals: list[int], shown: set[str]):
        if self.maintainer is None:
            return
        keys = self.GAUGES + self.MAINTENANCE_GAUGES + self.COUNTERS
        families = [GaugeMetricFamily(f"{TABLE}_{key}", text, labels=["table"]) for key, text in self.GAUGES]
        families += [GaugeMetricFamily(f"{TABLE}_maintenance_{key}", text, labels=["table"])
                     for key, text in self.MAINTENANCE_GAUGES]
        families += [CounterMetricFamily(f"{TABLE}_maintenance_{key}", text, labels=["table"])
                     for key, text in self.COUNTERS]
        amplification = GaugeMetricFamily(f"{TABLE}_maintenance_write_amplification_ratio",
                                          "compacted_bytes over ingested_bytes since this server started",
                                          labels=["table"])
        last = GaugeMetricFamily(f"{TABLE}_maintenance_last_timestamp_seconds",
                                 "Unix time of the table's last compaction or expiry", labels=["table", "step"])
        latest: dict[str, float] = {}
        for table, state in tables.items():
            for step, done in (("compaction", state.last_compaction), ("expiry", state.last_expiry)):
                if done is not None:
                    latest[step] = max(latest.get(step, 0), done.at_ms / 1000)
                    if table in shown:
                        last.add_metric([table, step], done.at_ms / 1000)
            if table not in shown:
                continue
            for family, (key, _) in zip(families, keys):
                family.add_metric([table], getattr(state, key))
            if state.write_amplification is not None:
                amplification.add_metric([table], state.write_amplification)
        yield from families
        yield amplification
        yield last

        for key, text in self.MAINTENANCE_GAUGES:
            yield GaugeMetricFamily(f"{NAMESPACE}_maintenance_{key}", f"{text}, all tables",
                                    value=sum(getattr(state, key) for state in tables.values()))
        for (key, text), total in zip(self.COUNTERS, totals):
            yield CounterMetricFamily(f"{NAMESPACE}_maintenance_{key}", f"{text}, all tables", value=total)
        compacted, ingested = totals[1], totals[2]
        ratio = GaugeMetricFamily(f"{NAMESPACE}_maintenance_write_amplification_ratio",
                                  "compacted_bytes over ingested_bytes of all tables since this server started")
        if ingested:
            ratio.add_metric([], round(compacted / ingested, 3))
        yield ratio
        newest = GaugeMetricFamily(f"{NAMESPACE}_maintenance_last_timestamp_seconds",
                                   "Unix time of the last compaction or expiry of any table", labels=["step"])
        for step, at in sorted(latest.items()):
            newest.add_metric([step], at)
        yield newest


def _settled(state) -> dict:
    """What /metrics shows of a table's maintenance state (`due` and `last_error` move without
    anything being done: a round that finds the table dropped)."""
    keys = [key for key, _ in _MaintenanceCollector.GAUGES + _MaintenanceCollector.MAINTENANCE_GAUGES
            + _MaintenanceCollector.COUNTERS] + ["write_amplification", "last_compaction", "last_expiry"]
    return {key: getattr(state, key) for key in keys}


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the scrapes would flood stderr
        pass
