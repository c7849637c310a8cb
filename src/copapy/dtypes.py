"""Element types and their promotion rules (documented in docs/semantics.md)."""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class DType:
    """One element type. Instances are singletons; compare with ``is``."""

    name: str
    rank: int  # promotion order: bool < int32 < float32 < float64
    size: int  # bytes in a data slot
    code: int  # dtype code of image ports (docs/image.md)
    stencil: str  # stencil type suffix; bool shares the int32 stencils
    fmt: str  # struct format of one element, little-endian
    numpy: str

    @property
    def is_float(self) -> bool:
        return self.rank >= 2

    @property
    def is_int(self) -> bool:
        return self.rank == 1

    @property
    def is_bool(self) -> bool:
        return self.rank == 0

    def pack(self, value: float | int | bool) -> bytes:
        """The slot bytes of a Python value already converted to this type."""
        if self.is_bool:
            return struct.pack("<i", 1 if value else 0)
        return struct.pack(self.fmt, value)

    def unpack(self, raw: bytes) -> float | int | bool:
        if self.is_bool:
            return bool(struct.unpack("<i", raw)[0] != 0)
        value: float | int = struct.unpack(self.fmt, raw)[0]
        return value

    def __repr__(self) -> str:
        return f"cp.{self.name}"


bool_ = DType("bool", 0, 4, 4, "i32", "<i", "bool")
int32 = DType("int32", 1, 4, 3, "i32", "<i", "int32")
float32 = DType("float32", 2, 4, 1, "f32", "<f", "float32")
float64 = DType("float64", 3, 8, 2, "f64", "<d", "float64")

ALL = (bool_, int32, float32, float64)
BY_NAME = {d.name: d for d in ALL} | {"bool_": bool_, "float": float32, "int": int32}
BY_CODE = {d.code: d for d in ALL}

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def as_dtype(spec: object) -> DType:
    """Accept a DType, a name, a Python type or a NumPy dtype-like."""
    if isinstance(spec, DType):
        return spec
    if spec is bool:
        return bool_
    if spec is int:
        return int32
    if spec is float:
        return float32
    name = getattr(spec, "__name__", None) or str(getattr(spec, "name", spec))
    try:
        return BY_NAME[str(name)]
    except KeyError:
        raise TypeError(
            f"unsupported dtype {spec!r}: copapy computes in bool, int32, float32 and float64"
        ) from None


def promote(a: DType, b: DType) -> DType:
    """Type of a binary operation between two traced values: the higher rank wins.

    int32 with float32 gives float32 (not float64 as NumPy would): values stay in the
    single-precision FPU of microcontrollers; documented in docs/semantics.md.
    """
    return a if a.rank >= b.rank else b


def weak_type(scalar: bool | int | float, other: DType) -> DType:
    """Type a Python scalar takes next to a traced value: it adapts unless it needs more kind."""
    if isinstance(scalar, bool):
        return other
    if isinstance(scalar, int):
        return other if not other.is_bool else int32
    return other if other.is_float else float32


def scalar_type(scalar: bool | int | float) -> DType:
    """Default type of a Python scalar on its own."""
    if isinstance(scalar, bool):
        return bool_
    if isinstance(scalar, int):
        return int32
    return float32
