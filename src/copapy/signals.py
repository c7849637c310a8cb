"""Signal operators: values inside a periodic task are signals, one value per run.

State lives in the task's data and updates once per run (docs/realtime.md). Gradients flow
through the current run only: d integrate(x)/dx = dt (trapezoid: dt/2 after the first run),
d rate(x)/dx = 1/dt, d delay(x)/dx = 0 (no back-propagation through time).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, overload

from . import dtypes as dt_types
from .arrays import Array, asarray
from .functions import clamp, sqrt, where
from .functions import cos as _cos
from .functions import sin as _sin
from .graph import build
from .graph.node import const
from .graph.state import dt_node, new_state, set_update
from .quaternions import Quaternion
from .signal_shape import (
    PACKED,
    QUATERNION,
    UNPACKED,
    Form,
    bind,
    form_of,
    form_of_init,
    new_states,
)
from .value import Value, is_array, wrap

#: the period of the task a value is deployed in, in seconds (a constant of each task)
dt: Value[float] = Value(dt_node(dt_types.float32))


def _float(x: Value[Any] | Array) -> Value[Any] | Array:
    """An integral or rate of integers is a float32 signal."""
    if x.dtype.is_float:
        return x
    if isinstance(x, Array):
        return x.astype(dt_types.float32)
    return Value(build.cast(x.node, dt_types.float32))


def _weak_dtype(init: Any) -> dt_types.DType:
    """The type a feedback signal starts with from its ``init`` alone (weak: a wider update
    widens it): a number's own, an array's as cp.vector gives it, float32 for a quaternion."""
    if isinstance(init, Quaternion):
        return dt_types.float32
    if isinstance(init, Value | Array):
        return init.dtype
    if is_array(init):
        try:
            return asarray(init).dtype
        except (TypeError, ValueError) as exc:
            raise TypeError(f"feedback: init holds numbers, got {type(init).__name__}: {exc}"
                            ) from None
    try:
        return dt_types.scalar_type(build._check_scalar(init, weak=True))
    except TypeError:
        raise TypeError(f"feedback: init is a number or an array of numbers, got "
                        f"{type(init).__name__} {init!r}") from None


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


def delay(x: Any, n: int = 1, init: Any = 0, name: str | None = None) -> Any:
    """x from ``n`` runs ago; ``init`` during the first ``n`` runs (n = 0: x itself).

    ``x`` is a scalar, a vector or matrix (packed or unpacked) or a cp.Quaternion, and the
    result has its form; ``init`` is one number for every element or an array of x's shape.
    ``name`` names the state (a carried state of ``tg.deploy(keep_state=True)``)."""
    runs = _runs(n)
    form, out = form_of(x, "delay")
    for k in range(runs):
        s, leaves = new_states(form, out.dtype, init, "delay",
                               name if name is None or runs == 1 else f"{name}.{k}")
        bind(form, leaves, out, "delay", signal=False)
        out = s
    return form.make(out)


def first_run() -> Value[bool]:
    """True in the first run of the task (and after a reset), False afterwards."""
    flag: Value[bool] = Value(new_state(dt_types.bool_, True))
    set_update(flag.node, const(False, dt_types.bool_))
    return flag


def _saturate(y: Value[Any] | Array, span: tuple[float, float] | None,
              op: str) -> Value[Any] | Array:
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
        if lo > hi:
            raise ValueError(f"cp.{op}: range={span!r} holds no integer for an {y.dtype.name} "
                             f"signal (it would clamp to {hi} always): widen the range or "
                             f"make the signal a float (e.g. init=0.0)")
    return clamp(y, lo, hi)


@overload
def integrate(x: Array, init: Any = ..., method: str = ...,
              range: tuple[float, float] | None = ..., name: str | None = ...) -> Array: ...
@overload
def integrate(x: Quaternion, init: Any = ..., method: str = ...,
              range: tuple[float, float] | None = ..., name: str | None = ...) -> Quaternion: ...
@overload
def integrate(x: Any, init: Any = ..., method: str = ...,
              range: tuple[float, float] | None = ..., name: str | None = ...) -> Value[float]: ...
def integrate(x: Any, init: Any = 0.0, method: str = "euler",
              range: tuple[float, float] | None = None, name: str | None = None) -> Any:
    """Running integral of x over time (x a scalar, vector, matrix or quaternion; the result
    has its form, and ``init`` is one number or an array of its shape).

    ``euler``: y_k = y_{k-1} + x_k·dt (the current sample counts).
    ``trapezoid``: y_k = y_{k-1} + (x_k + x_{k-1})·dt/2, with x_{-1} = x_0.
    y_{-1} = init. ``range=(lo, hi)``: the integral saturates there (anti-windup), and the
    range analysis knows it is bounded; without it an integral is an unbounded state.
    ``name`` names the state (a carried state of ``tg.deploy(keep_state=True)``).
    """
    form, xv = form_of(x, "integrate")
    xv = _float(xv)
    if method not in ("euler", "trapezoid"):
        raise ValueError(f"integrate method must be 'euler' or 'trapezoid', not {method!r}")
    s, leaves = new_states(form, xv.dtype, init, "integrate", name)
    if method == "euler":
        y = s + xv * dt
    else:
        prev = where(first_run(), xv, delay(xv))
        y = s + (xv + prev) * (dt * 0.5)
    y = _saturate(y, range, "integrate")
    bind(form, leaves, y, "integrate")
    return form.make(y)


def rate(x: Any) -> Any:
    """Backward difference (x_k - x_{k-1}) / dt; 0 in the first run (x of any form, as
    delay)."""
    form, xv = form_of(x, "rate")
    xv = _float(xv)
    return form.make(where(first_run(), 0.0, (xv - delay(xv)) / dt))


@overload
def feedback(f: Callable[[Any], Any], init: float | int | bool = ...,
             range: tuple[float, float] | None = ..., name: str | None = ...,
             packed: bool | None = ...) -> Value[Any]: ...
@overload
def feedback(f: Callable[[Any], Any], init: Any = ...,
             range: tuple[float, float] | None = ..., name: str | None = ...,
             packed: bool | None = ...) -> Any: ...
def feedback(f: Callable[[Any], Any], init: Any = 0.0,
             range: tuple[float, float] | None = None, name: str | None = None,
             packed: bool | None = None) -> Any:
    """y = f(y of the previous run); ``init`` plays the previous value in the first run.
    ``range=(lo, hi)``: y saturates there (the range analysis then knows it is bounded).

    The state has ``init``'s shape: a number is a scalar signal, an array (NumPy or a list)
    a vector or matrix signal (``packed`` as cp.vector decides it), a cp.Quaternion of
    numbers a quaternion signal; ``f`` gets the previous value in that form and must return
    that shape (``cp.feedback(lambda s: F @ s, init=np.zeros(2, np.float32))``).
    ``name`` names the state (a carried state of ``tg.deploy(keep_state=True)``).

    ``init``'s type is weak: when ``f`` returns a wider type (init=0, f = prev + 0.5 gives
    float32) the signal has that type (``f`` is traced again with it), as the previous value
    would otherwise be truncated to init's type every run."""
    if not callable(f):
        raise TypeError(f"feedback(f, init) takes a function of the previous value (e.g. "
                        f"lambda prev: prev + x), got {type(f).__name__} {f!r}")
    form = form_of_init(init, packed)
    dtype = _weak_dtype(init)
    repacked = packed is not None
    while True:  # at most bool -> ... -> float64, and one change of packing
        s, leaves = new_states(form, dtype, init, "feedback", name)
        y_form, y = form_of(f(form.make(s)), "feedback", "needs f to return")
        y = _saturate(y, range, "feedback")
        if not repacked and {form.kind, y_form.kind} == {PACKED, UNPACKED}:
            # unasked, the state takes the packing f returns (as it takes a wider type)
            form, repacked = replace(form, kind=y_form.kind), True
            continue
        if dt_types.promote(dtype, y.dtype) is dtype:
            break
        dtype = y.dtype
    bind(form, leaves, y, "feedback")
    if {form.kind, y_form.kind} == {PACKED, UNPACKED}:
        # the signal is the states' update, which reads its init before the first run (an
        # update of the other packing is another node, a plain value without one)
        assert isinstance(y, Array)
        return y.to_packed() if form.kind == PACKED else y.to_unpacked()
    return y_form.make(y)


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


def integrate_rotation(gyro: Sequence[Any], init: Any = (1.0, 0.0, 0.0, 0.0),
                       name: str | None = None) -> Quaternion:
    """Orientation quaternion (w, x, y, z) integrated from body angular velocity (rad/s).

    Each run applies the exact rotation by |ω|·dt about ω (q_k = q_{k-1} ⊗ exp(ω dt / 2)) and
    renormalises, so the quaternion stays unit length. ``init``: four numbers (w, x, y, z) or
    a cp.Quaternion of numbers. Returns a cp.Quaternion (it unpacks as ``w, x, y, z = q`` and
    indexes as ``q[0]``, as the tuple it returned before).
    """
    wx, wy, wz = (wrap(g) for g in _components(gyro, 3, "integrate_rotation's gyro (x, y, z)"))
    if not isinstance(init, Quaternion):
        init = [float(v) for v in _components(init, 4, "init (w, x, y, z)")]
        init_length = math.hypot(*init)
        if not 0.0 < init_length < math.inf:
            raise ValueError(f"integrate_rotation: init {tuple(init)} is not an orientation "
                             f"(its length is {init_length}; the renormalisation would give NaN "
                             f"forever): pass a nonzero finite quaternion, e.g. "
                             f"(1.0, 0.0, 0.0, 0.0)")
    dtype = wx.dtype if wx.dtype.is_float else dt_types.float32
    form = Form(QUATERNION, (4,))
    view, leaves = new_states(form, dtype, init, "integrate_rotation", name)
    assert isinstance(view, Array)
    states = view.items()
    squares = wx * wx + wy * wy + wz * wz
    turning = sqrt(squares) > 1e-6
    # |w| only where it is not small, so no sqrt'(0) = inf reaches the gradient (0·inf = NaN:
    # the Jacobian at rest); below, cos(|w| dt/2) is 1.0 in float32 and
    # sin(|w| dt/2) / |w| tends to dt/2, both with the derivative 0 they have at |w| = 0
    norm = sqrt(where(turning, squares, 1.0))
    half = norm * dt * 0.5
    k = where(turning, _sin(half) / norm, dt * 0.5)
    dq = (where(turning, _cos(half), 1.0), wx * k, wy * k, wz * k)
    q = _qmul(states, dq)
    length = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    qn = Array((4,), items=[c / length for c in q])
    bind(form, leaves, qn, "integrate_rotation")
    return form.make(qn)  # type: ignore[no-any-return]


def angular_rate(q: Sequence[Any] | Quaternion) -> Array:
    """Body angular velocity (rad/s) of an orientation signal: 2·vec(q_{k-1}* ⊗ q_k)/dt, an
    unpacked 3-vector (it unpacks and indexes as the tuple it returned before).

    That is 2·sin(θ/2)/dt for a turn of θ per run: accurate while θ = |ω|·dt is small
    (relative error θ²/24), and it folds back above θ = π (3000 rad/s at 1 ms reads 1995)."""
    cur = [wrap(c) for c in _components(q, 4, "angular_rate's q (w, x, y, z)")]
    prev = [delay(c, init=1.0 if i == 0 else 0.0) for i, c in enumerate(cur)]
    conj = (prev[0], -prev[1], -prev[2], -prev[3])
    d = _qmul(conj, cur)
    # the shorter way round: q and -q are the same orientation
    sign = where(d[0] < 0.0, -2.0, 2.0)
    first = first_run()
    return Array((3,), items=[where(first, 0.0, sign * c / dt) for c in d[1:]])
