"""tail's output layer: strict JSON lines, or an aligned table that streams batch by batch."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import os
import shutil
import sys
import time

import pyarrow as pa
from rich.cells import cell_len, set_cell_size


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


class _Table:
    """An aligned table that streams: each column as wide as its widest cell so far (at least what
    its type usually needs, so that an id growing from 99 to 100 does not move the columns), the
    header printed again when a column grows. A number, time or date is never cut; a string (or
    bytes, or a nested value) wider than MAX_WIDTH is, with an ellipsis, and so are the strings
    first when the rows would be wider than the terminal (a row of numbers wider than it wraps)."""

    MAX_WIDTH = 48  # a text cell wider than this is cut, with an ellipsis
    GAP = "   "

    def __init__(self):
        self.room = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        self.want: list[int] | None = None  # what each column's cells so far need
        self.widths: list[int] | None = None  # what the header was printed with
        self.fixed: list[bool] = []  # never cut (numbers, times, labels)
        self.names: list[str] = []  # the columns laid out: others start a new layout and header

    def lines(self, names: list[str], types: list, rows: list[list[str]]) -> tuple[list[str], int]:
        """The lines to print for `rows` (a header first when the widths changed), and how many
        of them are header lines."""
        if self.want is None or names != self.names:  # the first rows, or new columns (a schema change)
            self.names, self.widths = list(names), None
            self.fixed = [_never_cut(t) for t in types]
            self.want = [max(cell_len(n), _type_width(t)) for n, t in zip(names, types)]
        for i, fixed in enumerate(self.fixed):
            need = max((cell_len(r[i]) for r in rows), default=0)
            self.want[i] = max(self.want[i], need if fixed else min(need, self.MAX_WIDTH))
        widths = self._fit(list(self.want))
        out = []
        if widths != self.widths:
            self.widths = widths
            out += [self._row(names, widths), "\u2500" * (sum(widths) + len(self.GAP) * (len(widths) - 1))]
        header = len(out)
        out += [self._row(r, widths) for r in rows]
        return out, header

    def _row(self, cells: list[str], widths: list[int]) -> str:
        return self.GAP.join(_cut(c, w) for c, w in zip(cells, widths))

    def _fit(self, widths: list[int]) -> list[int]:
        """Text columns give up width, the widest first, down to 4, until the row fits the terminal."""
        if self.room is None:
            return widths
        over = sum(widths) + len(self.GAP) * (len(widths) - 1) - self.room
        while over > 0:
            cuttable = [i for i, w in enumerate(widths) if not self.fixed[i] and w > 4]
            if not cuttable:
                break
            i = max(cuttable, key=lambda k: widths[k])
            widths[i] -= 1
            over -= 1
        return widths


def _never_cut(t: pa.DataType | None) -> bool:
    return t is None or not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                             or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_nested(t))


def _cut(text: str, width: int) -> str:
    """`text` padded to `width` cells, or cut to it with an ellipsis (a wider number is never cut:
    its column is as wide)."""
    if cell_len(text) <= width:
        return text + " " * (width - cell_len(text))
    return set_cell_size(text, width - 1) + "\u2026"


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
        if rows and self._rows_on_tty:
            self.clear_rate()
        if self._table is None:
            lines, header = [json.dumps({**json_value(r), **extra}, allow_nan=False, ensure_ascii=False)
                             for r in rows], 0
        else:
            lines, header = self._table.lines(batch.schema.names + list(extra),
                                              list(batch.schema.types) + [None] * len(extra),
                                              [[cell(v) for v in r.values()] + [str(v) for v in extra.values()]
                                               for r in rows]) if rows else ([], 0)
        if lines:
            self._write(lines, header)
        self.tick()
        return self.limit is None or self.rows < self.limit

    def _write(self, lines: list[str], header: int) -> None:
        """Write the lines to stdout and count the rows among them that were written whole: after
        `| head` closed the pipe, the count is of rows written, not of rows attempted."""
        sys.stdout.flush()
        data = ("\n".join(lines) + "\n").encode(sys.stdout.encoding or "utf-8", errors="replace")
        done = 0
        try:
            while done < len(data):
                done += os.write(sys.stdout.fileno(), data[done:])
        finally:
            self.rows += max(0, data.count(b"\n", 0, done) - header)

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
