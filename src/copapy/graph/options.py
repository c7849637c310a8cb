"""Simplification switches (documented in docs/semantics.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class SimplifyOptions:
    #: x * 0 -> 0 for floats (drops the branch; differs from IEEE when x is NaN or inf and in
    #: the sign of the zero). Integer x * 0 -> 0 is always exact and always done.
    multiply_by_zero: bool = True
    #: (x + c1) + c2 -> x + (c1 + c2) and the same for * on floats: one rounding instead of
    #: two, so results may differ in the last bit. Integers are always reassociated (exact).
    reassociate_floats: bool = False


_current = SimplifyOptions()


def current() -> SimplifyOptions:
    return _current


@contextmanager
def simplify_options(**changes: bool) -> Iterator[SimplifyOptions]:
    """Change simplification rules while tracing inside the ``with`` block."""
    global _current
    known = {f.name for f in fields(SimplifyOptions)}
    unknown = set(changes) - known
    if unknown:
        raise TypeError(f"unknown simplify option(s) {sorted(unknown)}; known: {sorted(known)}")
    previous = _current
    _current = replace(_current, **changes)
    try:
        yield _current
    finally:
        _current = previous
