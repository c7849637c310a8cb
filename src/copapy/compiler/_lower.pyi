"""Type stub of the C extension copapy.compiler._lower (compiler/_lower.c)."""

from collections.abc import Callable, Sequence
from typing import Any

from ..graph.node import Node

def lower_nodes(lowerer: Any, order: list[Node], skipped: set[Node],
                progress: Callable[[int, int], None] | None, instr_type: type[tuple[Any, ...]],
                prefix: Callable[[Node], str], views: frozenset[str], /) -> None: ...
def remaining_uses(remaining: dict[Node, list[int]], order: list[Node], skipped: set[Node],
                   special: set[Node], operands: Callable[[Node], Sequence[Node]],
                   views: frozenset[str], /) -> None: ...
