"""Type stub of the C extension copapy.graph._walk (graph/_walk.c)."""

from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from .node import Node

def live_nodes(outputs: Iterable[Node], stop: Container[Node],
               reorder: dict[Node, Sequence[Node]] | None, /) -> list[Node]: ...
def side_window(side: Node, narrowed: dict[Node, Any], env: Mapping[Node, Any], first: int,
                limit: int, /) -> tuple[list[Node], int]: ...
def expose_top(stack: list[Node], visited: set[Node], findings: Mapping[Node, Any],
               sides: Mapping[Node, Any], env: Mapping[Node, Any], ranges: Mapping[Node, Any],
               found: list[Node], work: list[Any], true: Any, false: Any, /) -> None: ...
