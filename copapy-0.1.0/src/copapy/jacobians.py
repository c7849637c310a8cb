"""Jacobians and Hessians as matrices of traced values (docs/guide/concepts/gradients.md).

``jacobian(ys, xs)`` is the m-by-n matrix ∂y_i/∂x_j; every entry is a graph value that compiles
like any other, and an entry that does not depend on its x is the constant 0 (so a product with
it folds away: the sparsity of the Jacobian is kept in the program).

Two ways of building it, the cheaper one chosen (``mode="auto"``):

* **reverse**: one reverse sweep (``graph.grad.gradients``) per output y_i gives row i; the
  work is the sum over the outputs of the nodes each output depends on.
* **forward**, emulated by reverse-of-reverse: with m fresh seeds u_i, one reverse sweep of
  s = Σ u_i·y_i gives g = Jᵀu (a graph linear in u); one reverse sweep of each g_j with respect
  to the seeds gives column j (∂g_j/∂u_i = J_ij). The result no longer contains a seed (g is
  linear in u, so its derivative is free of u); the work is n sweeps over the adjoint graph.

Auto compares the two node counts (the adjoint graph is built to count it) and picks the
smaller; both give the same values (not necessarily the same bits: the sums are grouped
differently).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from .arrays import Array
from .graph import build
from .graph.errors import NotDifferentiableError
from .graph.grad import gradients
from .graph.node import Node, fresh_input
from .graph.traverse import live_nodes
from .value import Value, wrap

__all__ = ["hessian", "jacobian"]

Mode = Literal["auto", "reverse", "forward"]


def _scalars(x: Any, what: str) -> list[Node]:
    """The scalar nodes of a value, array, quaternion or list of them (row-major)."""
    if isinstance(x, Value):
        return [x.node]
    if isinstance(x, Array):
        return [v.node for v in x.items()]
    components = getattr(x, "components", None)
    if callable(components):  # a cp.Quaternion: (w, x, y, z)
        return [wrap(v).node for v in components()]
    if isinstance(x, list | tuple):
        return [n for item in x for n in _scalars(item, what)]
    if isinstance(x, bool | int | float):
        return [wrap(x).node]
    raise TypeError(f"jacobian(): {what} must be copapy values, arrays, quaternions or a list "
                    f"of them; got {type(x).__name__}")


def _inputs(xs: Any) -> list[Node]:
    """The nodes to differentiate with respect to: scalars, and a packed array's node whole
    (its elements are views the program does not compute from)."""
    if isinstance(xs, Array) and xs.packed:
        nodes = [xs.node()]
    elif isinstance(xs, list | tuple) and not isinstance(xs, Array):
        nodes = [n for item in xs for n in _inputs(item)]
    else:
        nodes = _scalars(xs, "xs")
    for n in nodes:
        if not n.dtype.is_float:
            raise TypeError(f"jacobian(): cannot differentiate with respect to a {n.dtype.name} "
                            f"value; the xs must be float32/float64 values")
    return nodes


def _flat(nodes: list[Node]) -> list[Node]:
    """Scalar nodes: an array-shaped gradient element by element."""
    out: list[Node] = []
    for n in nodes:
        out.extend(build.index(n, k) for k in range(n.size)) if n.shape else out.append(n)
    return out


def _rows_reverse(ys: list[Node], xs: list[Node]) -> list[list[Node]]:
    return [_flat(gradients(y, xs)) for y in ys]


def _adjoint(ys: list[Node], xs: list[Node]) -> tuple[list[Node], list[Node]]:
    """Seeds u (fresh inputs, one per output) and g = Jᵀu, one node per x."""
    seeds = [fresh_input(y.dtype, 0.0) for y in ys]
    total = build.apply("mul", seeds[0], ys[0])
    for u, y in zip(seeds[1:], ys[1:], strict=True):
        total = build.apply("add", total, build.apply("mul", u, y))
    return seeds, _flat(gradients(total, xs))


def _rows_forward(ys: list[Node], xs: list[Node], seeds: list[Node],
                  g: list[Node]) -> list[list[Node]]:
    columns = [gradients(gj, seeds) for gj in g]
    live = set(live_nodes([n for col in columns for n in col]))
    if any(u in live for u in seeds):  # would mean a non-linear adjoint rule
        raise AssertionError("forward-mode Jacobian kept a seed: use mode='reverse'")
    return [[columns[j][i] for j in range(len(g))] for i in range(len(ys))]


def jacobian(ys: Any, xs: Any, mode: Mode = "auto") -> Array:
    """∂ys/∂xs as an (m, n) unpacked ``cp.matrix``: row i is output i, column j input j.

    ``ys``: a value, vector, matrix (row-major), quaternion or list of them; ``xs`` likewise
    (the inputs, float). Entries that do not depend on their input are the constant 0.
    ``mode``: ``"reverse"`` (one sweep per output), ``"forward"`` (one sweep per input, over
    the adjoint graph) or ``"auto"`` (the one with fewer nodes to sweep).
    """
    _check_mode("jacobian", mode)
    return _matrix(_rows(_scalars(ys, "ys"), _inputs(xs), mode))


def _check_mode(function: str, mode: str) -> None:
    if mode not in ("auto", "reverse", "forward"):
        raise ValueError(f"{function}(): mode must be 'auto', 'reverse' or 'forward', not "
                         f"{mode!r}")


def _rows(outputs: list[Node], inputs: list[Node], mode: Mode) -> list[list[Node]]:
    if not outputs or not inputs:
        raise ValueError("jacobian(): ys and xs must hold at least one value each")
    for y in outputs:
        if not y.dtype.is_float:
            raise NotDifferentiableError(
                f"jacobian(): cannot differentiate a {y.dtype.name} output: the ys must be "
                f"float32/float64 (cast them: cp.cast(y, cp.float32))")
    if mode == "reverse":
        rows = _rows_reverse(outputs, inputs)
    else:
        seeds, g = _adjoint(outputs, inputs)
        if mode == "auto":
            reverse_work = sum(len(live_nodes([y])) for y in outputs)
            forward_work = len(inputs) * len(live_nodes(g))
            mode = "forward" if forward_work < reverse_work else "reverse"
        rows = (_rows_forward(outputs, inputs, seeds, g) if mode == "forward"
                else _rows_reverse(outputs, inputs))
    return rows


def _matrix(rows: list[list[Node]]) -> Array:
    return Array((len(rows), len(rows[0])), items=[Value(n) for row in rows for n in row])


def hessian(y: Any, xs: Any, mode: Mode = "auto") -> Array:
    """∂²y/∂xs² as an (n, n) unpacked ``cp.matrix`` of a scalar ``y``: the Jacobian of the
    gradient. Symmetric by construction: entry (j, i) is entry (i, j) for i < j."""
    if isinstance(y, Array) or (isinstance(y, Sequence) and not isinstance(y, str)):
        raise TypeError("hessian() needs a scalar output; for a vector use jacobian(grad) per "
                        "component, or reduce it first (e.g. .sum())")
    _check_mode("hessian", mode)
    inputs = _inputs(xs)
    g = _flat(gradients(wrap(y).node, inputs))
    items = _matrix(_rows(g, inputs, mode)).items()
    n = len(g)
    return Array((n, n), items=[items[i * n + j] if i <= j else items[j * n + i]
                                for i in range(n) for j in range(n)])
