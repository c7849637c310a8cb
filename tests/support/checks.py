"""Comparisons the tests share: bit-exact equality, a property's example count, and the
generic patch in Python against the runner's C."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from copapy import _runner
from copapy.arch.patchkind import PatchError, PatchKind, apply_patch


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


def patch_agrees(kind: PatchKind, packed: bytes, raw: bytes, site: int, target: int) -> None:
    """Python's apply_patch and the runner's (descriptor ``packed``) write the same word, or
    both refuse the value (PATCH)."""
    buf = bytearray(raw)
    try:
        apply_patch(buf, 0, kind, site, target)
    except PatchError:
        with pytest.raises(_runner.ImageError):
            _runner.apply_patch(raw, site, target, packed)
        return
    assert _runner.apply_patch(raw, site, target, packed) == bytes(buf)
