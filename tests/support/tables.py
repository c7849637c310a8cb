"""A stencil table with some stencils taken out: how a test reaches the compiler's errors for
a table that lacks an operation (every committed table has them all)."""

from __future__ import annotations

from typing import Any

from copapy.compiler.table import StencilTable


class Without:
    """A stencil table that lacks the stencils whose names start with ``prefix``."""

    def __init__(self, table: StencilTable, prefix: str) -> None:
        self._table = table
        self._prefix = prefix

    def __contains__(self, name: str) -> bool:
        return not name.startswith(self._prefix) and name in self._table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)
