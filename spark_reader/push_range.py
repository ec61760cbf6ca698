"""The batches [start, end) a batch read takes of one push partition, as Spark's Kafka batch
source bounds a read: `startingOffsets` (default earliest: the oldest batch not yet committed) or
`startingTimestamp` to `endingOffsets` (default latest: the partition's next batch when the task
reads it) or `endingTimestamp`, or to the partition's EOF with endingOffsets `eof` (waiting for
every producer to end). Resolved in the task against where the partition stands then (the
server's `offsets`; a timestamp is its first held batch appended at or after then).
"""

from __future__ import annotations

from flight_server.wire.actions import PartitionOffsets
from spark_reader.flight_io import SourceError
from spark_reader.options import EARLIEST, EOF, LATEST, OptionError, Options

FAILED = "failed"  # a partition's state in the server's `offsets`


def check_batch(opts: Options, partitions: int) -> None:
    """Refuse, on the driver, what a batch read cannot do: start at `latest` (as Kafka's batch
    source refuses it: nothing would be read) or name a partition the table lacks."""
    if opts.starting_offsets == "latest" or (isinstance(opts.starting_offsets, dict)
                                              and LATEST in opts.starting_offsets.values()):
        raise OptionError("Option 'startingOffsets' 'latest' (or -1) is for streams; a batch read would read "
                          "nothing. Use 'earliest' (the default) or a JSON object of partition to batch number.")
    for key, given in (("startingOffsets", opts.starting_offsets), ("endingOffsets", opts.ending_offsets)):
        if isinstance(given, dict):
            unknown = sorted((p for p in given if int(p) >= partitions), key=int)
            if unknown:
                raise OptionError(f"Option {key!r} names partition(s) {', '.join(unknown)} that {opts.target} does "
                                  f"not have (it has {partitions}: 0 to {partitions - 1}).")


def at_timestamp(opts: Options, state: PartitionOffsets, key: str) -> int:
    """The server's answer to `offsets` with timestamp_ms (a server from before it answers None)."""
    if state.at_timestamp is None:
        raise SourceError(f"Option {key!r}: the flight-paimon server at {opts.uri} does not find batches by time "
                          "(it is older than this client); upgrade it, or read by startingOffsets/endingOffsets.")
    return state.at_timestamp


def batch_range(opts: Options, p: int, state: PartitionOffsets, start_at: int | None = None,
                end_at: int | None = None) -> tuple[int, int | None]:
    """Partition `p`'s range: `(start, end)`, `end` None to read to EOF; `start_at`/`end_at` the
    batches startingTimestamp/endingTimestamp found. A partition that failed fails the read (read
    to its end, so the reader gets the partition's cause after what is held): its producer's rows
    are incomplete."""
    start = _start(opts, p, state) if start_at is None else max(start_at, state.committed)
    ending = opts.ending_offsets or "latest"
    if ending == EOF or state.state == FAILED:
        return start, None
    if end_at is not None:
        return start, max(start, end_at)
    end = ending.get(str(p), LATEST) if isinstance(ending, dict) else LATEST
    if end == LATEST:
        return start, max(start, state.next_seq)
    if end > state.next_seq:
        raise SourceError(
            f"Option 'endingOffsets' reads partition {p} of {opts.target} up to batch {end}, but it has "
            f"{state.next_seq} batch(es) so far; ask for at most {state.next_seq}, 'latest', or 'eof' to wait "
            "until its producers end.")
    if end < start:
        raise SourceError(
            f"Option 'endingOffsets' ends partition {p} of {opts.target} at batch {end}, before its start {start} "
            "(startingOffsets, or the oldest batch still held); end at or after the start.")
    return start, end


def _start(opts: Options, p: int, state: PartitionOffsets) -> int:
    given = opts.starting_offsets
    seq = given.get(str(p), EARLIEST) if isinstance(given, dict) else EARLIEST
    if seq == EARLIEST:
        return state.committed
    if seq < state.committed:
        if opts.fail_on_data_loss:
            raise SourceError(
                f"Option 'startingOffsets' reads partition {p} of {opts.target} from batch {seq}, but batches "
                f"before {state.committed} were committed and freed; start at {state.committed} or later, or set "
                ".option('failOnDataLoss', 'false') to read from the oldest batch held.")
        return state.committed
    if seq > state.next_seq and opts.ending_offsets != EOF:
        raise SourceError(
            f"Option 'startingOffsets' reads partition {p} of {opts.target} from batch {seq}, but it has "
            f"{state.next_seq} batch(es) so far; start at most at {state.next_seq}, or read with endingOffsets "
            "'eof' to wait for them.")
    return seq
