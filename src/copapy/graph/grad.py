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
    # an element, slice or reshape of a packed input is a view: its gradient is the input's
    # at that place (the view node itself is only one of the ways y reads the input)
    bases = [_viewed_input(x) for x in xs]
    # ... unless y reads that input only element by element and x is one of those elements:
    # then x's own (scalar) adjoint is the gradient, with no array of the input's shape built
    # from one-hot pieces (a Jacobian by the elements of a packed input: 30 vector copies and
    # 4 vector loops in the EKF step, docs/decisions/2026-12-05-robot-programs-against-c.md)
    by_element = _read_by_element(order, bases)
    bases = [None if b in by_element and _is_element(x, b) else b for x, b in zip(xs, bases,
                                                                                 strict=True)]
    swept = list(dict.fromkeys(b if b is not None else x for x, b in zip(xs, bases,
                                                                           strict=True)))
    # a gradient flows to an operand that depends on an x and is a float
    wanted = _sweep.float_dependents(order, swept)
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
    out = []
    for x, base in zip(xs, bases, strict=True):
        found = adjoint.get(base if base is not None else x)
        if found is None:  # y does not depend on x: zeros of x's shape (a scalar 0 for an
            # array x made cp.jacobian's block one column wide and tg.read give one 0.0)
            zero = const(0.0, x.dtype)
            out.append(broadcast_to(zero, x.shape) if x.shape else zero)
        else:
            out.append(found if base is None else _same_view(x, found))
    return out


def _is_element(x: Node, base: Node | None) -> bool:
    """Whether ``x`` is one scalar element of ``base``."""
    return x.op == "index" and not x.shape and x.args[0] is base


def _read_by_element(order: Sequence[Node], bases: Sequence[Node | None]) -> set[Node]:
    """The inputs among ``bases`` that the nodes of ``order`` read only through their scalar
    elements (the element nodes are interned: one node per element)."""
    found = {b for b in bases if b is not None}
    if found:
        for node in order:
            if not (node.op == "index" and not node.shape):
                found.difference_update(node.args)
    return found


#: operations that only rearrange the elements of their one operand (no code of their own
#: beyond a gather): a view of an input made of them is differentiated as that input
_VIEWS = frozenset({"index", "slice", "reshape", "sgather", "ngather", "transpose"})


def _viewed_input(x: Node) -> Node | None:
    """The input that ``x`` is a view of (``v[1]``, ``m[1]``, ``m.T[0, 1]`` of a packed
    input), None if it is no view of an input."""
    if x.op not in _VIEWS:
        return None
    base = x
    while base.op in _VIEWS:
        base = base.args[0]
    return base if base.op == "input" else None


def _same_view(x: Node, g: Node) -> Node:
    """The gradient ``g`` of the input that ``x`` views, viewed as ``x`` views that input:
    each view operation rebuilt with its own attribute over ``g`` (of the input's shape)."""
    if x.op == "input":
        return g
    return make(REGISTRY[x.op], (_same_view(x.args[0], g),), x.attr)
