"""Signal operators: values inside a periodic task are signals, one value per run.

State lives in the task's data and updates once per run (docs/realtime.md). Gradients flow
through the current run only: d integrate(x)/dx = dt, d rate(x)/dx = 1/dt, d delay(x)/dx = 0
(no back-propagation through time).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

from . import dtypes as dt_types
from .functions import clamp, sqrt, where
from .functions import cos as _cos
from .functions import sin as _sin
from .graph import build
from .graph.location import mark
from .graph.node import Node, const
from .graph.state import dt_node, new_state, set_update
from .value import Value, _convert, _node, is_array, wrap

#: the period of the task a value is deployed in, in seconds (a constant of each task)
dt: Value[float] = Value(dt_node(dt_types.float32))


def _signal(x: Any, op: str, what: str = "takes") -> Value[Any]:
    """A scalar signal operand as a Value; arrays are refused naming the per-element form."""
    if is_array(x):
        raise TypeError(f"cp.{op} {what} a scalar signal, got {type(x).__name__}; for an array "
                        f"make one signal per element (cp.vector([... for e in v]))")
    try:
        return wrap(x)
    except TypeError:
        raise TypeError(f"cp.{op} {what} a copapy value or a number, got {type(x).__name__} "
                        f"{x!r}") from None


def _state(like: Any, init: float | int | bool, name: str | None = None) -> Value[Any]:
    if isinstance(init, Value):
        raise TypeError("init is the value before the first run, a Python number fixed when the "
                        "program is built; for a start computed at run time select it: "
                        "cp.where(cp.first_run(), start, signal)")
    node = _node(like)
    dtype = node.dtype if isinstance(node, Node) else dt_types.scalar_type(node)
    try:  # the checks of cp.constant(init, dtype)
        initial = _convert(build._check_scalar(init), dtype)
    except (TypeError, OverflowError) as exc:
        raise type(exc)(f"init={init!r} for a {dtype.name} signal: {exc}") from None
    return Value(mark(new_state(dtype, initial, name)))


def _bind(state: Value[Any], update: Any) -> None:
    update_node = build.cast(wrap(update).node, state.dtype)
    set_update(state.node, update_node)


def _runs(n: Any) -> int:
    """delay's n checked: a Python int >= 0 (it fixes how many states the program holds)."""
    if isinstance(n, bool):
        raise TypeError(f"delay(x, n={n}): n is the number of runs, not a bool; for an initial "
                        f"value pass it by name: cp.delay(x, init={n})")
    if isinstance(n, Value):
        raise TypeError("delay n is fixed when the program is built (a Python int); a traced "
                        "value cannot set it: select between fixed delays with cp.where")
    try:
        runs = operator.index(n)
    except TypeError:
        raise TypeError(f"delay n is a whole number of runs (a Python int), got "
                        f"{type(n).__name__} {n!r}") from None
    if runs < 0:
        raise ValueError(f"delay n must be >= 0, got {runs}")
    return runs


def delay(x: Any, n: int = 1, init: float | int | bool = 0) -> Value[Any]:
    """x from ``n`` runs ago; ``init`` during the first ``n`` runs (n = 0: x itself)."""
    runs = _runs(n)
    out = _signal(x, "delay")
    for _ in range(runs):
        s = _state(out, init)
        _bind(s, out)
        out = s
    return out


def first_run() -> Value[bool]:
    """True in the first run of the task (and after a reset), False afterwards."""
    flag: Value[bool] = Value(new_state(dt_types.bool_, True))
    set_update(flag.node, const(False, dt_types.bool_))
    return flag


def _saturate(y: Value[Any], span: tuple[float, float] | None, op: str) -> Value[Any]:
    """A signal's declared range is a saturation (an anti-windup limit): the range analysis
    (cp.check) then bounds the state from the clamp, never from a promise."""
    if span is None:
        return y
    try:
        lo, hi = (float(v) for v in span)
    except (TypeError, ValueError):
        raise TypeError(f"cp.{op}: range is (lo, hi), two numbers, got {span!r}") from None
    if not lo <= hi:
        raise ValueError(f"cp.{op}: range=({lo}, {hi}): lo must be <= hi")
    if not y.dtype.is_float:
        lo, hi = math.ceil(lo), math.floor(hi)
    return clamp(y, lo, hi)


def integrate(x: Any, init: float = 0.0, method: str = "euler",
              range: tuple[float, float] | None = None) -> Value[float]:
    """Running integral of x over time.

    ``euler``: y_k = y_{k-1} + x_k·dt (the current sample counts).
    ``trapezoid``: y_k = y_{k-1} + (x_k + x_{k-1})·dt/2, with x_{-1} = x_0.
    y_{-1} = init. ``range=(lo, hi)``: the integral saturates there (anti-windup), and the
    range analysis knows it is bounded; without it an integral is an unbounded state.
    """
    xv = _signal(x, "integrate")
    if not xv.dtype.is_float:
        xv = Value(build.cast(xv.node, dt_types.float32))
    s = _state(xv, init)
    if method == "euler":
        y = s + xv * dt
    elif method == "trapezoid":
        prev = where(first_run(), xv, delay(xv))
        y = s + (xv + prev) * (dt * 0.5)
    else:
        raise ValueError(f"integrate method must be 'euler' or 'trapezoid', not {method!r}")
    y = _saturate(y, range, "integrate")
    _bind(s, y)
    return y


def rate(x: Any) -> Value[float]:
    """Backward difference (x_k - x_{k-1}) / dt; 0 in the first run."""
    xv = _signal(x, "rate")
    if not xv.dtype.is_float:
        xv = Value(build.cast(xv.node, dt_types.float32))
    return where(first_run(), 0.0, (xv - delay(xv)) / dt)


def feedback(f: Callable[[Value[Any]], Any], init: float | int | bool = 0.0,
             range: tuple[float, float] | None = None) -> Value[Any]:
    """y = f(y of the previous run); ``init`` plays the previous value in the first run.
    ``range=(lo, hi)``: y saturates there (the range analysis then knows it is bounded).

    ``init`` is a Python number, so its type is weak: when ``f`` returns a wider type (init=0,
    f = prev + 0.5 gives float32) the signal has that type (``f`` is traced again with it), as
    the previous value would otherwise be truncated to init's type every run."""
    if not callable(f):
        raise TypeError(f"feedback(f, init) takes a function of the previous value (e.g. "
                        f"lambda prev: prev + x), got {type(f).__name__} {f!r}")
    s = _state(init, init)
    y = _saturate(_signal(f(s), "feedback", "needs f to return"), range, "feedback")
    while dt_types.promote(s.dtype, y.dtype) is not s.dtype:  # at most bool -> ... -> float64
        s = _state(y, init)
        y = _saturate(_signal(f(s), "feedback", "needs f to return"), range, "feedback")
    _bind(s, y)
    return y


Quat = tuple[Value[float], Value[float], Value[float], Value[float]]


def _qmul(a: Sequence[Any], b: Sequence[Any]) -> Quat:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw)


def _components(seq: Any, n: int, what: str) -> list[Any]:
    """The ``n`` components of a vector or quaternion argument (a cp.Quaternion's w, x, y, z)."""
    components = getattr(seq, "components", None)
    items = list(components() if callable(components) else seq)
    if len(items) != n:
        raise ValueError(f"{what} has {n} components, got {len(items)}")
    return items


def integrate_rotation(gyro: Sequence[Any], init: Sequence[float] = (1.0, 0.0, 0.0, 0.0)) -> Quat:
    """Orientation quaternion (w, x, y, z) integrated from body angular velocity (rad/s).

    Each run applies the exact rotation by |ω|·dt about ω (q_k = q_{k-1} ⊗ exp(ω dt / 2)) and
    renormalises, so the quaternion stays unit length.
    """
    wx, wy, wz = (wrap(g) for g in _components(gyro, 3, "integrate_rotation's gyro (x, y, z)"))
    states = [_state(wx, float(v)) for v in _components(init, 4, "init (w, x, y, z)")]
    norm = sqrt(wx * wx + wy * wy + wz * wz)
    half = norm * dt * 0.5
    # sin(|w| dt/2) / |w|, continuous at |w| = 0 where it tends to dt/2
    k = where(norm > 1e-6, _sin(half) / where(norm > 1e-6, norm, 1.0), dt * 0.5)
    dq = (_cos(half), wx * k, wy * k, wz * k)
    q = _qmul(states, dq)
    length = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    qn = tuple(c / length for c in q)
    for s, c in zip(states, qn, strict=True):
        _bind(s, c)
    return qn  # type: ignore[return-value]


def angular_rate(q: Sequence[Any]) -> tuple[Value[float], Value[float], Value[float]]:
    """Body angular velocity (rad/s) of an orientation signal: 2·vec(q_{k-1}* ⊗ q_k)/dt."""
    cur = [wrap(c) for c in _components(q, 4, "angular_rate's q (w, x, y, z)")]
    prev = [delay(c, init=1.0 if i == 0 else 0.0) for i, c in enumerate(cur)]
    conj = (prev[0], -prev[1], -prev[2], -prev[3])
    d = _qmul(conj, cur)
    # the shorter way round: q and -q are the same orientation
    sign = where(d[0] < 0.0, -2.0, 2.0)
    first = first_run()
    return tuple(where(first, 0.0, sign * c / dt) for c in d[1:])  # type: ignore[return-value]
