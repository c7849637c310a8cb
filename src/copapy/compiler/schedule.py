"""The order a chain's nodes are lowered in: operands with the larger register need first.

With two registers per class, evaluating the operand that needs more registers first (Ershov /
Sethi-Ullman numbers) keeps the other operand's value out of a register while the deep one
is computed, so fewer values are spilled. The order depends only on the graph's structure,
not on which operand a commutative operation lists first (the canonical order of
graph/node.canonical_key is a hash order, not one chosen for register pressure).
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from ..graph.node import Node
from ..graph.traverse import live_nodes


def register_needs(order: Iterable[Node], stop: Container[Node]) -> dict[int, int]:
    """Registers each node needs to be computed (0 for values in memory), by node id."""
    need: dict[int, int] = {}
    for node in order:
        if node in stop or not node.args:
            need[id(node)] = 0
            continue
        child = sorted((need[id(a)] for a in node.args), reverse=True)
        need[id(node)] = max(1, *(n + k for k, n in enumerate(child)))
    return need


def evaluation_order(roots: Iterable[Node], stop: Container[Node] = ()) -> list[Node]:
    """``live_nodes`` order (operands before users), visiting the operand with the larger
    register need first; ties keep the operands' order."""
    roots = list(roots)
    need = register_needs(live_nodes(roots, stop=stop), stop)
    order: list[Node] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Node, list[Node]]] = [(root, _visit_order(root, need, stop))]
        while stack:
            node, todo = stack[-1]
            if todo:
                child = todo.pop()
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, _visit_order(child, need, stop)))
            else:
                stack.pop()
                order.append(node)
    return order


def _visit_order(node: Node, need: dict[int, int], stop: Container[Node]) -> list[Node]:
    """The operands to visit, the first one last (the caller pops from the end)."""
    if node in stop or not node.args:
        return []
    args = node.args
    if len(args) == 1:
        return [args[0]]
    ranked = sorted(range(len(args)), key=lambda i: (-need[id(args[i])], i))
    return [args[i] for i in reversed(ranked)]
