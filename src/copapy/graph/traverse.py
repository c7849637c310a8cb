"""Walking a graph: the nodes outputs depend on, operands before users."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence

from . import _walk
from .node import Node
from .state import update_of


def live_nodes(outputs: Iterable[Node], stop: Container[Node] = (),
               reorder: Mapping[Node, Sequence[Node]] | None = None) -> list[Node]:
    """Every node the outputs depend on, operands before users (dead code excluded).

    Nodes in ``stop`` are treated as leaves (their operands are not visited). ``reorder``
    gives, for some nodes, the operands visited, in that order (default: ``node.args``; a node
    without args that has an entry is walked through it: lift's aliased inputs).
    One iterative depth-first walk; leaves are emitted without being pushed (in C,
    graph/_walk.c: it runs for every compile and every ``cp.grad``).
    """
    if reorder is not None and not isinstance(reorder, dict):
        reorder = dict(reorder)  # the walk reads a dict; the schedule's already is one
    return _walk.live_nodes(outputs, stop, reorder)


def closure(roots: Sequence[Node], stop: Container[Node] = (),
            mapping: Mapping[Node, Node] | None = None,
            reorder: Mapping[Node, Sequence[Node]] | None = None
            ) -> tuple[list[Node], list[Node]]:
    """The nodes the roots depend on, following each state leaf to its update (the next run
    reads it), operands before users; and the states, in the order found. ``mapping``: nodes
    rewritten -> their new form (the roots and the updates are mapped); ``stop`` and
    ``reorder`` as for live_nodes (the compiler's and the lanes' closure share this walk)."""
    mapping = mapping or {}
    roots = [mapping.get(r, r) for r in roots]
    states: list[Node] = []
    seen_states: set[int] = set()
    while True:
        order = live_nodes(roots, stop=stop, reorder=reorder)
        new = [n for n in order if n.op == "state" and id(n) not in seen_states and n not in stop]
        if not new:
            return order, states
        for s in new:
            seen_states.add(id(s))
            states.append(s)
            update = update_of(s)
            roots.append(mapping.get(update, update))
