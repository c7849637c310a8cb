"""State of signal operators: a state leaf holds last run's value; its update is bound later.

``delay``, ``integrate`` and ``feedback`` are built from one primitive: a state leaf whose
value during a run is what its update computed in the previous run (or its initial value).
The update is attached after the leaf exists (feedback needs the leaf to compute it), so it
lives in a side table rather than in the immutable node.
"""

from __future__ import annotations

import weakref

from ..dtypes import DType
from .node import Node, intern, next_serial

_updates: weakref.WeakKeyDictionary[Node, Node] = weakref.WeakKeyDictionary()
#: states whose update is the signal itself (feedback, integrate), not an input (delay)
_signal_updates: weakref.WeakSet[Node] = weakref.WeakSet()


def new_state(dtype: DType, initial: float | int | bool, name: str | None = None) -> Node:
    """A fresh state leaf (never merged with another)."""
    return intern("state", dtype, (), (next_serial(), name, dtype.pack(initial)))


def set_update(state: Node, update: Node, signal: bool = False) -> None:
    """Bind the value the state takes for the next run (once); ``signal``: the update is the
    signal's value (feedback, integrate), which reads the state's init before its first run."""
    if state.op != "state":
        raise TypeError("only a state leaf can be given an update")
    if state in _updates:
        raise ValueError("this state already has an update")
    if update.dtype is not state.dtype:
        raise TypeError(f"state is {state.dtype.name} but its update is {update.dtype.name}")
    _updates[state] = update
    if signal:
        _signal_updates.add(state)


def update_of(state: Node) -> Node:
    """The update of a state leaf; a state without one keeps its value forever."""
    return _updates.get(state, state)


def update_is_signal(state: Node) -> bool:
    """Whether the state's update stands for the signal (so starts at the state's init)."""
    return state in _signal_updates


def state_initial(state: Node) -> bytes:
    return state.attr[2]  # type: ignore[index,no-any-return]


def dt_node(dtype: DType) -> Node:
    """The placeholder for the period of the task the node ends up in (``cp.dt``)."""
    return intern("dt", dtype, ())
