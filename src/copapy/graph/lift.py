"""Scenarios as lanes: a scalar graph lifted so that every value that differs between
scenarios is a packed array with one lane per scenario (a sweep runs many scenarios in one
program, docs/decisions/2026-12-04-lane-sweeps.md).

A lifted node is the same operation, operand order and attribute on packed operands (a value
that is the same in every lane stays a scalar operand): a packed element-wise stencil computes
element i exactly as the scalar stencil computes the scalar (the packed == scalar invariant),
so lane k holds scenario k's bits. Signal states that differ between lanes become packed
states of the same initial value; their updates are lifted with them. An input may also be
replaced by another node of the graph (``alias``: a sweep reads a task output there instead of
an I/O channel the output drives). Anything that is not a scalar element-wise operation
(arrays, reductions, loops) is refused with ``LiftError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .node import Node, intern, next_serial
from .ops import REGISTRY
from .state import set_update, state_initial, update_is_signal, update_of
from .traverse import closure

__all__ = ["LiftError", "lift", "reaches"]

#: leaves a lifted graph may hold as they are (lanes of an input come from ``lanes``)
_LEAVES = frozenset({"const", "input", "state", "dt"})


class LiftError(ValueError):
    """The graph has a node that has no lane form; the message names it."""


def reaches(source: Node, target: Node, alias: Mapping[Node, Node]) -> bool:
    """Whether ``source`` reads ``target`` in the same run: through operands and aliases,
    not through a state (a state holds the previous run's value)."""
    seen: set[Node] = set()
    todo = [source]
    while todo:
        node = todo.pop()
        if node is target:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(_operands(node, alias))
    return False


def lift(roots: Sequence[Node], lanes: Mapping[Node, Node], count: int,
         alias: Mapping[Node, Node] | None = None) -> dict[Node, Node]:
    """The new form of every node that the roots depend on (through the updates of the
    states they read too) and that changes: a node that depends on a leaf of ``lanes`` (a
    leaf -> its packed replacement of shape ``(count,)``) is packed; an input of ``alias``
    becomes the node it maps to (which must not read it: ``reaches``). The other nodes stay
    as they are (one value for every lane). LiftError for a node with no lane form."""
    alias = dict(alias or {})
    order = _closure(roots, alias)
    for node in order:
        _check(node)
    varying = _spread(order, lanes, alias)
    changed = _spread(order, [*lanes, *alias], alias)
    out: dict[Node, Node] = {}
    for node in order:
        if node not in changed:
            continue
        if node in lanes:
            out[node] = lanes[node]
        elif node in alias:
            out[node] = out.get(alias[node], alias[node])
        elif node.op == "state":
            shape = (count,) if node in varying else ()
            raw = state_initial(node) * (count if shape else 1)
            out[node] = intern("state", node.dtype, (), (next_serial(), node.attr[1], raw),  # type: ignore[index]
                               shape)
        else:
            args = tuple(out.get(a, a) for a in node.args)
            shape = (count,) if any(a.shape for a in args) else ()
            out[node] = intern(node.op, node.dtype, args, node.attr, shape)
    for node, new in list(out.items()):
        if node.op == "state" and node not in lanes:
            update = update_of(node)
            set_update(new, out.get(update, update), signal=update_is_signal(node))
    return out


def _operands(node: Node, alias: Mapping[Node, Node]) -> Iterable[Node]:
    target = alias.get(node)
    return node.args if target is None else (target,)


def _closure(roots: Sequence[Node], alias: Mapping[Node, Node]) -> list[Node]:
    """Every node the roots read, through aliases and the updates of states, operands (and
    alias targets) before their users (traverse.closure: an aliased input is walked through
    its target); LiftError for a cycle through an alias, which the walk leaves as a node
    placed before (or at) an operand of its own (the graph without aliases has none)."""
    order, _ = closure(roots, reorder={node: (target,) for node, target in alias.items()})
    if alias:
        at = {node: k for k, node in enumerate(order)}
        for k, node in enumerate(order):
            for a in _operands(node, alias):
                if at[a] >= k:
                    raise LiftError(f"{a!r} reads itself in one run through an I/O alias")
    return order


def _check(node: Node) -> None:
    if node.shape:
        raise LiftError(f"{node!r} is an array: lanes lift programs of scalars only")
    if node.op in _LEAVES:
        return
    spec = REGISTRY.get(node.op)
    if spec is None or spec.shape_rule != "elementwise":
        raise LiftError(f"{node!r}: {node.op} is not an element-wise operation, it has no "
                        f"lane form")


def _spread(order: Sequence[Node], seeds: Iterable[Node],
            alias: Mapping[Node, Node]) -> set[Node]:
    """The seeds and every node that reads one, through aliases and states (a state reads
    what its update reads)."""
    readers: dict[Node, list[Node]] = {}
    for node in order:
        for a in (update_of(node),) if node.op == "state" else _operands(node, alias):
            readers.setdefault(a, []).append(node)
    present = set(order)
    todo = [n for n in seeds if n in present]
    found = set(todo)
    while todo:
        for user in readers.get(todo.pop(), ()):
            if user not in found:
                found.add(user)
                todo.append(user)
    return found
