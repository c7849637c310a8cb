"""Graph IR: immutable, typed, hash-consed nodes.

Structurally equal nodes are the same object (structural CSE at construction). A node refers
only to its operands, never to its users, so graphs are DAGs that the garbage collector can
drop as soon as the user lets go of them.
"""

from __future__ import annotations

import itertools
import weakref
import zlib
from collections.abc import Hashable
from typing import NoReturn

from ..dtypes import DType
from . import _intern

_serials = itertools.count()
#: structure -> weak reference to the node (hash-consing; nodes die with their last user)
_interned: dict[tuple[object, ...], _KeyedRef] = {}


class Node:
    """One operation (or leaf) of the graph.

    ``attr`` holds what is not an operand: the packed bytes of a constant, the identity of an
    input, the parameters of a signal operator. ``serial`` orders nodes by creation.
    ``fingerprint`` is a hash of the node's structure that does not depend on what else the
    process traced before (creation serials of leaves are left out): the canonical operand
    order of commutative operations uses it, so the same graph always gives the same image.
    """

    __slots__ = ("__weakref__", "args", "attr", "dtype", "fingerprint", "loc", "op", "serial",
                 "shape")

    op: str
    dtype: DType  # element type
    args: tuple[Node, ...]
    attr: Hashable
    serial: int
    fingerprint: int
    shape: tuple[int, ...]  # () for a scalar, (n,) for a packed vector, (m, n) for a matrix
    #: where the user's code built it: (code object, line number), set by graph/location.py
    #: (None until then)
    loc: tuple[object, int] | None

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

    def __copy__(self) -> Node:
        return self  # immutable and hash-consed: a node is its identity

    def __deepcopy__(self, memo: dict[int, object]) -> Node:
        return self  # a copy of an input would be another input that no write reaches

    def __reduce__(self) -> NoReturn:
        raise TypeError("copapy graph nodes cannot be pickled (a node is its identity in this "
                        "process); save the compiled program with cp.save / tg.save instead")

    def __repr__(self) -> str:
        if self.shape:
            return f"{self.op}#{self.serial}:{self.dtype.name}{list(self.shape)}"
        if self.op == "const":
            return f"const({self.dtype.unpack(self.attr)!r}:{self.dtype.name})"  # type: ignore[arg-type]
        if self.op == "input":
            return f"input#{self.serial}:{self.dtype.name}"
        return f"{self.op}#{self.serial}:{self.dtype.name}"


class _KeyedRef(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to an interned node that knows its key (to drop the entry). The key
    is set after construction: overriding ``__new__``/``__init__`` would cost two Python calls
    per node built."""

    __slots__ = ("key",)
    key: tuple[object, ...]


#: intern(op, dtype, args, attr=None, shape=()): the unique node with this structure, created
#: if it does not exist yet (in C, graph/_intern.c: it is called for every node built). Its key
#: is (op, dtype.code, args, attr, shape): operands are keys by identity (Node has no __eq__),
#: and the entry, a _KeyedRef, dies with the node (_intern.forget), so the key holding its
#: operands keeps nothing alive that the node does not. The node's fingerprint is
#: hash((_op_hash(op), dtype.code, stable_hash(identity) or 0 for None, *operand
#: fingerprints)), where the identity of leaves made fresh on every call (inputs, states) is
#: their name alone (their serial depends on the history, and code must not depend on initial
#: values) and otherwise the attribute; the shape is left out (the code of a packed loop does
#: not depend on its length).
intern = _intern.intern


def _op_hash(op: str) -> int:
    """An operation name's hash that is the same in every process (str hashes are not)."""
    return zlib.crc32(op.encode())


_OP_HASHES: dict[str, int] = {}


def stable_hash(x: object) -> int:
    """A hash of an attribute that is the same in every process (str and bytes hashes are
    randomised per process, ints and tuples of ints are not)."""
    kind = type(x)
    if kind is bytes:  # constants' slot bytes: the most common attribute (checked first)
        return hash((len(x), zlib.crc32(x)))  # type: ignore[arg-type]
    if x is None:
        return 0  # hash(None) is its address before Python 3.12
    if isinstance(x, bool | int | float):
        return hash(x)
    if isinstance(x, str):
        return zlib.crc32(x.encode())
    if isinstance(x, bytes):
        return hash((len(x), zlib.crc32(x)))
    if isinstance(x, tuple):
        return hash(tuple(stable_hash(e) for e in x))
    return 0  # another kind of attribute: equal fingerprints fall back to creation order


def canonical_key(node: Node) -> tuple[bool, int, int]:
    """Sort key of a commutative operation's operands: constants second, then structure;
    creation order only between structurally identical leaves made by the same trace."""
    return (node.op == "const", node.fingerprint, node.serial)


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


_intern.bind(Node, _KeyedRef, _interned, _serials, stable_hash, _OP_HASHES, _op_hash)
