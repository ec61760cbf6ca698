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


class _Table:
    """An aligned table that streams: column widths are set by the first batch and only grow (so
    batches line up as long as they can), are fitted to the terminal's width, and cut a cell wider
    than MAX_WIDTH with an ellipsis; rich measures unicode cells."""

    MAX_WIDTH = 48  # a cell wider than this is cut, with an ellipsis

    def __init__(self):
        terminal = sys.stdout.isatty()
        self.console = Console(highlight=False, soft_wrap=False, width=None if terminal else 1 << 16)
        self.widths: list[int] | None = None

    def print(self, names: list[str], rows: list[list[str]]) -> None:
        header = self.widths is None
        wanted = [min(max([cell_len(n)] + [cell_len(r[i]) for r in rows]), self.MAX_WIDTH)
                  for i, n in enumerate(names)]
        self.widths = self._fit(wanted if header else [max(a, b) for a, b in zip(self.widths, wanted)])
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
    on stderr when it is a terminal."""

    def __init__(self, fmt: str, limit: int | None):
        self.fmt, self.limit = fmt, limit
        self.rows = 0
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()
        self._window = (self.start, 0)  # (since, rows) of the rate shown
        self._table = _Table() if fmt == "table" else None

    def batch(self, batch: pa.RecordBatch, extra: dict) -> bool:
        """Print `batch`; return False once the limit is reached."""
        rows = batch.to_pylist()
        if self.limit is not None:
            rows = rows[: self.limit - self.rows]
        if self._table is None:
            out = "\n".join(json.dumps({**json_value(r), **extra}, allow_nan=False, ensure_ascii=False)
                            for r in rows)
            if out:
                print(out, flush=True)
        elif rows:
            self._table.print(batch.schema.names + list(extra),
                              [[cell(v) for v in r.values()] + [str(v) for v in extra.values()] for r in rows])
            sys.stdout.flush()
        self.rows += len(rows)
        self.tick()
        return self.limit is None or self.rows < self.limit

    def tick(self) -> None:
        """Show the rows per second of the last second or so, on a terminal only."""
        since, rows = self._window
        now = time.monotonic()
        if self.tty and now - since >= 1.0:
            print(f"\r\033[K{(self.rows - rows) / (now - since):,.0f} rows/s, {self.rows} rows",
                  end="", file=sys.stderr, flush=True)
            self._window = (now, self.rows)
