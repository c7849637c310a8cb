"""Where the user's code built a node: captured cheaply while tracing, formatted on report.

``mark`` walks up from the DSL's frame to the first frame outside the copapy package and
keeps its code object and line number in the node's ``loc`` slot (no frame is kept alive,
no source line is read); ``describe`` turns that into ``file:line`` when a range report is
made. The first expression that built a node keeps it (nodes are hash-consed: ``x + 1`` on
two lines is one node). benchmarks/bench_ranges.py measures what the capture costs a traced
operation.
"""

from __future__ import annotations

import linecache
import os.path
import sys

from .node import Node

#: the copapy package's directory: frames in it are the DSL's, not the user's
#: (os.path, not pathlib: pathlib and what it imports cost ~3 ms of `import copapy`)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_getframe = sys._getframe


def mark(node: Node, depth: int = 2) -> Node:
    """Record the user's frame that (through the DSL) built ``node``, unless it has one."""
    if node.loc is not None:
        return node
    frame = _getframe(depth)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is not None:
        node.loc = (frame.f_code, frame.f_lineno)
        for arg in node.args:  # the conversions build.apply inserted for this expression
            if arg.loc is None and arg.op.startswith("cast_"):
                arg.loc = node.loc
    return node


def location(node: Node) -> tuple[str, int] | None:
    """(file, line) of the code that built ``node``, if known."""
    if node.loc is None:
        return None
    code, line = node.loc
    return code.co_filename, line  # type: ignore[attr-defined]


def describe(node: Node) -> str:
    """``file:line: source`` of the code that built ``node`` (or "unknown location")."""
    where = location(node)
    if where is None:
        return "unknown location"
    path, line = where
    source = linecache.getline(path, line).strip()
    return f"{path}:{line}" + (f": {source}" if source else "")
