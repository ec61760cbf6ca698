"""How a server thread that waits re-checks whether its client went away.

pyarrow's server does not tell a handler that its client vanished: the handler must ask
(`context.is_cancelled()`). A waiting stream therefore wakes now and then to ask: after 50 ms at
first, doubling to 0.5 s while nothing happens (new data wakes it at once through its condition).
A vanished peer is noticed within half a second, and a thousand idle streams cost about 2,000
wake-ups a second rather than 20,000 at a fixed 50 ms, which left a server with 1,000 idle views
taking seconds per call (`scripts/chaos.py --only idle`).
"""

from __future__ import annotations

FIRST_S = 0.05
LONGEST_S = 0.5


class Slices:
    """The next wait's length each call: FIRST_S, doubling up to LONGEST_S."""

    def __init__(self) -> None:
        self._next = FIRST_S

    def __call__(self) -> float:
        slice_s, self._next = self._next, min(self._next * 2, LONGEST_S)
        return slice_s
