"""Gradients through a counted loop (graph/loop.py) in forward mode: no tape.

For a loop x_{i+1} = f(x_i, c) with scalar state x (m elements) and captures c, the
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

from .build import apply, cast
from .errors import NotDifferentiableError
from .loop import LoopBody, body_of, make_loop, new_carry, result_index
from .node import Node, const

Gradients = Callable[[Node, Sequence[Node]], list[Node]]
_tangents: dict[int, list[list[Node]]] = {}


def _tangent_results(node: Node, gradients: Gradients) -> list[list[Node]]:
    """T_n[k][j] = d result k / d operand j of ``node``'s loop (built once per loop)."""
    loop = body_of(node)
    found = _tangents.get(loop.serial)
    if found is not None:
        return found
    _check(loop)
    m, params = len(loop.carries), len(node.args)
    dtype = loop.carries[0].dtype
    tangents = [[new_carry(loop.carries[0]) for _ in range(params)] for _ in range(m)]
    # d f_k / d (carries, float captures); an int or bool capture carries no gradient
    wrt = [*loop.carries, *(c for c in loop.captures if c.dtype.is_float)]
    outs: list[Node] = list(loop.outputs)
    for k in range(m):
        shares = gradients(loop.outputs[k], wrt)
        by_operand = dict(zip(wrt, shares, strict=True))
        d = [cast(by_operand[x], dtype) if x in by_operand else const(0.0, dtype)
             for x in (*loop.carries, *loop.captures)]
        for j in range(params):
            total = d[j] if j >= m else None  # a capture's own share
            for i in range(m):
                term = apply("mul", d[i], tangents[i][j])
                total = term if total is None else apply("add", total, term)
            assert total is not None
            outs.append(total)
    carries = [*loop.carries, *(t for row in tangents for t in row)]
    inits = [*node.args[:m], *(const(1.0 if i == j else 0.0, dtype)
                               for i in range(m) for j in range(params))]
    results = make_loop(loop.n, inits, carries, outs)
    table = [results[m + k * params: m + (k + 1) * params] for k in range(m)]
    _tangents[loop.serial] = table
    return table


def _check(loop: LoopBody) -> None:
    dtypes = {c.dtype for c in loop.carries}
    if any(c.shape for c in loop.carries) or len(dtypes) != 1 or not next(
            iter(dtypes)).is_float:
        raise NotDifferentiableError(
            "cp.grad through cp.fori_loop needs a state of scalars of one float type (a "
            "value, a tuple of values or an unpacked vector); a packed array state or mixed "
            "types are not differentiated yet: use an unpacked state (packed=False)")
    if any(c.shape for c in loop.captures):
        raise NotDifferentiableError(
            "cp.grad through cp.fori_loop: the body reads a packed array from outside the "
            "loop; read its elements (unpacked) instead")


def contributions(node: Node, g: Node, need: Sequence[bool],
                  gradients: Gradients) -> list[Node | None]:
    """``g`` (the gradient of a loop result) handed to each operand of ``node``."""
    table = _tangent_results(node, gradients)
    row = table[result_index(node)]
    out: list[Node | None] = []
    for j, arg in enumerate(node.args):
        if not need[j] or not arg.dtype.is_float:
            out.append(None)
            continue
        out.append(cast(apply("mul", g, row[j]), arg.dtype))
    return out
