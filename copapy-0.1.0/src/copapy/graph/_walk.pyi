"""Type stub of the C extension copapy.graph._walk (graph/_walk.c)."""

from collections.abc import Container, Iterable, Sequence

from .node import Node

def live_nodes(outputs: Iterable[Node], stop: Container[Node],
               reorder: dict[Node, Sequence[Node]] | None, /) -> list[Node]: ...
