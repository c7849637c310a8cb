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
from . import _lower


def register_needs(order: Iterable[Node], stop: Container[Node]) -> dict[Node, int]:
    """Registers each node needs to be computed (0 for values in memory)."""
    return _needs(order, stop)[0]


def _needs(order: Iterable[Node], stop: Container[Node]
           ) -> tuple[dict[Node, int], dict[Node, Sequence[Node]]]:
    """The register needs, and the nodes whose operands are visited in another order (the
    larger need first; ties keep the operands' order): one pass, operands come first (in C,
    compiler/_lower.c; nodes of more than two operands by ``_general``)."""
    need: dict[Node, int] = {}
    reordered: dict[Node, Sequence[Node]] = {}
    _lower.register_needs(order, stop, need, reordered, _general)
    return need, reordered


def _general(node: Node, need: dict[Node, int]) -> tuple[int, list[Node] | None]:
    """Need and visiting order of a node of more than two operands (a select, a stack)."""
    operands = node.args
    needs = [need[a] for a in operands]
    child = sorted(needs, reverse=True)
    value = max(1, *(n + k for k, n in enumerate(child)))
    if any(later > earlier for earlier, later in itertools.pairwise(needs)):
        ranked = sorted(range(len(operands)), key=needs.__getitem__, reverse=True)
        return value, [operands[i] for i in ranked]
    return value, None


def evaluation_order(roots: Iterable[Node], stop: Container[Node] = (),
                     live: Sequence[Node] | None = None) -> list[Node]:
    """``live_nodes`` order (operands before users), visiting the operand with the larger
    register need first; ties keep the operands' order. ``live``: the nodes the roots depend
    on in any operands-first order (or more leaves), if the caller walked them already."""
    roots = list(roots)
    walked = live is None
    if live is None:
        live = live_nodes(roots, stop=stop)
    reordered = _needs(live, stop)[1]
    if not reordered:
        return list(live) if walked else live_nodes(roots, stop=stop)
    return live_nodes(roots, stop=stop, reorder=reordered)
