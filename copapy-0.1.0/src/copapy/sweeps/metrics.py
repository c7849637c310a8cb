"""Summary metrics as traced expressions: they run in the program (in the task that computes
their signal), and a sweep reads their value at the end of each scenario. Any traced value
works as a metric; these are the common ones of a step response."""

from __future__ import annotations

from typing import Any

from ..functions import abs as cp_abs
from ..functions import max as cp_max
from ..functions import where
from ..signals import feedback, first_run, integrate
from ..value import Value

__all__ = ["iae", "overshoot", "peak", "settling_time"]


def iae(error: Any) -> Value[float]:
    """Integral of the absolute error: ∫|e| dt over the run (in the task's time step)."""
    total: Value[float] = integrate(cp_abs(error))
    return total


def peak(x: Any) -> Value[float]:
    """The largest value ``x`` has had."""
    return feedback(lambda m: where(first_run(), x, cp_max(m, x)), init=0.0)


def overshoot(x: Any, target: Any) -> Value[float]:
    """How far ``x`` has gone past ``target`` (0 if it never did), in ``x``'s unit; a step
    from below is assumed (divide by the step for a fraction)."""
    past: Value[float] = cp_max(peak(x) - target, 0.0)
    return past


def settling_time(x: Any, target: Any, band: Any) -> Value[float]:
    """The last time (s since the start) ``x`` was farther than ``band`` from ``target``:
    at the end of a run, the time it settled (0 if it always was inside)."""
    elapsed = integrate(1.0)  # the time at the end of the current period
    last: Value[float] = feedback(lambda s: where(cp_abs(x - target) > band, elapsed, s),
                                  init=0.0)
    return last
