"""Progress bars where users wait: a tqdm bar that appears only once the work has taken longer
than about a second (compiles; SerialTarget uploads have their own)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

__all__ = ["Progress", "enabled"]

DELAY = 1.0  # seconds of work before a bar appears


def enabled() -> bool:
    """Bars are shown on a terminal; ``COPAPY_PROGRESS=1`` forces them, ``=0`` turns them off."""
    flag = os.environ.get("COPAPY_PROGRESS")
    if flag is not None:
        return flag not in ("", "0")
    return sys.stderr.isatty()


class Progress:
    """Counts work in parts (compile: the operations of each chain, then linking); shows a bar
    only after ``delay`` seconds, so short compiles print nothing and import nothing."""

    def __init__(self, desc: str, unit: str = "op", delay: float = DELAY) -> None:
        self.desc = desc
        self.unit = unit
        self.delay = delay
        self.start = time.perf_counter()
        self.enabled = enabled()
        self.total = 0
        self.done = 0
        self._base = 0  # done before the current part
        self._bar: Any = None

    def part(self, done: int, total: int) -> None:
        """``done`` of the ``total`` units of the current part (call with 0 first)."""
        if done == 0:
            self._base = self.done
            self.total += total
        self.done = self._base + done
        if not self.enabled:
            return
        if self._bar is None:
            if time.perf_counter() - self.start < self.delay:
                return
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.unit,
                             unit_scale=True, leave=False, file=sys.stderr)
        self._bar.total = self.total
        self._bar.update(self.done - self._bar.n)

    def phase(self, desc: str) -> None:
        """A new stage (e.g. "linking"): the bar's label, if one is shown."""
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
