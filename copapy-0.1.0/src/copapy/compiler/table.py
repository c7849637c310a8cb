"""The pre-parsed stencil tables shipped in the package (built by tools/build_stencils.py).

A table is read on first use of its architecture, never at import, and individual functions
are materialised only when a program uses them.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from .._files import is_data_file, list_data, read_data
from ..arch.patchkind import PatchKind
from ..arch.targets import UnknownArchitectureError
from .tablefile import TableFile


class Reloc(NamedTuple):
    offset: int
    kind: PatchKind
    target_type: str  # next | loop (fused loops) | slot | func | rodata
    target: str  # slot role, function name or rodata blob id
    addend: int


class Function(NamedTuple):
    name: str
    code: bytes
    thumb: bool
    align: int
    strip: int  # bytes of the trailing jump to drop when the next stencil follows directly
    relocs: tuple[Reloc, ...]


class StencilTable:
    """Stencils, helper functions and constant blobs of one architecture."""

    def __init__(self, data: bytes) -> None:
        self._file = f = TableFile(data)
        meta = f.meta
        self.arch: str = meta["arch"]
        self.arch_id: int = meta["arch_id"]
        self.base_align: int = meta["base_align"]
        self.code_align: int = meta["code_align"]
        self.nop: bytes = bytes.fromhex(meta["nop"])
        self.float64: bool = meta["float64"]
        self.source_hash: str = meta["source_hash"]
        self.kinds = [PatchKind.from_json(k) for k in meta["kinds"]]
        self._functions: dict[str, Function] = {}
        self.rodata: dict[str, tuple[bytes, int]] = f.rodata

    def __contains__(self, name: str) -> bool:
        return name in self._file.position

    def names(self) -> list[str]:
        return list(self._file.names)

    def function(self, name: str) -> Function:
        func = self._functions.get(name)
        if func is None:
            try:
                i = self._file.position[name]
            except KeyError:
                raise KeyError(f"no stencil {name!r} for {self.arch}") from None
            code, (thumb, align, strip, raw_relocs) = self._file.record(i)
            relocs = tuple(Reloc(off, self.kinds[k], t, n, a) for off, k, t, n, a in raw_relocs)
            func = Function(name, code, thumb, align, strip, relocs)
            self._functions[name] = func
        return func


def available_architectures() -> list[str]:
    return [name[:-5] for name in list_data("_tables", ".cpst")]


@cache
def load_table(arch: str) -> StencilTable:
    file_name = f"{arch}.cpst"
    plain = arch.replace("-", "").replace("_", "").isalnum()  # a name, not a path
    if not (plain and is_data_file("_tables", file_name)):
        known = ", ".join(available_architectures())
        raise UnknownArchitectureError(f"no stencils for architecture {arch!r}; available: {known}")
    return StencilTable(read_data("_tables", file_name))
