"""Recorded values over time: the trace of a LocalTarget's scheduler ring."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .dtypes import DType
from .target_common import decode_rows, same_value
from .value import Value

if TYPE_CHECKING:
    import numpy as np


class Trace:
    """Values recorded after every tick (bounded: the newest ``capacity`` rows are kept).

    ``rows`` returns the ring's rows, oldest first; ``state`` changes whenever they may have
    changed (so the decoded columns are cached between reads); ``dropped`` counts rows lost.
    """

    def __init__(self, values: Sequence[Value[Any]], dtypes: Sequence[DType], capacity: int,
                 rows: Callable[[], bytes], state: Callable[[], tuple[int, int]],
                 dropped: Callable[[], int]) -> None:
        self.values = list(values)
        self.capacity = capacity
        self._dtypes = list(dtypes)
        self._rows, self._state, self._dropped = rows, state, dropped
        self._decoded: tuple[tuple[int, int], np.ndarray, list[np.ndarray]] | None = None

    def _columns(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """Time and value columns, decoded once per state of the trace ring."""
        key = self._state()
        if self._decoded is None or self._decoded[0] != key:
            stamps, cols = decode_rows(self._rows(), self._dtypes)
            self._decoded = (key, stamps * 1e-9, cols)
        return self._decoded[1], self._decoded[2]

    @property
    def time(self) -> np.ndarray:
        """Simulated time of each row, in seconds."""
        return self._columns()[0].copy()

    def __getitem__(self, value: Value[Any] | str) -> np.ndarray:
        for v, col in zip(self.values, self._columns()[1], strict=True):
            if same_value(v, value):
                return col.copy()
        raise KeyError(f"{value!r} is not traced")

    @property
    def dropped(self) -> int:
        return self._dropped()


def ring_rows(ring: memoryview, capacity: int, total: int, row_size: int) -> bytes:
    """The rows of a ring buffer that has received ``total`` rows, oldest first."""
    if total <= capacity:
        return bytes(ring[: total * row_size])
    start = (total % capacity) * row_size
    return bytes(ring[start:]) + bytes(ring[:start])
