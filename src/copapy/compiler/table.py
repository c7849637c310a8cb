"""The pre-parsed stencil tables shipped in the package (built by tools/build_stencils.py).

A table is read on first use of its architecture, never at import, and individual functions
are materialised only when a program uses them.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from .._files import is_data_file, list_data, read_data
from ..arch.patchkind import PatchKind
from ..arch.targets import UnknownArchitectureError

TABLE_FORMAT = 1

@dataclass(frozen=True)
class Reloc:
    offset: int
    kind: PatchKind
    target_type: str  # next | loop (fused loops) | slot | func | rodata
    target: str  # slot role, function name or rodata blob id
    addend: int


@dataclass(frozen=True)
class Function:
    name: str
    code: bytes
    thumb: bool
    align: int
    strip: int  # bytes of the trailing jump to drop when the next stencil follows directly
    relocs: tuple[Reloc, ...]


class StencilTable:
    """Stencils, helper functions and constant blobs of one architecture."""

    def __init__(self, raw: dict[str, Any]) -> None:
        if raw.get("format") != TABLE_FORMAT:
            raise ValueError(f"stencil table format {raw.get('format')} is not {TABLE_FORMAT}; "
                             "rebuild with tools/build_stencils.py")
        self.arch: str = raw["arch"]
        self.arch_id: int = raw["arch_id"]
        self.base_align: int = raw["base_align"]
        self.code_align: int = raw["code_align"]
        self.nop: bytes = bytes.fromhex(raw["nop"])
        self.float64: bool = raw["float64"]
        self.source_hash: str = raw["source_hash"]
        self.kinds = [PatchKind.from_json(k) for k in raw["kinds"]]
        self._raw_functions: dict[str, Any] = raw["functions"]
        self._functions: dict[str, Function] = {}
        self.rodata: dict[str, tuple[bytes, int]] = {
            k: (bytes.fromhex(v["data"]), v["align"]) for k, v in raw["rodata"].items()
        }

    def __contains__(self, name: str) -> bool:
        return name in self._raw_functions

    def names(self) -> list[str]:
        return list(self._raw_functions)

    def function(self, name: str) -> Function:
        func = self._functions.get(name)
        if func is None:
            try:
                raw = self._raw_functions[name]
            except KeyError:
                raise KeyError(f"no stencil {name!r} for {self.arch}") from None
            relocs = tuple(Reloc(off, self.kinds[k], t, n, a) for off, k, t, n, a in raw["relocs"])
            func = Function(name, bytes.fromhex(raw["code"]), raw["thumb"], raw["align"],
                            raw["strip"], relocs)
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
    return StencilTable(json.loads(zlib.decompress(read_data("_tables", file_name))))
