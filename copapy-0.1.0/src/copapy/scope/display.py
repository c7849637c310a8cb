"""What the page plots: every signal decimated to a few hundred points a second, the newest
``window`` seconds kept; each page takes the points added since its last update."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .sources import Batch

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from .._lazy import numpy as np


class Display:
    """Stride decimation (every k-th tick, k so that at most ``rate`` points a second are
    kept, phase carried across batches) into a bounded history."""

    def __init__(self, labels: list[str], tick_s: float, rate: float = 200.0,
                 window: float = 10.0) -> None:
        self.labels = list(labels)
        self.stride = max(1, round(1.0 / (tick_s * rate)))
        self.tick_s = tick_s
        self.capacity = max(10, int(window * min(rate, 1.0 / tick_s)))
        self._lock = threading.Lock()
        self._time: list[float] = []
        self._values: dict[str, list[float]] = {k: [] for k in self.labels}
        self._first = 0  # index of _time[0] among all points ever kept
        self.latest: dict[str, float] = {}

    def add(self, batch: Batch) -> None:
        keep = batch.ticks % self.stride == 0
        ticks = batch.ticks[keep]
        with self._lock:
            self._time += (ticks * self.tick_s).tolist()
            for k in self.labels:
                self._values[k] += batch.columns[k][keep].tolist()
                self.latest[k] = float(batch.columns[k][-1])
            extra = len(self._time) - self.capacity
            if extra > 0:
                del self._time[:extra]
                for k in self.labels:
                    del self._values[k][:extra]
                self._first += extra

    def since(self, index: int) -> tuple[int, dict[str, NDArray[np.float64]]]:
        """(the index to ask for next time, the points kept from ``index`` on: ``time`` and a
        column per label); all of them for an index that has been dropped."""
        with self._lock:
            start = max(0, index - self._first)
            data = {"time": np.array(self._time[start:])}
            data.update({k: np.array(v[start:]) for k, v in self._values.items()})
            return self._first + len(self._time), data
