"""tail's output layer: strict JSON lines, or an aligned table that streams batch by batch (rich)."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import sys
import time

import pyarrow as pa
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from flight_server.cli.logs import no_color


def json_value(value):
    """A value as strict JSON: ISO-8601 times, null for NaN and infinities, base64 bytes, exact decimals."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def cell(value) -> str:
    """A value as one line of table text: NULL, strings as they are, tabs and newlines escaped."""
    if value is None:
        return "NULL"
    value = json_value(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _type_width(t: pa.DataType | None) -> int:
    """Room most values of a column of type `t` need (None: a label such as _seq): set up front, so
    an id that grows from 99 to 100 in a later batch does not push the columns out of line; small
    enough that a few columns fit an 80-column terminal."""
    if t is None:
        return 6
    if pa.types.is_integer(t):
        top = -(1 << (t.bit_width - 1)) if pa.types.is_signed_integer(t) else (1 << t.bit_width) - 1
        return min(len(str(top)), 10)
    if pa.types.is_timestamp(t):
        return {"s": 19, "ms": 26, "us": 26, "ns": 29}[t.unit] + (6 if t.tz else 0)
    if pa.types.is_date(t):
        return 10
    if pa.types.is_time(t):
        return 15
    if pa.types.is_boolean(t):
        return 5
    if pa.types.is_decimal(t):
        return t.precision + 2
    if pa.types.is_floating(t):
        return 10
    return 16  # strings, bytes, nested: room for values a little longer than the first batch's


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich exits with code 1; a closed pipe is how `tail | head` ends, so tail's own handler
        # ends it quietly with 0.
        raise BrokenPipeError


class _Table:
    """An aligned table that streams: the column widths are fixed when the header is printed (the
    first batch's cells, and at least what the column's type usually needs), so every later row
    lines up under the header; a wider cell is cut with an ellipsis, as is any cell wider than
    MAX_WIDTH. Fitted to the terminal's width; rich measures unicode cells."""

    MAX_WIDTH = 48  # a cell wider than this is cut, with an ellipsis

    def __init__(self):
        terminal = sys.stdout.isatty()
        self.console = _Console(highlight=False, soft_wrap=False, width=None if terminal else 1 << 16,
                                no_color=no_color() or None)
        self.widths: list[int] | None = None

    def print(self, names: list[str], types: list, rows: list[list[str]]) -> None:
        header = self.widths is None
        if header:
            self.widths = self._fit([min(max([cell_len(n), _type_width(t)] + [cell_len(r[i]) for r in rows]),
                                         self.MAX_WIDTH) for i, (n, t) in enumerate(zip(names, types))])
        table = Table(box=box.SIMPLE_HEAD, show_header=header, show_edge=False, pad_edge=False, padding=(0, 1))
        for name, width in zip(names, self.widths):
            table.add_column(Text(name), width=width, no_wrap=True, overflow="ellipsis")
        for row in rows:
            table.add_row(*(Text(v) for v in row))
        self.console.print(table)

    def _fit(self, widths: list[int]) -> list[int]:
        room = self.console.width - 2 * len(widths)
        while sum(widths) > room and max(widths) > 4:
            widths[widths.index(max(widths))] -= 1
        return widths


class Output:
    """tail's output: rows as they arrive, as strict JSON lines or an aligned table; a current rate
    on stderr when it is a terminal, kept on its own line below the rows."""

    def __init__(self, fmt: str, limit: int | None):
        self.fmt, self.limit = fmt, limit
        self.rows = 0
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()
        self._rows_on_tty = sys.stdout.isatty()  # rows and rate share the screen: rows must not land on it
        self._window = (self.start, 0)  # (since, rows) of the rate shown
        self._rate = ""  # the rate line's text ("" until a second has passed)
        self._shown = False  # whether the rate line is on the screen now
        self._table = _Table() if fmt == "table" else None

    def batch(self, batch: pa.RecordBatch, extra: dict) -> bool:
        """Print `batch`; return False once the limit is reached."""
        rows = batch.to_pylist()
        if self.limit is not None:
            rows = rows[: self.limit - self.rows]
        n = len(rows)  # counted right after the print, with no call between: Ctrl-C lands before or after both
        if rows and self._rows_on_tty:
            self.clear_rate()
        if self._table is None:
            out = "\n".join(json.dumps({**json_value(r), **extra}, allow_nan=False, ensure_ascii=False)
                            for r in rows)
            if out:
                print(out, flush=True)
        elif rows:
            self._table.print(batch.schema.names + list(extra), list(batch.schema.types) + [None] * len(extra),
                              [[cell(v) for v in r.values()] + [str(v) for v in extra.values()] for r in rows])
            sys.stdout.flush()
        self.rows += n
        self.tick()
        return self.limit is None or self.rows < self.limit

    def tick(self) -> None:
        """Show the rows per second of the last second or so, on a terminal only."""
        if not self.tty:
            return
        since, rows = self._window
        now = time.monotonic()
        if now - since >= 1.0:
            rate = f"{(self.rows - rows) / (now - since):,.0f} rows/s, {self.rows} rows"
            self._window = (now, self.rows)
            self._shown = self._shown and rate == self._rate
            self._rate = rate
        if self._rate and not self._shown:
            print(f"\r\033[K{self._rate}", end="", file=sys.stderr, flush=True)
            self._shown = True

    def clear_rate(self) -> None:
        """Take the rate line off the screen (the cursor back at its start), for what comes next."""
        if self._shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
            self._shown = False

    def finish(self) -> None:
        """The last line, on stderr: how many rows in how long."""
        self.clear_rate()
        print(f"{self.rows} rows in {time.monotonic() - self.start:.2f}s", file=sys.stderr)
