"""The METADATA section of a saved program (a JSON object, docs/image.md): its schema, checked
in one place when a program is loaded, so that a file whose CRC holds but whose metadata was
written by something else is one error naming the field, never a traceback further on.

Every top-level field is optional (a reader ignores fields it does not know); the records of
``arrays`` need all of theirs:

    compiler, stencil_table   str
    ops, stencils             int >= 0
    tasks                     [str]: the task names, in task order
    arrays                    [{"name": str, "shape": [int >= 1], "dtype": "float32"|...}]:
                              the array ports, each one packed port ``name`` or one port per
                              element ``name[k]`` (row-major)
    ranges                    [{"port": str, "lo": number|null, "hi": number|null,
                              "nan": bool}]: the values a port can hold for inputs in their
                              declared ranges (the range analysis, docs/guide/concepts/
                              ranges.md); a null bound is unbounded on that side
    computed                  [str]: the output ports that hold no value until their task
                              first publishes (the end of its first period): a sweep's rows
                              before then are "not computed" (NaN); an older file without
                              it: every port holds its initial data from the start
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .dtypes import ALL, DType

#: the most elements a list of the metadata may have, and characters a string
MAX_ITEMS = 1 << 16
MAX_TEXT = 1024
#: the most dimensions of an array port, and elements of one
MAX_DIMS = 8
MAX_ELEMENTS = 1 << 31
DTYPES = {d.name: d for d in ALL}


class MetadataError(ValueError):
    """A metadata field does not have the form the schema gives (the message names it)."""


@dataclass(frozen=True)
class ArraySpec:
    """An array port as the metadata describes it (its ports are in the PORTS section)."""

    name: str
    shape: tuple[int, ...]
    dtype: DType

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype.name}


@dataclass(frozen=True)
class RangeSpec:
    """A port's value range as the metadata records it (None: unbounded on that side)."""

    port: str
    lo: float | None
    hi: float | None
    nan: bool = False

    def to_json(self) -> dict[str, object]:
        return {"port": self.port, "lo": self.lo, "hi": self.hi, "nan": self.nan}

    def __str__(self) -> str:
        lo = "-inf" if self.lo is None else f"{self.lo:.9g}"
        hi = "inf" if self.hi is None else f"{self.hi:.9g}"
        unbounded = " (unbounded)" if self.lo is None or self.hi is None else ""
        return f"[{lo}, {hi}]" + (" or NaN" if self.nan else "") + unbounded


@dataclass(frozen=True)
class Metadata:
    compiler: str = "?"
    stencil_table: str = "?"
    ops: int = 0
    stencils: int = 0
    tasks: tuple[str, ...] = ()
    arrays: tuple[ArraySpec, ...] = ()
    ranges: tuple[RangeSpec, ...] = ()
    computed: tuple[str, ...] = ()


Check = Callable[[Any, str], Any]


def _shown(x: Any) -> str:
    """``x`` in an error message: short, whatever it is (a list may nest a thousand deep)."""
    if isinstance(x, list):
        return f"a list of {len(x)} items"
    if isinstance(x, dict):
        return f"an object with {len(x)} keys"
    if isinstance(x, int) and x.bit_length() > 128:  # (str() refuses 4300 digits and more)
        return f"an integer of {x.bit_length()} bits"
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(where: str, expected: str, x: Any) -> MetadataError:
    return MetadataError(f"{where}: expected {expected}, got {_shown(x)}")


def text(x: Any, where: str) -> str:
    """A printable string (what ``copapy info`` prints and port names are)."""
    if not isinstance(x, str) or len(x) > MAX_TEXT:
        raise _fail(where, f"a string of at most {MAX_TEXT} characters", x)
    try:
        x.encode()
    except UnicodeEncodeError:
        raise _fail(where, "valid Unicode (no lone surrogates)", x) from None
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in x):
        raise _fail(where, "a string without control characters", x)
    return x


def count(x: Any, where: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 2**63:
        raise _fail(where, "an integer in 0..2**63-1", x)
    return x


def shape(x: Any, where: str) -> tuple[int, ...]:
    if (not isinstance(x, list) or not 1 <= len(x) <= MAX_DIMS
            or any(isinstance(d, bool) or not isinstance(d, int) or not 1 <= d < MAX_ELEMENTS
                   for d in x)):
        raise _fail(where, f"a list of 1 to {MAX_DIMS} ints >= 1", x)
    if math.prod(x) >= MAX_ELEMENTS:
        raise MetadataError(f"{where}: {x} has more than {MAX_ELEMENTS - 1} elements")
    return tuple(x)


def bound(x: Any, where: str) -> float | None:
    """A finite number, or null (unbounded)."""
    if x is None:
        return None
    try:
        value = float(x) if isinstance(x, int | float) and not isinstance(x, bool) else math.nan
    except OverflowError:  # an int beyond the float range
        value = math.nan
    if not math.isfinite(value):
        raise _fail(where, "a finite number or null", x)
    return value


def flag(x: Any, where: str) -> bool:
    if not isinstance(x, bool):
        raise _fail(where, "true or false", x)
    return x


def dtype(x: Any, where: str) -> DType:
    if not isinstance(x, str) or x not in DTYPES:
        raise _fail(where, f"one of {', '.join(DTYPES)}", x)
    return DTYPES[x]


def list_of(item: Check) -> Check:
    def check(x: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(x, list) or len(x) > MAX_ITEMS:
            raise _fail(where, f"a list of at most {MAX_ITEMS} items", x)
        return tuple(item(v, f"{where}[{k}]") for k, v in enumerate(x))
    return check


def record(fields: Mapping[str, Check], required: bool = True) -> Check:
    """An object with ``fields`` (all of them, unless not ``required``); others are ignored."""
    def check(x: Any, where: str) -> dict[str, Any]:
        if not isinstance(x, dict):
            raise _fail(where or "metadata", "a JSON object", x)
        prefix = f"{where}." if where else ""
        missing = [k for k in fields if k not in x]
        if required and missing:
            raise MetadataError(f"{prefix}{missing[0]}: missing")
        return {k: c(x[k], prefix + k) for k, c in fields.items() if k in x}
    return check


ARRAY = record({"name": text, "shape": shape, "dtype": dtype})
RANGE = record({"port": text, "lo": bound, "hi": bound, "nan": flag})
SCHEMA = record({"compiler": text, "stencil_table": text, "ops": count, "stencils": count,
                 "tasks": list_of(text), "arrays": list_of(ARRAY), "ranges": list_of(RANGE),
                 "computed": list_of(text)},
                required=False)


def parse(raw: Any) -> Metadata:
    """The metadata of a saved program, or MetadataError naming the first bad field."""
    fields = SCHEMA(raw, "")
    fields["arrays"] = tuple(ArraySpec(**a) for a in fields.get("arrays", ()))
    fields["ranges"] = tuple(RangeSpec(**r) for r in fields.get("ranges", ()))
    return Metadata(**fields)
