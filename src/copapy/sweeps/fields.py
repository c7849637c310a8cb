"""A named slot range of a program's data region, as a sweep reads and writes it."""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..runtime.errors import TargetError
from ..saved import ArrayInfo, PortInfo, Program

__all__ = ["Field", "field_of"]


@dataclass(frozen=True)
class Field:
    """A named slot range of the data region: ``count`` elements of dtype ``code``."""

    name: str
    offset: int
    code: int
    count: int
    shape: tuple[int, ...] = ()

    @property
    def dtype(self) -> dt.DType:
        return dt.BY_CODE[self.code]

    @property
    def size(self) -> int:
        return self.count * self.dtype.size

    @property
    def range(self) -> tuple[int, int]:
        return (self.offset, self.size)


def field_of(prog: Program, name: str, what: str) -> Field:
    """The field of the port ``name`` (TargetError naming ``what`` if there is none)."""
    try:
        port: PortInfo | ArrayInfo = prog.named(name)
    except KeyError as exc:
        raise TargetError(f"{what}: {exc.args[0]}") from None
    if isinstance(port, ArrayInfo):
        if len(port.ports) != 1:
            raise TargetError(f"{what}: an array of one port per element; a sweep records "
                              f"packed arrays (cp.value(np_array)) or single elements "
                              f"({name}[0])")
        p = port.ports[0]
        return Field(name, p.offset, p.dtype.code, p.count, port.shape)
    return Field(name, port.offset, port.dtype.code, port.count,
                 () if port.count == 1 else (port.count,))
