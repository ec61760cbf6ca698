"""A function a table's commit step runs for another thread between two group commits (a
compaction's commit, a staged job's commit), and its outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Chore:
    def __init__(self, fn: Callable[[], Any], exclusive: bool = False):
        self.fn, self.done, self.exclusive = fn, threading.Event(), exclusive  # exclusive: the writers paused
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the thread that asked
            self.error = e
        finally:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def outcome(self) -> Any:
        """(Once done.) The function's result, or raise its error."""
        if self.error is not None:
            raise self.error
        return self.result
