"""A counted loop unrolled from its one traced body (``cp.fori_loop(..., unroll=True)``).

The body traced over carry leaves (graph/loop.py) is rebuilt n times, each iteration's
carries (and iteration number) substituted by the previous iteration's results (and a
constant), with no rewrite (build.rebuild's ``exact``): every iteration runs the body's own
operations in the body's own operand order, so cp.grad inside the body sums in the same
association as the compiled loop, and the unrolled results are the loop's bits
(docs/decisions/2026-12-04-fori-loop.md). A loop the user unrolls by hand in Python traces
each iteration over other leaves, so its canonical operand order, and cp.grad's summation
order, may differ.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..dtypes import int32
from .build import rebuild
from .loop import body_order
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
