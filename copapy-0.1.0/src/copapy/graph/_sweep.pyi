"""Type stub of the C extension copapy.graph._sweep (graph/_sweep.c)."""

from collections.abc import Callable, Sequence

from .node import Node
from .ops import OpSpec

def float_dependents(order: list[Node], xs: Sequence[Node], /) -> set[Node]: ...
def sweep(order: list[Node], adjoint: dict[Node, Node], wanted: set[Node],
          make: Callable[[OpSpec, tuple[Node, ...]], Node], specs: tuple[OpSpec, ...],
          other: Callable[[Node, Node], None], /) -> None: ...
