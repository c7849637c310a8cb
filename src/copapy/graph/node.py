"""Graph IR: immutable, typed, hash-consed nodes.

Structurally equal nodes are the same object (structural CSE at construction). A node refers
only to its operands, never to its users, so graphs are DAGs that the garbage collector can
drop as soon as the user lets go of them.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Hashable

from ..dtypes import DType

_serials = itertools.count()
_interned: weakref.WeakValueDictionary[tuple[object, ...], Node] = weakref.WeakValueDictionary()


class Node:
    """One operation (or leaf) of the graph.

    ``attr`` holds what is not an operand: the packed bytes of a constant, the identity of an
    input, the parameters of a signal operator. ``serial`` orders nodes by creation, which
    makes every traversal (and so every image) deterministic.
    """

    __slots__ = ("__weakref__", "args", "attr", "dtype", "op", "serial", "shape")

    op: str
    dtype: DType  # element type
    args: tuple[Node, ...]
    attr: Hashable
    serial: int
    shape: tuple[int, ...]  # () for a scalar, (n,) for a packed vector, (m, n) for a matrix

    @property
    def size(self) -> int:
        """Number of elements (1 for a scalar)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.dtype.size * self.size

    def __repr__(self) -> str:
        if self.shape:
            return f"{self.op}#{self.serial}:{self.dtype.name}{list(self.shape)}"
        if self.op == "const":
            return f"const({self.dtype.unpack(self.attr)!r}:{self.dtype.name})"  # type: ignore[arg-type]
        if self.op == "input":
            return f"input#{self.serial}:{self.dtype.name}"
        return f"{self.op}#{self.serial}:{self.dtype.name}"


def intern(op: str, dtype: DType, args: tuple[Node, ...], attr: Hashable = None,
           shape: tuple[int, ...] = ()) -> Node:
    """The unique node with this structure, created if it does not exist yet."""
    key = (op, dtype.name, tuple(id(a) for a in args), attr, shape)
    node = _interned.get(key)
    if node is None:
        node = Node()
        node.op = op
        node.dtype = dtype
        node.args = args
        node.attr = attr
        node.serial = next(_serials)
        node.shape = shape
        _interned[key] = node
    return node


def next_serial() -> int:
    """A fresh, increasing serial (identities of leaves, deterministic order)."""
    return next(_serials)


def const(value: float | int | bool, dtype: DType) -> Node:
    """A constant of ``dtype``; value is converted with the type's rounding (float32 rounds)."""
    return intern("const", dtype, (), dtype.pack(value))


def fresh_input(dtype: DType, initial: float | int | bool, name: str | None = None) -> Node:
    """A new input leaf (never merged with another input) with its initial value."""
    return intern("input", dtype, (), (next(_serials), name, dtype.pack(initial)))


def fresh_array_input(dtype: DType, initial: bytes, shape: tuple[int, ...],
                      name: str | None = None) -> Node:
    """A new packed array input; ``initial`` holds the element bytes (little-endian)."""
    return intern("input", dtype, (), (next(_serials), name, initial), shape)


def const_array(raw: bytes, dtype: DType, shape: tuple[int, ...]) -> Node:
    """A packed constant array from its element bytes."""
    return intern("const", dtype, (), raw, shape)


def input_initial(node: Node) -> bytes:
    """Slot bytes of an input's initial value."""
    assert node.op == "input"
    return node.attr[2]  # type: ignore[index,no-any-return]


def input_name(node: Node) -> str | None:
    assert node.op == "input"
    return node.attr[1]  # type: ignore[index,no-any-return]


def const_value(node: Node) -> float | int | bool:
    assert node.op == "const" and not node.shape
    return node.dtype.unpack(node.attr)  # type: ignore[arg-type]


def is_const(node: Node) -> bool:
    return node.op == "const"
