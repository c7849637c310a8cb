"""A state takes its update in its own slot where nothing reads the old value after it.

A signal's state has two slots: its value this run and its update (the next run's value),
copied into the first at the end of the chain (``ChainSpec.end_copies``). When the one store
of the update comes after the chain's last access to the state's slot, the store can write
the state's slot directly and the end copy goes: one load and one store less per state, and
the next run's read of the state no longer waits on a second store. The arithmetic is the
same stencils on the same values, so the bits are; only the store's slot changes
(docs/decisions/2026-12-04-tick-cost.md).

Conservative: only chains of scalar stencils (register or slot operands, no array, loop or
pointer stencil, which may address a range around a slot) and scalar states.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..graph.node import Node

if TYPE_CHECKING:
    from .lower import Instr

#: a scalar stencil: operands from registers (0/1) or one slot each (m); see names.py
_SCALAR = re.compile(r"[a-z0-9]+_(?:f32|f64|i32|bool)__[01m](?:_[01m]){0,3}")
_ROLES = frozenset(("a", "b", "c", "out"))


def _scalar_chain(instrs: Sequence[Instr]) -> bool:
    return all(_SCALAR.fullmatch(i.stencil) is not None and
               all(role in _ROLES for role, _ in i.slots) for i in instrs)


def _touches(instr: Instr, offset: int) -> bool:
    return any(o == offset for _, o in instr.slots)


def _retarget(instr: Instr, old: int, new: int) -> Instr:
    return instr._replace(slots=tuple((r, new if o == old else o) for r, o in instr.slots))


def store_in_place(instrs: list[Instr], end_copies: Sequence[tuple[Node, int, int]]
                   ) -> list[tuple[Node, int, int]]:
    """Rewrites ``instrs`` so that every state it can takes its update in place; returns the
    end copies still needed (update slot -> state slot), in their order."""
    if not _scalar_chain(instrs):
        return list(end_copies)
    left = []
    # an end copy that reads another state's slot must run before that state's own end copy
    # overwrites it: such a source is never read in place of the update (delay(x, 2) inside
    # an expression acted as a delay of one run)
    states = {state for _, _, state in end_copies}
    for node, nxt, state in end_copies:
        writes = [k for k, i in enumerate(instrs) if ("out", nxt) in i.slots]
        if node.shape or len(writes) != 1:
            left.append((node, nxt, state))
            continue
        w = writes[0]
        if any(_touches(i, nxt) for i in instrs[:w]):
            left.append((node, nxt, state))
        elif not any(_touches(i, state) for i in instrs[w:]):
            instrs[w:] = [_retarget(i, nxt, state) for i in instrs[w:]]
        elif _store_later(instrs, w, nxt, state):
            continue
        else:
            source = _copied_from(instrs, w, nxt)
            if source is None or source in states:
                left.append((node, nxt, state))
            else:  # the end copy reads the source itself (a constant, an input)
                del instrs[w]
                left.append((node, source, state))
    return left


def _dst(instr: Instr) -> str:
    """Where a scalar stencil puts its result: ``0``/``1`` a register, ``m`` a slot."""
    return instr.stencil.split("__", 1)[1].split("_", 1)[0]


def _store_later(instrs: list[Instr], w: int, nxt: int, state: int) -> bool:
    """Moves the update's store (``instrs[w]``, of a register) past the chain's last access
    to the state's slot and onto that slot, if the register still holds the update there and
    nothing in between touches the update slot: the end copy goes (a load and a store less).
    Later reads of the update slot read the state's slot, which then holds the same bytes."""
    store = instrs[w]
    register = store.stencil.rsplit("_", 1)[1]
    if not store.stencil.startswith("store_") or _dst(store) != "m" or register not in "01":
        return False
    last = max((k for k, i in enumerate(instrs) if _touches(i, state)), default=-1)
    between = instrs[w + 1:last + 1]
    if (last < w or any(_touches(i, nxt) or _dst(i) == register or ("out", state) in i.slots
                        for i in between)
            or any(("out", state) in i.slots or ("out", nxt) in i.slots
                   for i in instrs[last + 1:])):
        return False
    moved = _retarget(store, nxt, state)
    instrs[w:] = [*between, moved, *(_retarget(i, nxt, state) for i in instrs[last + 1:])]
    return True


def _copied_from(instrs: list[Instr], w: int, nxt: int) -> int | None:
    """The slot that ``instrs[w]`` only copies into ``nxt`` if nothing else in the chain
    touches ``nxt`` and nothing writes that slot: the end copy may read it instead."""
    slots = dict(instrs[w].slots)
    source = slots.get("a")
    if (not instrs[w].stencil.endswith("__m_m") or source is None or len(slots) != 2 or
            any(_touches(i, nxt) for k, i in enumerate(instrs) if k != w) or
            any(("out", source) in i.slots for i in instrs)):
        return None
    return source
