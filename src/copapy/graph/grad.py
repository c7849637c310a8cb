"""Reverse-mode automatic differentiation on the graph.

The gradient is itself a graph (built with the registry's derivative rules), so it is
simplified, compiled and run like any other value.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._gc import without_gc
from .build import apply, broadcast_to
from .errors import NotDifferentiableError
from .grad_rules import rule_for
from .node import Node, const
from .traverse import live_nodes

__all__ = ["NotDifferentiableError", "gradients"]


@without_gc
def gradients(y: Node, xs: Sequence[Node]) -> list[Node]:
    """d y / d x for each x: one sweep backwards over the nodes y depends on."""
    if not y.dtype.is_float:
        raise NotDifferentiableError(
            f"cannot differentiate a {y.dtype.name} value: the output must be float32/float64")
    for x in xs:
        if not x.dtype.is_float:
            raise NotDifferentiableError(
                f"gradient with respect to a {x.dtype.name} value is not defined: "
                f"differentiate with respect to float values (cp.value(1.0))")
    order = live_nodes([y])
    # the nodes that depend on an x: only their gradients are built (nodes are keys by identity)
    relevant: set[Node] = set(xs)
    add = relevant.add
    for node in order:
        for a in node.args:
            if a in relevant:
                add(node)
                break
    # a gradient flows to an operand that depends on an x and is a float
    wanted = {n for n in relevant if n.dtype.is_float}
    adjoint: dict[Node, Node] = {y: const(1.0, y.dtype)}
    upstream = adjoint.get
    for node in reversed(order):
        g = upstream(node)
        if g is None:
            continue
        args = node.args
        if not args:
            continue
        rule = rule_for(node.op)
        if rule is None:
            continue  # bool/int results carry no gradient
        need = tuple([a in wanted for a in args])
        if True not in need:
            continue
        for arg, needed, contribution in zip(args, need, rule(node, g, need), strict=True):
            if contribution is None or not needed:
                continue
            if contribution.shape != arg.shape:
                # a scalar broadcast over an array: its gradient is the sum over the array
                contribution = apply("rsum", contribution) if not arg.shape else broadcast_to(
                    contribution, arg.shape)
            previous = upstream(arg)
            adjoint[arg] = contribution if previous is None else apply("add", previous,
                                                                      contribution)
    return [adjoint.get(x, const(0.0, x.dtype)) for x in xs]
