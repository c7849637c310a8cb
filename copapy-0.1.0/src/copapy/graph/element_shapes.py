"""The shape of the unpacked array a named leaf starts.

An unpacked input or state array ``name`` of shape (2, 3) is six leaves named ``name[0]`` ..
``name[5]``, nothing in them says (2, 3). Its first leaf records the shape here when the array
is made (``cp.value(..., name=..., packed=False)``, a named signal's state), so a saved program
describes the array with its shape (``saved.array_specs``) without the Array object, e.g. in
``tg.save``. Weak keys: a leaf no graph holds any more takes its entry with it.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from .node import Node

_SHAPES: WeakKeyDictionary[Node, tuple[int, ...]] = WeakKeyDictionary()


def record(first: Node, shape: tuple[int, ...]) -> None:
    """``first`` is element 0 of an unpacked array of ``shape`` (row-major)."""
    _SHAPES[first] = tuple(shape)


def shape_of(first: Node) -> tuple[int, ...] | None:
    """The shape recorded for the array ``first`` starts, or None."""
    return _SHAPES.get(first)
