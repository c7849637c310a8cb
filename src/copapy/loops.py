"""``cp.fori_loop``: a loop whose body is compiled once and run n times (graph/loop.py)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from . import dtypes as dt
from .arrays import Array
from .graph.loop import make_loop, new_carry, new_index
from .graph.node import Node, const
from .graph.unroll import MAX_UNROLL, unrolled
from .value import Value

#: a state: a scalar, a vector or matrix (packed or unpacked), or a tuple/list of those
State = Any


def _leaves(state: State, what: str) -> tuple[list[Node], Any]:
    """The nodes of ``state`` and a description of its structure (to rebuild it)."""
    if isinstance(state, Value):
        return [state.node], ("value", state.node.dtype, ())
    if isinstance(state, Array):
        if state.packed:
            node = state.node()
            return [node], ("packed", node.dtype, node.shape)
        items = [v.node for v in state.items()]
        return items, ("unpacked", tuple(n.dtype for n in items), state.shape)
    if isinstance(state, bool | int | float):
        kind = dt.scalar_type(state)
        return [const(state, kind)], ("value", kind, ())
    if isinstance(state, tuple | list):
        nodes: list[Node] = []
        parts = []
        for k, item in enumerate(state):
            sub, desc = _leaves(item, f"{what}[{k}]")
            nodes += sub
            parts.append((len(sub), desc))
        return nodes, ("tuple" if isinstance(state, tuple) else "list", tuple(parts), ())
    raise TypeError(f"cp.fori_loop: {what} is a {type(state).__name__}; a loop state is a "
                    f"copapy value, a cp.vector/cp.matrix, a number, or a tuple or list of "
                    f"those")


def _rebuild(nodes: list[Node], desc: Any) -> State:
    kind, info, shape = desc
    if kind == "value":
        return Value(nodes[0])
    if kind == "packed":
        return Array(shape, node=nodes[0])
    if kind == "unpacked":
        return Array(shape, items=[Value(n) for n in nodes])
    out = []
    at = 0
    for count, sub in info:
        out.append(_rebuild(nodes[at:at + count], sub))
        at += count
    return tuple(out) if kind == "tuple" else out


def _describe(desc: Any) -> str:
    kind, info, shape = desc
    if kind == "value":
        return f"a {info.name} scalar"
    if kind == "packed":
        return f"a packed {info.name} array of shape {shape}"
    if kind == "unpacked":
        return f"an unpacked array of shape {shape}"
    return f"a {kind} of {len(info)} ({', '.join(_describe(d) for _, d in info)})"


def fori_loop(n: int, body: Callable[..., State], init: State, index: bool = False,
              unroll: bool = False) -> State:
    """``body`` applied ``n`` times to ``init``: ``x = init; for _ in range(n): x = body(x)``.

    The body is traced once and compiled once, between a counted loop's begin and end
    stencils, so the program's size and compile time do not depend on ``n``; the results are
    the bits of ``unroll=True`` (below) on every architecture. A loop unrolled by hand in
    Python gives them too unless the body holds ``cp.grad``: its iterations are traced over
    other values than the body's carries, so cp.grad may sum in another order (an ulp or so
    apart, the same in every process). ``n`` is a Python int (the count is fixed in the
    program; a verifying runner checks it at load). The state is a copapy value,
    a ``cp.vector``/``cp.matrix`` (packed or unpacked), a number, or a tuple or list of
    those; ``body`` returns a state of the same structure, types and shapes. The body may
    read values from outside the loop (computed once, before it); it may not hold signal
    states (``cp.delay``, ...), ``cp.dt`` or another ``cp.fori_loop`` (write loops one after
    the other). With ``index=True`` the body is ``body(i, state)``, ``i`` the iteration's
    number (an int32 value, 0 to n - 1; e.g. a step size that shrinks with i).

    ``cp.grad`` differentiates through a loop whose state has one float type (float32 or
    float64 throughout; packed or unpacked): forward-mode tangents run in a second counted
    loop (memory: state elements x operand elements slots, whatever ``n``), which agree with
    the unrolled loop's gradient to rounding, not bit for bit (another summation order).

    Example: Newton's iteration for a square root, 6 steps::

        c = cp.value(2.0)
        root = cp.fori_loop(6, lambda x: 0.5 * (x + c / x), c)

    ``unroll=True`` builds the unrolled graph instead (no loop stencils; the size grows with
    ``n``, at most ``MAX_UNROLL`` = 10,000 iterations) from the same single trace of the
    body: each iteration substitutes the previous results for the carries (and the constant
    i for the iteration number) without any rewrite, so it runs the body's operations in the
    body's order and equals the compiled loop bit for bit, cp.grad inside the body included.
    It is the loop's reference (and runs on a target without the loop stencils); cp.grad
    through it is ordinary reverse mode.
    """
    if isinstance(n, Value):
        raise TypeError(f"cp.fori_loop: n must be a Python int, not the copapy value {n!r} "
                        f"(an input, or an argument "
                        f"of a @cp.jit function, which is traced as one), but the iteration "
                        f"count is fixed in the program: pass a Python int (from the "
                        f"enclosing scope, not an argument of the jitted function), or run the "
                        f"largest count with index=True and keep the state where i >= n: "
                        f"body(i, s) returning cp.where(i < n, step(s), s)")
    if isinstance(n, bool) or not isinstance(n, int):
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"cp.fori_loop: n must be a Python int (the iteration count is fixed "
                            f"in the program), got {type(n).__name__} {n!r}") from None
    if n < 0:
        raise ValueError(f"cp.fori_loop: n = {n}; the iteration count must be >= 0")
    if n >= 2**31:
        raise ValueError(f"cp.fori_loop: n = {n}; at most 2**31 - 1 iterations")
    if unroll and n > MAX_UNROLL:
        raise ValueError(f"cp.fori_loop: n = {n} with unroll=True; at most {MAX_UNROLL} "
                         f"iterations are unrolled (the graph grows with n): use "
                         f"cp.fori_loop without unroll, which compiles the body once")
    if not callable(body):
        raise TypeError(f"cp.fori_loop: body must be a function of the state, got "
                        f"{type(body).__name__}")
    inits, desc = _leaves(init, "init")
    carries = [new_carry(x, k) for k, x in enumerate(inits)]
    i = new_index() if index else None
    state = _rebuild(carries, desc)
    result = body(Value(i), state) if i is not None else body(state)
    try:
        outs, out_desc = _leaves(result, "the body's result")
    except TypeError as exc:
        raise TypeError(f"{exc}; the body must return a state like init ({_describe(desc)})"
                        ) from None
    if _shape_of(out_desc) != _shape_of(desc):
        raise TypeError(f"cp.fori_loop: the body returns {_describe(out_desc)}, but the state "
                        f"is {_describe(desc)}: return a state of the same structure")
    for k, (out, carry) in enumerate(zip(outs, carries, strict=True)):
        if out.dtype is not carry.dtype or out.shape != carry.shape:
            raise TypeError(f"cp.fori_loop: element {k} of the state is "
                            f"{carry.dtype.name}{list(carry.shape) or ''} but the body returns "
                            f"{out.dtype.name}{list(out.shape) or ''}: cast it (cp.cast) so the "
                            f"state keeps its type")
    if n == 0:
        return _rebuild(inits, desc)
    if unroll:
        return _rebuild(unrolled(n, inits, carries, outs, i), desc)
    return _rebuild(make_loop(n, inits, carries, outs, i), desc)


def _shape_of(desc: Any) -> Any:
    """The structure of a state without its element types (compared separately)."""
    kind, info, shape = desc
    if kind in ("tuple", "list"):
        return (kind, tuple((c, _shape_of(d)) for c, d in info))
    if kind == "unpacked":
        return (kind, len(info), shape)
    return (kind, shape)
