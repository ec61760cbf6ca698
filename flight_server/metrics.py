"""Prometheus metrics of one server (prometheus-client), `/metrics` and `/healthz` over HTTP.

Each server has its own registry, so several servers in one process (tests) never share counts.
Counters move where the work happens (one `inc` per batch, none when metrics are off); queue
depths and open follows are read from the registries only when Prometheus scrapes.

Names follow Prometheus' conventions: `flight_paimon_` once, then what is measured and its unit
(`_seconds`, `_bytes`, `_total` for counters, `_ratio` for a ratio), and `flight_paimon_build_info`
(value 1, the version as a label). prometheus-client's `_created` series (a gauge per counter and
histogram series, doubling the series of every table) are turned off for the process.
"""

from __future__ import annotations

import threading
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry, Counter, Gauge, GCCollector, Histogram, PlatformCollector, ProcessCollector,
    disable_created_metrics, make_wsgi_app,
)
from prometheus_client.core import GaugeMetricFamily

from flight_server.auth import AuthConfig
from flight_server.wire.errors import PermissionDenied, Unauthenticated
from flight_server.wire.version import VERSION

NAMESPACE = "flight_paimon"


class Metrics:
    """The metrics one server records; `serve_http` exposes them."""

    def __init__(self, push_registry, paimon_source, maintainer=None):
        # A process-wide switch of prometheus-client, read at each scrape.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.started = time.time()
        self._push = push_registry
        self._http: tuple[WSGIServer, threading.Thread] | None = None
        r, ns = self.registry, NAMESPACE
        Gauge("build_info", "The server's flight-paimon version (value 1)", ["version"], namespace=ns,
              registry=r).labels(VERSION).set(1)
        self.rpcs = Counter("rpcs", "Finished RPCs by method and status", ["method", "status"], namespace=ns, registry=r)
        self.rpc_seconds = Histogram("rpc_duration_seconds", "RPC duration by method (streams: until they end)",
                                     ["method"], namespace=ns, registry=r,
                                     buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 2, 10, 60, 600))
        self.open_streams = Gauge("open_streams", "do_put and do_get streams now open", ["method"], namespace=ns,
                                  registry=r)
        self.rows = Counter("rows", "Rows moved, by table kind, table and direction (in: pushed, out: read)",
                            ["kind", "table", "direction"], namespace=ns, registry=r)
        self.bytes = Counter("bytes", "Arrow bytes moved, by table kind, table and direction",
                             ["kind", "table", "direction"], namespace=ns, registry=r)
        self.commits = Counter("ingest_commits", "Group commits of durable writes, by Paimon table", ["table"],
                               namespace=ns, registry=r)
        self.commit_seconds = Histogram("ingest_commit_seconds", "Write + commit time of one group commit",
                                        ["table"], namespace=ns, registry=r,
                                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5))
        self.committed_rows = Counter("ingest_committed_rows", "Rows committed by durable writes", ["table"],
                                      namespace=ns, registry=r)
        r.register(_QueueCollector(push_registry, paimon_source))
        self._maintenance = _MaintenanceCollector(maintainer)
        if maintainer is not None:
            r.register(self._maintenance)
        # As prometheus-client's default registry has them: process_* (CPU, memory, open fds, start
        # time), python_info, python_gc_*.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

    def committed(self, table: str, rows: int, nbytes: int, seconds: float) -> None:
        """One group commit of durable writes landed."""
        self.commits.labels(table).inc()
        self.commit_seconds.labels(table).observe(seconds)
        self.committed_rows.labels(table).inc(rows)

    def served(self, kind: str, table, direction: str):
        """The (rows, bytes) counters one stream adds to."""
        labels = (kind, str(table), direction)
        return self.rows.labels(*labels), self.bytes.labels(*labels)

    def forget_push_table(self, name: str) -> None:
        """A dropped push table's series go (rows and bytes in, out and viewed): a server that
        cycles tables all day keeps no series per table it ever had (each is memory here and a time
        series in Prometheus)."""
        for family in (self.rows, self.bytes):
            family.remove_by_labels({"kind": "push", "table": name})

    def forget_paimon_table(self, name: str) -> None:
        """A dropped Paimon table's series go: rows and bytes, its group commits, and what its
        maintenance reported (until the maintainer reports something new of a table created again)."""
        for family in (self.rows, self.bytes):
            family.remove_by_labels({"kind": "paimon", "table": name})
        for family in (self.commits, self.commit_seconds, self.committed_rows):
            family.remove_by_labels({"table": name})
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


class _QueueCollector:
    """Queue depths and open follows, read at scrape time."""

    def __init__(self, push_registry, paimon_source):
        self.push, self.paimon = push_registry, paimon_source

    def collect(self):
        batches = GaugeMetricFamily(f"{NAMESPACE}_push_queued_batches", "Batches a push partition holds",
                                    labels=["table", "partition"])
        nbytes = GaugeMetricFamily(f"{NAMESPACE}_push_queued_bytes", "Bytes a push partition holds",
                                   labels=["table", "partition"])
        for table in self.push.tables():
            for p, log in enumerate(table.partitions):
                s = log.stats()
                batches.add_metric([table.name, str(p)], s.queued_batches)
                nbytes.add_metric([table.name, str(p)], s.queued_bytes)
        yield batches
        yield nbytes
        yield GaugeMetricFamily(f"{NAMESPACE}_open_follows", "Paimon follow streams now open",
                                value=self.paimon.open_follows)
        lag = GaugeMetricFamily(f"{NAMESPACE}_follow_lag_snapshots",
                                "Committed snapshots the furthest-behind open follow of a table has yet to send",
                                labels=["table"])
        for table, snapshots in self.paimon.follow_lag().items():
            lag.add_metric([table], snapshots)
        yield lag


class _MaintenanceCollector:
    """Per Paimon table this server maintains: its shape after the last round, and what was done."""

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

    def collect(self):
        from prometheus_client.core import CounterMetricFamily

        tables = self._tables()
        families = [GaugeMetricFamily(f"{NAMESPACE}_table_{key}", text, labels=["table"]) for key, text in self.GAUGES]
        families += [GaugeMetricFamily(f"{NAMESPACE}_maintenance_{key}", text, labels=["table"])
                     for key, text in self.MAINTENANCE_GAUGES]
        families += [CounterMetricFamily(f"{NAMESPACE}_maintenance_{key}", text, labels=["table"])
                     for key, text in self.COUNTERS]
        amplification = GaugeMetricFamily(f"{NAMESPACE}_maintenance_write_amplification_ratio",
                                          "compacted_bytes over ingested_bytes since this server started",
                                          labels=["table"])
        last = GaugeMetricFamily(f"{NAMESPACE}_maintenance_last_timestamp_seconds",
                                 "Unix time of the table's last compaction or expiry", labels=["table", "step"])
        for table, state in tables.items():
            for family, (key, _) in zip(families, self.GAUGES + self.MAINTENANCE_GAUGES + self.COUNTERS):
                family.add_metric([table], getattr(state, key))
            if state.write_amplification is not None:
                amplification.add_metric([table], state.write_amplification)
            for step, done in (("compaction", state.last_compaction), ("expiry", state.last_expiry)):
                if done is not None:
                    last.add_metric([table, step], done.at_ms / 1000)
        yield from families
        yield amplification
        yield last


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
