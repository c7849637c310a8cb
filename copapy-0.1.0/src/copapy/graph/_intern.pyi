"""Type stub of the C extension copapy.graph._intern (graph/_intern.c)."""

from collections.abc import Callable, Hashable, Iterator
from typing import Any

from ..dtypes import DType
from .node import Node
from .ops import OpSpec

def intern(op: str, dtype: DType, args: tuple[Node, ...], attr: Hashable = None,
           shape: tuple[int, ...] = (), /) -> Node: ...
def make(spec: OpSpec, args: tuple[Node, ...], attr: object = None, /) -> Node: ...
def forget(ref: Any, /) -> None: ...
def bind(node_type: type[Node], ref_type: type[Any], interned: dict[tuple[object, ...], Any],
         serials: Iterator[int], stable_hash: Callable[[object], int],
         op_hashes: dict[str, int], op_hash: Callable[[str], int], /) -> None: ...
def bind_make(fast_specs: dict[str, tuple[DType | None, bool]],
              python_make: Callable[[OpSpec, tuple[Node, ...], object], Node], /) -> None: ...
def set_regroup(names: set[str] | frozenset[str], dtypes: set[DType] | frozenset[DType],
                /) -> None: ...
