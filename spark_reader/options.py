"""The data source's options, parsed once into a typed, picklable value with clear errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from flight_server.wire import requests
from producers.credentials import Credentials

SCAN_MODES = requests.SCAN_MODES  # one vocabulary with `flight_cli tail --from`
_SCHEMES = ("grpc", "grpc+tcp", "grpc+tls", "grpc+unix")
_KNOWN = {
    "uri", "table", "push", "timeout", "scan.snapshot-id", "incremental-between", "scan.mode",
    "consumer-id", "read.stream.maxsnapshotspertrigger", "read.stream.maxrowspertrigger",
    "path",  # Spark passes save()/load() arguments as "path"; refused below when set
    "checkpointlocation",  # writeStream's own option, passed along to sinks; Spark keeps the checkpoint
    "token", "tls.root-certs", "tls.cert-chain", "tls.private-key",  # a secured server (docs/protocol.md)
}


class OptionError(ValueError):
    """A bad or conflicting flight-paimon option; raised on the driver at load()/save()."""


@dataclass(frozen=True)
class Options:
    """What one spark.read/readStream/write of "flight-paimon" asked for."""

    uri: str
    table: str | None = None  # a Paimon table "db.t"
    push: str | None = None  # a push table name
    timeout: float = 30.0  # seconds for each unary call; reads are bounded by Spark's own task handling
    snapshot_id: int | None = None
    incremental_between: tuple[int, int] | None = None
    scan_mode: str = "latest-full"
    consumer_id: str | None = None
    max_snapshots_per_trigger: int | None = None
    max_rows_per_trigger: int | None = None
    # The bearer token and TLS material (PEM read on the driver, shipped to tasks); never printed.
    credentials: Credentials = field(default_factory=Credentials, repr=False)

    @property
    def target(self) -> str:
        return f"Paimon table {self.table!r}" if self.table else f"push table {self.push!r}"


def parse(raw: Mapping[str, str]) -> Options:
    """Validate the user's options (case-insensitive keys, string values) into `Options`."""
    opts = {str(k).lower(): v for k, v in dict(raw).items()}
    unknown = sorted(set(opts) - _KNOWN)
    if unknown:
        raise OptionError(
            f"flight-paimon does not know the option(s) {', '.join(unknown)}; known options: "
            f"{', '.join(sorted(_KNOWN - {'path'}))}."
        )
    if opts.get("path"):
        raise OptionError(
            f"flight-paimon takes no path ({opts['path']!r}); name the data with "
            ".option('table', 'db.t') or .option('push', NAME) and call load()/save() without arguments."
        )
    uri = _uri(opts.get("uri"))
    table, push = opts.get("table") or None, opts.get("push") or None
    if table and push:
        raise OptionError(
            f"Options 'table' ({table!r}) and 'push' ({push!r}) were both given; flight-paimon reads "
            "one source: set exactly one of them."
        )
    if not table and not push:
        raise OptionError(
            "flight-paimon needs a source: set .option('table', 'db.t') for a Paimon table or "
            ".option('push', NAME) for a push table."
        )
    if table and "." not in table:
        raise OptionError(f"Option 'table' must name a Paimon table as 'database.table', got {table!r}.")
    # Paimon's rule: without scan.mode, a scan.snapshot-id means "from that snapshot".
    default_mode = "from-snapshot" if opts.get("scan.snapshot-id") else "latest-full"
    mode = (opts.get("scan.mode") or default_mode).strip().lower()
    if mode not in SCAN_MODES:
        raise OptionError(f"Option 'scan.mode' must be one of {', '.join(SCAN_MODES)}, got {mode!r}.")
    parsed = Options(
        uri=uri,
        table=table,
        push=push,
        timeout=_number(opts, "timeout", float, 30.0),
        snapshot_id=_number(opts, "scan.snapshot-id", int),
        incremental_between=_between(opts.get("incremental-between")),
        scan_mode=mode,
        consumer_id=opts.get("consumer-id") or None,
        max_snapshots_per_trigger=_number(opts, "read.stream.maxsnapshotspertrigger", int),
        max_rows_per_trigger=_number(opts, "read.stream.maxrowspertrigger", int),
        credentials=_credentials(opts, uri),
    )
    _check_combinations(parsed, "scan.mode" in opts)
    return parsed


def _uri(value: str | None) -> str:
    if not value:
        raise OptionError("flight-paimon needs the server's address: .option('uri', 'grpc://HOST:PORT').")
    try:
        parsed = urlparse(value)
    except ValueError as e:
        raise OptionError(f"Option 'uri' {value!r} is not a Flight address ({e}); use grpc://HOST:PORT.") from None
    if parsed.scheme not in _SCHEMES or not (parsed.hostname or parsed.scheme == "grpc+unix"):
        raise OptionError(
            f"Option 'uri' {value!r} is not a Flight address; use grpc://HOST:PORT "
            f"(schemes: {', '.join(_SCHEMES)})."
        )
    try:
        port = parsed.port
    except ValueError as e:
        raise OptionError(f"Option 'uri' {value!r} has a bad port: {e}.") from None
    if parsed.scheme != "grpc+unix" and port is None:
        raise OptionError(f"Option 'uri' {value!r} has no port; use grpc://HOST:PORT.")
    return value


def _credentials(opts: dict, uri: str) -> Credentials:
    try:
        creds = Credentials.of(opts.get("token") or None, opts.get("tls.root-certs") or None,
                               opts.get("tls.cert-chain") or None, opts.get("tls.private-key") or None)
    except ValueError as e:
        raise OptionError(f"Options token / tls.*: {e}") from None
    if creds.tls and not uri.startswith("grpc+tls://"):
        raise OptionError(f"Options tls.* were given but option 'uri' {uri!r} is not a TLS address; use grpc+tls://HOST:PORT.")
    return creds


def _number(opts: dict, key: str, kind: type, default=None):
    if key not in opts or opts[key] in (None, ""):
        return default
    try:
        value = kind(opts[key])
    except (TypeError, ValueError):
        raise OptionError(f"Option {key!r} must be a {kind.__name__}, got {opts[key]!r}.") from None
    if value <= 0 and not (key == "scan.snapshot-id" and value == 0):
        raise OptionError(f"Option {key!r} must be positive, got {opts[key]!r}.")
    return value


def _between(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    try:
        start, end = (int(x) for x in value.split(","))
    except ValueError:
        raise OptionError(
            f"Option 'incremental-between' must be two snapshot ids 'START,END' (e.g. '3,7'), got {value!r}."
        ) from None
    if not 0 <= start <= end:
        raise OptionError(f"Option 'incremental-between' {value!r} needs 0 <= START <= END.")
    return start, end


def _check_combinations(o: Options, mode_given: bool) -> None:
    if o.push and (o.snapshot_id is not None or o.incremental_between or mode_given or o.consumer_id):
        raise OptionError(
            f"Options scan.snapshot-id, incremental-between, scan.mode and consumer-id apply to Paimon "
            f"tables; {o.target} takes none of them."
        )
    if o.snapshot_id is not None and o.incremental_between:
        raise OptionError("Options 'scan.snapshot-id' and 'incremental-between' conflict; set one of them.")
    if mode_given and o.scan_mode.startswith("from-snapshot") and o.snapshot_id is None:
        raise OptionError(f"scan.mode {o.scan_mode!r} needs .option('scan.snapshot-id', N).")
