"""The data source's options, parsed once into a typed, picklable value with clear errors."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from flight_server.wire import requests
from flight_server.wire.units import parse_timestamp_ms
from producers.credentials import Credentials

# One vocabulary with `flight_cli tail --from`, plus Paimon's from-timestamp.
SCAN_MODES = requests.SCAN_MODES + ("from-timestamp",)
AUDIT_LOG = "$audit_log"  # Paimon's system table of a table's changes: "db.t$audit_log"
ROW_KIND = "rowkind"  # the change column as Paimon's connectors name it (+I, -U, +U, -D)
_SCHEMES = ("grpc", "grpc+tcp", "grpc+tls", "grpc+unix")
_PAIMON_ONLY = {  # Paimon's Spark connector names
    "scan.snapshot-id", "incremental-between", "scan.mode", "scan.timestamp-millis", "scan.timestamp",
    "scan.tag-name", "consumer-id", "read.changelog", "read.stream.maxsnapshotspertrigger",
    "read.stream.maxrowspertrigger", "read.stream.minrowspertrigger", "read.stream.maxtriggerdelayms",
    "read.stream.maxbytespertrigger", "read.stream.maxfilespertrigger", "read.filter-pushdown",
    "mergeschema",  # a write adds the DataFrame's new columns to the table (Delta's and Paimon's name)
}
_PUSH_ONLY = {"startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp", "maxoffsetspertrigger",
              "failondataloss"}  # Spark's Kafka source's names
_KNOWN = _PAIMON_ONLY | _PUSH_ONLY | {
    "uri", "table", "push", "timeout",
    "path",  # Spark passes save()/load() arguments as "path"; refused below when set
    "checkpointlocation",  # writeStream's own option, passed along to sinks; Spark keeps the checkpoint
    "token", "tls.root-certs", "tls.cert-chain", "tls.private-key",  # a secured server (docs/protocol.md)
    "write.drop-extra-columns",  # a write may drop DataFrame columns the table does not have
}
# How the options are spelled in errors and docs (Spark takes any case).
_SPELLED = {k.lower(): k for k in (
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp", "maxOffsetsPerTrigger", "failOnDataLoss", "mergeSchema",
    "checkpointLocation", "read.stream.maxSnapshotsPerTrigger", "read.stream.maxRowsPerTrigger",
    "read.stream.minRowsPerTrigger", "read.stream.maxTriggerDelayMs", "read.stream.maxBytesPerTrigger",
    "read.stream.maxFilesPerTrigger")}
# Kafka's words for a partition's offsets in startingOffsets/endingOffsets JSON.
EARLIEST, LATEST = -2, -1
EOF = "eof"  # endingOffsets: a batch read waits until every producer of a partition has ended


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
    incremental_between: tuple[int, int] | None = None  # snapshot ids A,B: the delta A+1..B
    incremental_tags: tuple[str, str] | None = None  # incremental-between 'TAG1,TAG2': resolved on the driver
    scan_mode: str = "latest-full"
    consumer_id: str | None = None
    timestamp_millis: int | None = None  # scan.timestamp-millis, or scan.timestamp read as epoch ms
    tag_name: str | None = None  # scan.tag-name: resolved to its snapshot on the driver
    changelog: bool = False  # read.changelog: a leading `rowkind` column
    system: str | None = None  # "audit_log" for "db.t$audit_log": the server reads Paimon's system table
    max_snapshots_per_trigger: int | None = None
    max_rows_per_trigger: int | None = None
    min_rows_per_trigger: int | None = None
    max_trigger_delay_ms: int | None = None
    max_bytes_per_trigger: int | None = None
    max_files_per_trigger: int | None = None
    # Push streams, with the names of Spark's Kafka source.
    starting_offsets: str | dict[str, int] = "earliest"  # "earliest" | "latest" | {"P": seq, EARLIEST or LATEST}
    # Batch reads: "latest" (where each partition stands when its task reads; the default) | EOF |
    # {"P": seq or LATEST}; None when not given (a stream refuses it, as Kafka's does).
    ending_offsets: str | dict[str, int] | None = None
    # Kafka's startingTimestamp/endingTimestamp (epoch ms): each partition's first held batch the
    # server appended at or after then (the server's `offsets` with timestamp_ms).
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None  # batches (a push table's offsets count batches)
    fail_on_data_loss: bool = True
    drop_extra_columns: bool = False  # write.drop-extra-columns: else a column the table lacks is refused
    merge_schema: bool = False  # mergeSchema: the DataFrame's columns the table lacks are added to it
    filter_pushdown: bool = False  # read.filter-pushdown: the server prunes by the query's filters (see README)
    # The bearer token and TLS material (PEM read on the driver, shipped to tasks); never printed.
    credentials: Credentials = field(default_factory=Credentials, repr=False)

    @property
    def target(self) -> str:
        if self.table:
            return f"Paimon table {self.table + (f'${self.system}' if self.system else '')!r}"
        return f"push table {self.push!r}"


def parse(raw: Mapping[str, str]) -> Options:
    """Validate the user's options (case-insensitive keys, string values) into `Options`."""
    opts = {str(k).lower(): v for k, v in dict(raw).items()}
    unknown = sorted(set(opts) - _KNOWN)
    if unknown:
        raise OptionError(f"flight-paimon does not know the option(s) {', '.join(map(_unknown, unknown))}; "
                          f"known options: {', '.join(sorted(map(spelled, _KNOWN - {'path'}), key=str.lower))}.")
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
    audit_log = bool(table) and table.lower().endswith(AUDIT_LOG)
    if audit_log:
        table = table[: -len(AUDIT_LOG)]
    if table and "." not in table:
        raise OptionError(f"Option 'table' must name a Paimon table as 'database.table', got {table!r}.")
    # Paimon's rule: without scan.mode, a scan.snapshot-id or scan.tag-name means "from that
    # snapshot", a scan.timestamp-millis or scan.timestamp "from that time".
    default_mode = ("from-snapshot" if opts.get("scan.snapshot-id") or opts.get("scan.tag-name") else
                    "from-timestamp" if opts.get("scan.timestamp-millis") or opts.get("scan.timestamp") else
                    "latest-full")
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
        incremental_tags=_between_tags(opts.get("incremental-between")),
        scan_mode=mode,
        consumer_id=opts.get("consumer-id") or None,
        timestamp_millis=_timestamp_millis(opts),
        tag_name=opts.get("scan.tag-name") or None,
        changelog=_flag(opts, "read.changelog", False),
        system=AUDIT_LOG[1:] if audit_log else None,
        max_snapshots_per_trigger=_number(opts, "read.stream.maxsnapshotspertrigger", int),
        max_rows_per_trigger=_number(opts, "read.stream.maxrowspertrigger", int),
        min_rows_per_trigger=_number(opts, "read.stream.minrowspertrigger", int),
        max_trigger_delay_ms=_number(opts, "read.stream.maxtriggerdelayms", int),
        max_bytes_per_trigger=_number(opts, "read.stream.maxbytespertrigger", int),
        max_files_per_trigger=_number(opts, "read.stream.maxfilespertrigger", int),
        starting_offsets=_offsets(opts, "startingoffsets", ("earliest", "latest"), (EARLIEST, LATEST)),
        ending_offsets=_offsets(opts, "endingoffsets", ("latest", EOF), (LATEST,)),
        starting_timestamp=_point_in_time(opts, "startingtimestamp"),
        ending_timestamp=_point_in_time(opts, "endingtimestamp"),
        max_offsets_per_trigger=_number(opts, "maxoffsetspertrigger", int),
        fail_on_data_loss=_flag(opts, "failondataloss", True),
        drop_extra_columns=_flag(opts, "write.drop-extra-columns", False),
        merge_schema=_flag(opts, "mergeschema", False),
        filter_pushdown=_flag(opts, "read.filter-pushdown", False),
        credentials=_credentials(opts, uri),
    )
    _check_combinations(parsed, "scan.mode" in opts, sorted(set(opts) & (_PUSH_ONLY if table else _PAIMON_ONLY)))
    _check_push_bounds(opts)
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


def _timestamp_millis(opts: dict) -> int | None:
    """scan.timestamp-millis (epoch ms) or Paimon's scan.timestamp ('2026-11-24 12:00:00', the
    driver's local time), read by the one parser of a point in time (which takes either form in either)."""
    given = [k for k in ("scan.timestamp-millis", "scan.timestamp") if opts.get(k) not in (None, "")]
    if len(given) > 1:
        raise OptionError("Options 'scan.timestamp-millis' and 'scan.timestamp' conflict; set one of them.")
    if not given:
        return None
    try:
        return parse_timestamp_ms(opts[given[0]])
    except ValueError as e:
        raise OptionError(f"Option {given[0]!r}: {e}.") from None


def _flag(opts: dict, key: str, default: bool) -> bool:
    value = str(opts.get(key) or "").strip().lower()
    if not value:
        return default
    if value not in ("true", "false"):
        raise OptionError(f"Option {key!r} must be 'true' or 'false', got {opts[key]!r}.")
    return value == "true"


def _offsets(opts: dict, key: str, words: tuple[str, ...], specials: tuple[int, ...]) -> str | dict[str, int] | None:
    """Kafka's startingOffsets/endingOffsets for a push table: one of `words`, or a JSON object of
    partition to batch sequence number (or one of Kafka's `specials`: -2 earliest, -1 latest)."""
    text = str(opts.get(key) or "").strip()
    if not text:
        return None if key == "endingoffsets" else words[0]
    if text.lower() in words:
        return text.lower()
    try:
        parsed = json.loads(text)
        ok = isinstance(parsed, dict) and all(
            _is_id(str(p)) and isinstance(s, int) and not isinstance(s, bool) and (s >= 0 or s in specials)
            for p, s in parsed.items())
    except ValueError:
        ok = False
    if not ok:
        meaning = {EARLIEST: "-2 the earliest held", LATEST: "-1 the latest"}
        said = {"earliest": " (the default)", "latest": " (the default)" if key == "endingoffsets" else "",
                EOF: " (wait until the producers end)"}
        raise OptionError(
            f"Option {spelled(key)!r} must be {' or '.join(repr(w) + said[w] for w in words)}, or a JSON object of partition "
            f"to batch sequence number, e.g. '{{\"0\": 12, \"1\": 0}}' "
            f"({', '.join(meaning[v] for v in specials)}); got {opts[key]!r}.")
    return {str(int(p)): s for p, s in parsed.items()}


def _point_in_time(opts: dict, key: str) -> int | None:
    """startingTimestamp/endingTimestamp: epoch ms, or a time as scan.timestamp takes it."""
    if opts.get(key) in (None, ""):
        return None
    try:
        return parse_timestamp_ms(opts[key])
    except ValueError as e:
        raise OptionError(f"Option {spelled(key)!r}: {e}.") from None


def _check_push_bounds(opts: dict) -> None:
    """A start and an end each given one way (Kafka lets a timestamp win; here both is an error)."""
    for a, b in (("startingoffsets", "startingtimestamp"), ("endingoffsets", "endingtimestamp")):
        if opts.get(a) not in (None, "") and opts.get(b) not in (None, ""):
            raise OptionError(f"Options {spelled(a)!r} and {spelled(b)!r} conflict; set one of them.")
    start, end = _point_in_time(opts, "startingtimestamp"), _point_in_time(opts, "endingtimestamp")
    if start is not None and end is not None and start > end:
        raise OptionError(f"Option 'startingTimestamp' ({start} ms) is after 'endingTimestamp' ({end} ms); "
                          "start at or before the end.")


def spelled(key: str) -> str:
    """An option's name as the docs spell it (Spark takes any case)."""
    return _SPELLED.get(key, key)


def _unknown(key: str) -> str:
    """An unknown option, with the known one it is closest to."""
    close = difflib.get_close_matches(key, sorted(_KNOWN - {"path"}), n=1, cutoff=0.75)
    return f"{key} (did you mean {spelled(close[0])}?)" if close else key


def _between_parts(value: str | None) -> tuple[str, str] | None:
    """incremental-between's two ends, as Paimon takes them: two snapshot ids '3,7' or two tags
    'TAG1,TAG2' (a tag is never all digits: Paimon refuses such names)."""
    if not value:
        return None
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(parts) or _is_id(parts[0]) != _is_id(parts[1]):
        raise OptionError(
            f"Option 'incremental-between' must be two snapshot ids 'START,END' (e.g. '3,7') or two tags "
            f"'TAG1,TAG2', got {value!r}.")
    return parts[0], parts[1]


def _between(value: str | None) -> tuple[int, int] | None:
    parts = _between_parts(value)
    if parts is None or not _is_id(parts[0]):
        return None
    start, end = int(parts[0]), int(parts[1])
    if start > end:
        raise OptionError(f"Option 'incremental-between' {value!r} needs START <= END (the delta of snapshots "
                          "START+1..END).")
    return start, end


def _between_tags(value: str | None) -> tuple[str, str] | None:
    parts = _between_parts(value)
    return None if parts is None or _is_id(parts[0]) else parts


def _is_id(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _check_combinations(o: Options, mode_given: bool, misplaced: list[str]) -> None:
    if misplaced:
        kind, other = ("Paimon tables", "push tables (Kafka's names)") if o.push else ("push tables", "Paimon tables")
        raise OptionError(
            f"Option(s) {', '.join(map(spelled, misplaced))} apply to {kind}; {o.target} takes none of them "
            f"(see spark_reader/README.md for the options of {other})."
        )
    starts = [k for k, v in (("scan.snapshot-id", o.snapshot_id), ("scan.tag-name", o.tag_name),
                             ("scan.timestamp-millis", o.timestamp_millis),
                             ("incremental-between", o.incremental_between or o.incremental_tags))
              if v is not None]
    if len(starts) > 1:
        raise OptionError(f"Options {' and '.join(repr(k) for k in starts)} conflict; set one of them.")
    if mode_given and o.scan_mode.startswith("from-snapshot") and o.snapshot_id is None and o.tag_name is None:
        raise OptionError(f"scan.mode {o.scan_mode!r} needs .option('scan.snapshot-id', N) or .option('scan.tag-name', T).")
    if o.scan_mode == "from-timestamp" and o.timestamp_millis is None:
        raise OptionError("scan.mode 'from-timestamp' needs .option('scan.timestamp-millis', MILLIS) or "
                          ".option('scan.timestamp', '2026-11-24 12:00:00').")
    if o.timestamp_millis is not None and o.scan_mode != "from-timestamp":
        raise OptionError(f"Option 'scan.timestamp-millis' goes with scan.mode 'from-timestamp', not {o.scan_mode!r}.")
    if o.max_trigger_delay_ms is not None and o.min_rows_per_trigger is None:
        raise OptionError("Option 'read.stream.maxTriggerDelayMs' bounds the wait of "
                          "'read.stream.minRowsPerTrigger'; set that too.")
