"""Walking a graph: the nodes outputs depend on, operands before users."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence

from .node import Node

_NO_REORDER: Mapping[Node, Sequence[Node]] = {}


def live_nodes(outputs: Iterable[Node], stop: Container[Node] = (),
               reorder: Mapping[Node, Sequence[Node]] = _NO_REORDER) -> list[Node]:
    """Every node the outputs depend on, operands before users (dead code excluded).

    Nodes in ``stop`` are treated as leaves (their operands are not visited). ``reorder``
    gives, for some nodes, the order their operands are visited in (default: ``node.args``).
    One iterative depth-first walk; leaves are emitted without being pushed.
    """
    order: list[Node] = []
    emit = order.append
    seen: set[Node] = set()
    mark = seen.add
    operands = reorder.get
    for root in outputs:
        if root in seen:
            continue
        mark(root)
        if not root.args or root in stop:
            emit(root)
            continue
        stack = [(root, iter(operands(root, root.args)))]
        push = stack.append
        while stack:
            node, pending = stack[-1]
            for child in pending:
                if child not in seen:
                    mark(child)
                    if child.args and child not in stop:
                        push((child, iter(operands(child, child.args))))
                        break
                    emit(child)
            else:
                stack.pop()
                emit(node)
    return order
