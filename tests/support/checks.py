"""Comparisons the tests share: bit-exact equality and a property's example count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import settings


def examples(n: int) -> int:
    """A test's own example count, capped by the profile's (the emulated runs lower it)."""
    return min(n, settings.default.max_examples)


def same_bits(got: object, want: object, dtype: str) -> bool:
    """Equal bit for bit; any NaN equals any NaN (NaN payloads differ between CPUs)."""
    g = np.asarray(got, dtype=dtype)
    w = np.asarray(want, dtype=dtype)
    if g.dtype.kind == "f":
        if np.isnan(g) and np.isnan(w):
            return True
        return bool(g.view(f"u{g.itemsize}") == w.view(f"u{w.itemsize}"))
    return bool(g == w)


def central_difference(f: Callable[[Any], float], x: Any, h: float = 1e-6) -> Any:
    """The gradient of scalar ``f`` at float64 array ``x`` by central differences."""
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g
