"""Element types and their promotion rules (documented in docs/semantics.md)."""

from __future__ import annotations

import math
import operator
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._contract import DTYPE_PYTHON
from ._contract import DType as Code

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

_F32_INF_THRESHOLD = float.fromhex("0x1.ffffffp127")  # halfway between FLT_MAX and 2**128


def saturate_f32(value: float) -> float:
    """``value`` with everything float32 rounds to infinity made infinite (IEEE 754
    round-to-nearest, as the runner's to_f32 does); NaN stays NaN. struct.pack("<f") of the
    result never raises OverflowError."""
    if value >= _F32_INF_THRESHOLD:
        return math.inf
    if value <= -_F32_INF_THRESHOLD:
        return -math.inf
    return value


@dataclass(frozen=True, eq=False)
class SlotType:
    """An image dtype code (docs/image.md: ports, I/O bindings, ``Program.read/write``) and how
    a value of it is stored in the data region. ``encode``/``decode`` behave like the native
    runner's ``Program.write``/``read``, so every backend converts values the same way."""

    code: int
    name: str
    struct: struct.Struct
    kind: str  # "f" float, "i" integer, "b" bool (int32 0/1)
    lo: int = 0
    hi: int = 0

    @property
    def size(self) -> int:
        return self.struct.size

    def encode(self, value: float | int | bool) -> bytes:
        """The slot bytes of a value: floats round (float32 overflows to +-inf), bool is its
        truth value as 0/1, integers must be in range (OverflowError otherwise)."""
        if self.kind == "f":
            x = float(value)
            return self.struct.pack(saturate_f32(x) if self.code == Code.F32 else x)
        if self.kind == "b":
            return self.struct.pack(1 if value else 0)
        if isinstance(value, float):
            raise TypeError(f"a {self.name} slot takes an int, not the float {value!r}")
        v = operator.index(value)
        if not self.lo <= v <= self.hi:
            raise OverflowError(f"{value!r} is out of {self.name} range [{self.lo}, {self.hi}]")
        return self.struct.pack(v)

    def decode(self, buffer: bytes | bytearray | memoryview, offset: int = 0
               ) -> float | int | bool:
        (value,) = self.struct.unpack_from(buffer, offset)
        if self.kind == "b":
            return bool(value != 0)
        result: float | int = value
        return result


def slot_type(code: int) -> SlotType:
    """The SlotType of an image dtype code (ValueError, like the native runner, if unknown)."""
    try:
        return SLOT_TYPES[code]
    except KeyError:
        known = ", ".join(f"{int(c)} {n}" for c, n in DTYPE_PYTHON.items())
        raise ValueError(f"dtype {code} is unknown: use {known}") from None


#: codes and names are contract.h's CP_DTYPE_TABLE (as plain ints: codes go into cache keys);
#: how each is stored is Python's own
_F32, _F64, _I32, _BOOL, _U8, _I8 = (int(c) for c in (Code.F32, Code.F64, Code.I32, Code.BOOL,
                                                     Code.U8, Code.I8))
SLOT_TYPES = {t.code: t for t in (
    SlotType(_F32, DTYPE_PYTHON[Code.F32], struct.Struct("<f"), "f"),
    SlotType(_F64, DTYPE_PYTHON[Code.F64], struct.Struct("<d"), "f"),
    SlotType(_I32, DTYPE_PYTHON[Code.I32], struct.Struct("<i"), "i", -(2**31), 2**31 - 1),
    SlotType(_BOOL, DTYPE_PYTHON[Code.BOOL], struct.Struct("<i"), "b"),
    SlotType(_U8, DTYPE_PYTHON[Code.U8], struct.Struct("<B"), "i", 0, 255),
    SlotType(_I8, DTYPE_PYTHON[Code.I8], struct.Struct("<b"), "i", -128, 127),
)}


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

    @property
    def slot(self) -> SlotType:
        return SLOT_TYPES[self.code]

    def pack(self, value: float | int | bool) -> bytes:
        """The slot bytes of a Python value already converted to this type; a float that
        float32 rounds to infinity is infinite (as NumPy's float32 conversion and
        ``SlotType.encode``: a constant 1e40 next to a float32 value)."""
        pack = SLOT_TYPES[self.code].struct.pack  # (not the properties: a node is built per call)
        if self.rank == 0:
            return pack(1 if value else 0)
        if self.code == Code.F32:
            return pack(saturate_f32(value))
        return pack(value)

    def unpack(self, raw: bytes) -> float | int | bool:
        """The value of one element from its little-endian bytes."""
        return SLOT_TYPES[self.code].decode(raw)

    def __repr__(self) -> str:
        return f"cp.{self.name}"

    def __eq__(self, other: object) -> bool:
        """Identity, and NumPy's spellings of this type (``x.dtype == np.float32`` is True for a
        float32 value, as for a NumPy array; it was False)."""
        if other is self or isinstance(other, DType):
            return other is self
        try:
            return as_dtype(other) is self
        except TypeError:
            return False

    __hash__ = object.__hash__


bool_ = DType("bool", 0, 4, _BOOL, "i32", "<i", "bool")
int32 = DType("int32", 1, 4, _I32, "i32", "<i", "int32")
float32 = DType("float32", 2, 4, _F32, "f32", "<f", "float32")
float64 = DType("float64", 3, 8, _F64, "f64", "<d", "float64")

ALL = (bool_, int32, float32, float64)
BY_NAME = {d.name: d for d in ALL} | {"bool_": bool_, "float": float32, "int": int32}
BY_CODE = {d.code: d for d in ALL}

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def storage_array(values: Any, kind: DType) -> Any:
    """``values`` (a NumPy array or anything ``np.asarray`` takes) as the C-contiguous array of
    little-endian elements ``kind`` slots hold (bool as int32 0/1). Nothing is silently
    changed, as writing one number checks: a float that is not an integer (or not finite) into
    int32 raises TypeError, an integer outside int32 OverflowError, a number other than 0 and
    1 into bool TypeError; floats round to the float kind as any float conversion does."""
    arr = np.asarray(values)
    src = arr.dtype.kind
    if src not in "biuf":
        raise TypeError(f"a {kind.name} array holds numbers, not elements of NumPy dtype "
                        f"{arr.dtype}")
    if kind.is_float:
        with np.errstate(over="ignore"):  # beyond float32: +-inf, as one number's write gives
            return np.ascontiguousarray(arr, dtype=kind.numpy)
    if kind.is_bool:
        if src != "b" and not ((arr == 0) | (arr == 1)).all():
            bad = arr[(arr != 0) & (arr != 1)].reshape(-1)[0]
            raise TypeError(f"{bad.item()!r} into a bool array: pass True or False")
        return np.ascontiguousarray(arr, dtype="<i4")
    if src == "f":
        with np.errstate(invalid="ignore"):
            integral = np.isfinite(arr) & (np.mod(arr, 1) == 0)
        if not integral.all():
            bad = arr[~integral].reshape(-1)[0].item()
            raise TypeError(f"{bad!r} would be truncated in an int32 array; pass integers")
    if arr.size and (src == "f" or arr.dtype.itemsize > 4
                     or (src == "u" and arr.dtype.itemsize == 4)):
        lo, hi = arr.min(), arr.max()
        if lo < INT32_MIN or hi > INT32_MAX:
            bad = lo if lo < INT32_MIN else hi
            raise OverflowError(f"{bad.item()!r} does not fit in an int32 array")
    return np.ascontiguousarray(arr, dtype="<i4")


def numpy_type(kind: DType) -> Any:
    """The NumPy element type read values have: bool for bool, else the dtype's own."""
    return bool if kind.is_bool else kind.numpy


def from_storage(raw: bytes, kind: DType, shape: tuple[int, ...] | None = None) -> Any:
    """The elements slots of ``kind`` hold (``storage_array``'s inverse) as a NumPy array
    the caller owns: bool from int32 0/1, little-endian in any case; ``shape`` or 1-D."""
    out = np.frombuffer(raw, dtype="<i4" if kind.is_bool else kind.numpy)
    out = out.astype(bool) if kind.is_bool else out.copy()
    return out if shape is None else out.reshape(shape)


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
    found = BY_NAME.get(str(name))
    if found is None and isinstance(spec, str):  # NumPy's spellings: "f4", "<f8", "i4", "?"
        try:
            found = BY_NAME.get(np.dtype(spec).name)
        except TypeError:
            pass
    if found is None:
        raise TypeError(
            f"unsupported dtype {spec!r}: copapy computes in bool, int32, float32 and float64"
        )
    return found


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
