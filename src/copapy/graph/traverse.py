"""Walking a graph: the nodes outputs depend on, operands before users."""

from __future__ import annotations

from collections.abc import Container, Iterable

from .node import Node


def live_nodes(outputs: Iterable[Node], stop: Container[Node] = ()) -> list[Node]:
    """Every node the outputs depend on, operands before users (dead code excluded).

    Nodes in ``stop`` are treated as leaves (their operands are not visited).
    """
    order: list[Node] = []
    seen: set[int] = set()
    for root in outputs:
        if id(root) in seen:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        seen.add(id(root))
        while stack:
            node, i = stack[-1]
            if i < len(node.args) and node not in stop:
                stack[-1] = (node, i + 1)
                child = node.args[i]
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
    return order
