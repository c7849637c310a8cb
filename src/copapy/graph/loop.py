"""Counted loops (``cp.fori_loop``) in the graph: a body traced once over carry leaves.

A loop is one body graph whose leaves are *carry* nodes (the state at the start of an
iteration) and *captures* (values from outside the loop the body reads, computed once before
it). Each element of the final state is a ``fori`` node whose operands are the loop's initial
states followed by its captures, so every walk over the outer graph (closures, schedules)
sees what the loop reads without entering the body; the body lives in a side table, like a
state's update (graph/state.py). The compiler (compiler/fori.py) lowers the body once between
a counted loop's begin and end stencils (stencils/fori.c).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..dtypes import int32
from .node import Node, intern, next_serial
from .traverse import live_nodes

CARRY, FORI, INDEX = "carry", "fori", "loop_index"
#: leaves a body may not hold: their value would change between iterations' meaning
_FORBIDDEN_IN_BODY = {"state": "a signal state (cp.delay, cp.feedback, cp.integrate)",
                      "dt": "cp.dt"}


@dataclass(frozen=True)
class LoopBody:
    """One counted loop: ``n`` iterations of ``outputs`` = body(``carries``)."""

    serial: int
    n: int
    carries: tuple[Node, ...]
    outputs: tuple[Node, ...]
    captures: tuple[Node, ...]
    #: the iteration's number (int32, 0 to n - 1) if the body reads it
    index: Node | None = None


_bodies: dict[int, LoopBody] = {}


def new_carry(like: Node, position: int) -> Node:
    """A fresh carry leaf of ``like``'s type and shape, element ``position`` of its loop's
    state: the position, not the creation serial, is its identity in the fingerprint (node.FRESH),
    so a body's operand order does not depend on what the process traced before."""
    return intern(CARRY, like.dtype, (), (next_serial(), position), like.shape)


def new_index() -> Node:
    """A fresh leaf for the iteration number a body reads (``cp.fori_loop(..., index=True)``)."""
    return intern(INDEX, int32, (), (next_serial(), None))


def body_of(node: Node) -> LoopBody:
    """The loop a ``fori`` node is a result of."""
    return _bodies[node.attr[0]]  # type: ignore[index]


def result_index(node: Node) -> int:
    return node.attr[1][0]  # type: ignore[index,no-any-return]


def body_order(carries: Sequence[Node], outputs: Sequence[Node],
               index: Node | None = None) -> list[Node]:
    """The body's nodes that depend on its carries or iteration number (the leaves first,
    operands before users), after checking that the body may run in a counted loop."""
    leaves = set(carries) | ({index} if index is not None else set())
    varying: set[Node] = set(leaves)
    out: list[Node] = []
    for node in live_nodes(list(outputs), stop=leaves):
        if node.op in _FORBIDDEN_IN_BODY:
            raise ValueError(f"cp.fori_loop: the body reads {_FORBIDDEN_IN_BODY[node.op]}; "
                             f"compute it outside the body and let the body read the value")
        if node.op in (CARRY, INDEX) and node not in leaves:
            raise ValueError("cp.fori_loop: the body reads the state of another loop's body "
                             "(nested loops are not supported): write the inner loop outside")
        if node in leaves or any(a in varying for a in node.args):
            varying.add(node)
            out.append(node)
    return out


def make_loop(n: int, inits: Sequence[Node], carries: Sequence[Node],
              outputs: Sequence[Node], index: Node | None = None) -> list[Node]:
    """The ``fori`` result nodes of a loop whose body maps ``carries`` (and the iteration
    number ``index``) to ``outputs``."""
    order = body_order(carries, outputs, index)
    varying = set(order)
    leaves = set(carries) | ({index} if index is not None else set())
    captures: list[Node] = []
    seen: set[Node] = set()

    def capture(node: Node) -> None:
        if node not in varying and node.op != "const" and node not in seen:
            seen.add(node)
            captures.append(node)

    for node in order:
        if node not in leaves:
            for a in node.args:
                capture(a)
    for out in outputs:
        capture(out)
    serial = next_serial()
    body = LoopBody(serial, n, tuple(carries), tuple(outputs), tuple(captures), index)
    _bodies[serial] = body
    args = (*inits, *captures)
    # a result's identity (its fingerprint, node.FRESH): its position, the count and the
    # body's structure, not the loop's serial
    structure = hash((n, index is not None, *(o.fingerprint for o in outputs)))
    return [intern(FORI, c.dtype, args, (serial, (k, n, structure)), c.shape)
            for k, c in enumerate(carries)]
