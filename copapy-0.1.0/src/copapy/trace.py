"""Recorded values over time: the trace of a LocalTarget's scheduler ring."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .target_common import Slots, decode_rows, same_key, trace_key

if TYPE_CHECKING:
    import numpy as np


class Trace:
    """Values recorded after every tick (bounded: the newest ``capacity`` rows are kept).

    ``trace[v]`` is the column of a traced value, array, quaternion (or port name of a saved
    program): one number per row, or one array of its shape per row. ``rows`` returns the
    ring's rows, oldest first; ``state`` changes whenever they may have changed (so the decoded
    columns are cached between reads); ``dropped`` counts rows lost.
    """

    def __init__(self, values: Sequence[Any], slots: Sequence[Slots], capacity: int,
                 rows: Callable[[], bytes], state: Callable[[], tuple[int, int]],
                 dropped: Callable[[], int]) -> None:
        self.values = list(values)
        self.capacity = capacity
        self._slots = list(slots)
        self._rows, self._state, self._dropped = rows, state, dropped
        self._decoded: tuple[tuple[int, int], np.ndarray, list[np.ndarray]] | None = None

    def _columns(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """Time and value columns, decoded once per state of the trace ring."""
        key = self._state()
        if self._decoded is None or self._decoded[0] != key:
            stamps, cols = decode_rows(self._rows(), self._slots)
            self._decoded = (key, stamps * 1e-9, cols)
        return self._decoded[1], self._decoded[2]

    @property
    def time(self) -> np.ndarray:
        """Simulated time of each row, in seconds."""
        return self._columns()[0].copy()

    def __getitem__(self, value: Any) -> np.ndarray:
        return column(self._slots, self._columns()[1], value)

    @property
    def dropped(self) -> int:
        return self._dropped()

    def freeze(self) -> None:
        """Keep the rows recorded so far: the ring is about to record something else (a new
        trace, another program), which this trace would otherwise read as its own."""
        rows, state, dropped = self._rows(), self._state(), self._dropped()
        self._rows, self._state, self._dropped = (lambda: rows), (lambda: state), (lambda: dropped)


def column(traced: Sequence[Slots], columns: Sequence[np.ndarray], value: Any) -> np.ndarray:
    """A copy of the column of ``value`` among the traced ones, or KeyError naming it."""
    key = trace_key(value)
    for s, col in zip(traced, columns, strict=True):
        if same_key(s.key, key):
            return col.copy()
    raise KeyError(f"{value!r} is not traced: trace it with tg.trace(...)")


def ring_rows(ring: memoryview, capacity: int, total: int, row_size: int) -> bytes:
    """The rows of a ring buffer that has received ``total`` rows, oldest first."""
    if total <= capacity:
        return bytes(ring[: total * row_size])
    start = (total % capacity) * row_size
    return bytes(ring[start:]) + bytes(ring[:start])
