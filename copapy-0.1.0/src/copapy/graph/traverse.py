"""Walking a graph: the nodes outputs depend on, operands before users."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence

from . import _walk
from .node import Node


def live_nodes(outputs: Iterable[Node], stop: Container[Node] = (),
               reorder: Mapping[Node, Sequence[Node]] | None = None) -> list[Node]:
    """Every node the outputs depend on, operands before users (dead code excluded).

    Nodes in ``stop`` are treated as leaves (their operands are not visited). ``reorder``
    gives, for some nodes, the order their operands are visited in (default: ``node.args``).
    One iterative depth-first walk; leaves are emitted without being pushed (in C,
    graph/_walk.c: it runs for every compile and every ``cp.grad``).
    """
    if reorder is not None and not isinstance(reorder, dict):
        reorder = dict(reorder)  # the walk reads a dict; the schedule's already is one
    return _walk.live_nodes(outputs, stop, reorder)
