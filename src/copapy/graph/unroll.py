"""A counted loop unrolled from its one traced body (``cp.fori_loop(..., unroll=True)``).

The body traced over carry leaves (graph/loop.py) is rebuilt n times, each iteration's
carries (and iteration number) substituted by the previous iteration's results (and a
constant), with no rewrite (build.rebuild's ``exact``): every iteration runs the body's own
operations in the body's own operand order, so cp.grad inside the body sums in the same
association as the compiled loop, and the unrolled results are the loop's bits
(docs/decisions/2026-12-04-fori-loop.md). A loop the user unrolls by hand in Python traces
each iteration over other leaves, so its canonical operand order, and cp.grad's summation
order, may differ. :func:`relooped` rebuilds the body once, over new captures, into a new
loop (tg.compile(check=True) replacing a decided comparison a loop reads).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..dtypes import int32
from .build import rebuild
from .loop import body_of, body_order, make_loop
from .node import Node, const

#: the most iterations cp.fori_loop(..., unroll=True) builds (the graph grows with n)
MAX_UNROLL = 10_000


def unrolled(n: int, inits: Sequence[Node], carries: Sequence[Node],
             outputs: Sequence[Node], index: Node | None = None) -> list[Node]:
    """The state after ``n`` iterations of the body that maps ``carries`` (and ``index``)
    to ``outputs``, starting from ``inits``, as one unrolled graph."""
    order = body_order(carries, outputs, index)
    state = list(inits)
    for i in range(n):
        mapping = dict(zip(carries, state, strict=True))
        if index is not None:
            mapping[index] = const(i, int32)
        out = rebuild(order, mapping, exact=True)
        state = [out.get(o, o) for o in outputs]
    return state


def relooped(node: Node, args: Sequence[Node]) -> list[Node]:
    """The results of ``node``'s loop with new operands ``args`` (the initial states, then
    the captures, as ``node.args``): the body rebuilt over the new captures, no rewrite
    (``exact``), so it runs the same operations."""
    loop = body_of(node)
    k = len(loop.carries)
    mapping = {old: new for old, new in zip(loop.captures, args[k:], strict=True)
               if old is not new}
    body = rebuild(body_order(loop.carries, loop.outputs, loop.index), dict(mapping),
                   exact=True)
    outputs = [body.get(o, mapping.get(o, o)) for o in loop.outputs]
    return make_loop(loop.n, args[:k], loop.carries, outputs, loop.index)
