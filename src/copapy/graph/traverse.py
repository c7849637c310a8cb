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
    return _walk.live_nodes(outputs, stop, None if reorder is None else dict(reorder))
