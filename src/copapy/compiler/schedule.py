"""The order a chain's nodes are lowered in: operands with the larger register need first.

With two registers per class, evaluating the operand that needs more registers first (Ershov /
Sethi-Ullman numbers) keeps the other operand's value out of a register while the deep one
is computed, so fewer values are spilled. The order depends only on the graph's structure,
not on which operand a commutative operation lists first (the canonical order of
graph/node.canonical_key is a hash order, not one chosen for register pressure).
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Iterable, Sequence

from ..graph.node import Node
from ..graph.traverse import live_nodes


def register_needs(order: Iterable[Node], stop: Container[Node]) -> dict[Node, int]:
    """Registers each node needs to be computed (0 for values in memory)."""
    need: dict[Node, int] = {}
    for node in order:
        args = node.args
        if not args or node in stop:
            need[node] = 0
        elif len(args) == 2:
            a, b = need[args[0]], need[args[1]]
            need[node] = a + 1 if a == b else max(a, b, 1)
        elif len(args) == 1:
            need[node] = max(1, need[args[0]])
        else:
            child = sorted((need[a] for a in args), reverse=True)
            need[node] = max(1, *(n + k for k, n in enumerate(child)))
    return need


def evaluation_order(roots: Iterable[Node], stop: Container[Node] = ()) -> list[Node]:
    """``live_nodes`` order (operands before users), visiting the operand with the larger
    register need first; ties keep the operands' order."""
    roots = list(roots)
    live = live_nodes(roots, stop=stop)
    need = register_needs(live, stop)
    reordered: dict[Node, Sequence[Node]] = {}
    for node in live:
        operands = node.args
        if len(operands) < 2 or node in stop:
            continue
        if len(operands) == 2:
            if need[operands[1]] > need[operands[0]]:
                reordered[node] = (operands[1], operands[0])
            continue
        needs = [need[a] for a in operands]
        if any(later > earlier for earlier, later in itertools.pairwise(needs)):
            ranked = sorted(range(len(operands)), key=needs.__getitem__, reverse=True)
            reordered[node] = [operands[i] for i in ranked]
    if not reordered:
        return live
    return live_nodes(roots, stop=stop, reorder=reordered)
