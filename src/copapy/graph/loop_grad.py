"""Gradients through a counted loop (graph/loop.py) in forward mode: no tape.

For a loop x_{i+1} = f(x_i, c) with state x (m elements) and captures c, the
derivatives of the final state with respect to the loop's operands (the initial state and
the captures, p of them) are carried as an m x p tangent matrix T in a second counted loop:
T_0 = [I | 0], T_{i+1} = df/dx (x_i, c) T_i + [0 | df/dc (x_i, c)]. The tangent loop runs the
same body for x (the same bits), so its memory is m + m·p slots whatever n is, and its code
is one body as well; reverse mode would need a tape of n x m values or recomputation
(docs/decisions/2026-12-04-fori-loop.md). ``grad.py`` asks ``contributions`` for a loop
result's share of a gradient; the tangent loop is built once per loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..dtypes import DType
from .build import apply, broadcast_to, cast, index, rebuild, stack
from .errors import NotDifferentiableError
from .loop import LoopBody, body_of, body_order, make_loop, new_carry, result_index
from .node import Node, const
from .traverse import live_nodes

Gradients = Callable[[Node, Sequence[Node]], list[Node]]
_tangents: dict[int, list[list[Node]]] = {}


def _elements(node: Node) -> list[Node]:
    """A value's scalar elements (row-major; a packed array's as views)."""
    return [index(node, e) for e in range(node.size)] if node.shape else [node]


def _tangent_results(node: Node, gradients: Gradients) -> list[list[Node]]:
    """T_n[i][j] = d (state element i) / d (operand element j) of ``node``'s loop, elements
    counted row-major through the state and the operands in order (built once per loop)."""
    loop = body_of(node)
    found = _tangents.get(loop.serial)
    if found is not None:
        return found
    dtype = _dtype(loop)
    m = sum(c.size for c in loop.carries)  # state elements
    p = sum(a.size for a in node.args)  # operand elements: the initial states, the captures
    scalar = const(0.0, dtype)
    first = len(loop.carries)  # the tangents' positions in the state follow the carries'
    tangents = [[new_carry(scalar, first + i * p + j) for j in range(p)] for i in range(m)]
    # d f_i / d (carries, float captures); an int or bool capture carries no gradient. A
    # capture may be computed from another (a and 0.5 * a): each is replaced by a leaf of its
    # own while differentiating, so the partial derivative of one does not also flow through
    # the other (the outer gradient sweep hands each operand its share, and would count the
    # path twice), and put back after
    floats = [c for c in loop.captures if c.dtype.is_float]
    base = first + m * p
    holes = {c: new_carry(c, base + q) for q, c in enumerate(floats)}
    opened = rebuild(body_order(loop.carries, loop.outputs, loop.index), dict(holes),
                     exact=True)
    wrt = [*loop.carries, *holes.values()]
    derivatives: list[list[Node]] = []
    for out in loop.outputs:
        for element in _elements(opened.get(out, out)):
            derivatives.append(gradients(element, wrt))
    flat = [d for row in derivatives for d in row]
    leaves = {*loop.carries, *holes.values(), *([loop.index] if loop.index else [])}
    back = rebuild(live_nodes(flat, stop=leaves), {h: c for c, h in holes.items()})
    outs: list[Node] = list(loop.outputs)
    for row in derivatives:
        by_operand = dict(zip([*loop.carries, *floats], [back.get(d, d) for d in row],
                              strict=True))
        d: list[Node] = []
        for x in (*loop.carries, *loop.captures):
            share = by_operand.get(x)
            if share is not None and share.shape != x.shape:
                # an output element that does not depend on an array operand: its gradient
                # is the scalar 0, which counts for every element (it took one position)
                share = broadcast_to(share, x.shape)
            d += ([cast(v, dtype) for v in _elements(share)] if share is not None else
                  [scalar] * x.size)
        for j in range(p):
            total = d[j] if j >= m else None  # a capture's own share
            for i in range(m):
                term = apply("mul", d[i], tangents[i][j])
                total = term if total is None else apply("add", total, term)
            assert total is not None
            outs.append(total)
    carries = [*loop.carries, *(t for row in tangents for t in row)]
    inits = [*node.args[:len(loop.carries)],
             *(const(1.0 if i == j else 0.0, dtype) for i in range(m) for j in range(p))]
    results = make_loop(loop.n, inits, carries, outs, loop.index)
    table = [results[first + i * p: first + (i + 1) * p] for i in range(m)]
    _tangents[loop.serial] = table
    return table


def _dtype(loop: LoopBody) -> DType:
    dtypes = {c.dtype for c in loop.carries}
    kind = next(iter(dtypes))
    if len(dtypes) != 1 or not kind.is_float:
        raise NotDifferentiableError(
            "cp.grad through cp.fori_loop needs a state of one float type (float32 or "
            "float64 throughout): cast the state's elements to one type")
    return kind


def contributions(node: Node, g: Node, need: Sequence[bool],
                  gradients: Gradients) -> list[Node | None]:
    """``g`` (the gradient of a loop result) handed to each operand of ``node``."""
    table = _tangent_results(node, gradients)
    loop = body_of(node)
    k = result_index(node)
    first = sum(c.size for c in loop.carries[:k])
    rows = table[first:first + node.size]
    gs = _elements(g)
    out: list[Node | None] = []
    at = 0
    for j, arg in enumerate(node.args):
        cols = range(at, at + arg.size)
        at += arg.size
        if not need[j] or not arg.dtype.is_float:
            out.append(None)
            continue
        shares = []
        for col in cols:
            total = None
            for ge, row in zip(gs, rows, strict=True):
                term = apply("mul", ge, row[col])
                total = term if total is None else apply("add", total, term)
            assert total is not None
            shares.append(cast(total, arg.dtype))
        out.append(stack(shares, arg.shape) if arg.shape else shares[0])
    return out
