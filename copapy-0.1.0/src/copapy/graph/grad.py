"""Reverse-mode automatic differentiation on the graph.

The gradient is itself a graph (built with the registry's derivative rules), so it is
simplified, compiled and run like any other value.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._gc import without_gc
from . import _sweep, loop_grad
from .build import apply, broadcast_to, make
from .errors import NotDifferentiableError
from .grad_rules import rule_for
from .loop import FORI
from .node import Node, const
from .ops import REGISTRY
from .traverse import live_nodes

__all__ = ["NotDifferentiableError", "gradients"]

#: the registry rows the C sweep builds the gradients of itself, in its order
_ARITHMETIC = tuple(REGISTRY[name] for name in ("add", "sub", "mul", "neg"))


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
    # a gradient flows to an operand that depends on an x and is a float
    wanted = _sweep.float_dependents(order, xs)
    adjoint: dict[Node, Node] = {y: const(1.0, y.dtype)}
    upstream = adjoint.get

    def by_rule(node: Node, g: Node) -> None:
        """Node's gradient g handed to its operands by the operation's rule."""
        rule = rule_for(node.op)
        if rule is None and node.op != FORI:
            return  # bool/int results carry no gradient
        args = node.args
        need = tuple([a in wanted for a in args])
        if True not in need:
            return
        # a cp.fori_loop result: through the loop's tangents (graph/loop_grad.py)
        shares = (rule(node, g, need) if rule is not None else
                  loop_grad.contributions(node, g, need, gradients))
        for arg, needed, contribution in zip(args, need, shares, strict=True):
            if contribution is None or not needed:
                continue
            if contribution.shape != arg.shape:
                # a scalar broadcast over an array: its gradient is the sum over the array
                contribution = apply("rsum", contribution) if not arg.shape else broadcast_to(
                    contribution, arg.shape)
            previous = upstream(arg)
            adjoint[arg] = contribution if previous is None else apply("add", previous,
                                                                      contribution)

    # users before operands; scalar +, -, * and negation are handed on in C (graph/_sweep.c)
    # by the same nodes their rules build, every other node by_rule
    _sweep.sweep(order, adjoint, wanted, make, _ARITHMETIC, by_rule)
    return [adjoint.get(x, const(0.0, x.dtype)) for x in xs]
