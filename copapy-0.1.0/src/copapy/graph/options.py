"""Simplification switches (documented in docs/semantics.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class SimplifyOptions:
    #: x * 0 -> 0 for floats (drops the branch; differs from IEEE when x is NaN or inf and in
    #: the sign of the zero). Integer x * 0 -> 0 is always exact and always done.
    multiply_by_zero: bool = True
    #: (x + c1) + c2 -> x + (c1 + c2) and the same for * on floats: one rounding instead of
    #: two, so results may differ in the last bit. Integers are always reassociated (exact).
    reassociate_floats: bool = False


#: per thread (and asyncio task): a ``with`` block in one thread does not change how another
#: thread traces (a jitted function compiling meanwhile)
_current: ContextVar[SimplifyOptions] = ContextVar("copapy_simplify_options",
                                                   default=SimplifyOptions())  # noqa: B039 (frozen)


#: called with True while some thread traces under reassociate_floats=True, False when none
#: does (build.py tells graph/_intern.c which element types it must hand to _regroup)
float_regrouping_listeners: list[Callable[[bool], None]] = []
_float_regroupers = 0
_lock = threading.Lock()


def _count_float_regrouping(delta: int) -> None:
    global _float_regroupers
    with _lock:
        before = _float_regroupers > 0
        _float_regroupers += delta
        after = _float_regroupers > 0
        if before != after:
            for listener in float_regrouping_listeners:
                listener(after)


def current() -> SimplifyOptions:
    return _current.get()


@contextmanager
def simplify_options(**changes: bool) -> Iterator[SimplifyOptions]:
    """Change simplification rules while tracing inside the ``with`` block (this thread)."""
    known = {f.name for f in fields(SimplifyOptions)}
    unknown = set(changes) - known
    if unknown:
        raise TypeError(f"unknown simplify option(s) {sorted(unknown)}; known: {sorted(known)}")
    for name, on in changes.items():
        if not isinstance(on, bool):
            raise TypeError(f"simplify option {name} is True or False, got {on!r}")
    token = _current.set(replace(_current.get(), **changes))
    floats = _current.get().reassociate_floats
    if floats:
        _count_float_regrouping(1)
    try:
        yield _current.get()
    finally:
        _current.reset(token)
        if floats:
            _count_float_regrouping(-1)
