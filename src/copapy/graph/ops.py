"""The operation registry: one row per operation.

A row holds everything about an operation: which operand types it accepts and what it returns
(type rule), its reference semantics on NumPy arrays (used for constant folding of exact
operations and as the test oracle), its derivative rule, and the stencil family implementing
it. Tests enumerate this table, so a new row is tested without touching the tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

Operands = Literal["num", "float", "int", "intbool", "bool", "any"]
Result = Literal["same", "bool", "float32", "float64", "int32"]

#: A NumPy reference: receives the numpy module and operand arrays of the operand dtype.
Reference = Callable[..., Any]
#: A derivative rule: (node, upstream gradient) -> one gradient node (or None) per operand.
GradRule = Callable[[Any, Any], tuple[Any, ...]]


@dataclass(frozen=True)
class OpSpec:
    name: str
    arity: int
    operands: Operands
    result: Result
    reference: Reference
    stencil: str
    commutative: bool = False
    #: folded through the deterministic C kernels (not NumPy) so folded constants equal
    #: what the machine code computes, bit for bit
    kernel: str = ""
    #: reference result may differ from the kernels by a few ulp (the oracle's tolerance)
    approx: bool = False
    grad: GradRule | None = None
    doc: str = ""


REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.name in REGISTRY:
        raise ValueError(f"operation {spec.name} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def _int_pow(np: ModuleType, a: Any, b: Any) -> Any:
    a = np.asarray(a, np.int32)
    b = np.asarray(b, np.int32)
    positive = np.power(a, np.maximum(b, 0)).astype(np.int32)
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(b & 1, -1, 1), 0)).astype(np.int32)
    return np.where(b < 0, neg, positive).astype(np.int32)


def _to_i32(np: ModuleType, a: Any) -> Any:
    a = np.asarray(a)
    clipped = np.clip(np.nan_to_num(a, nan=0.0), -2147483648.0, 2147483647.0)
    out = np.trunc(clipped.astype(np.float64))
    return out.astype(np.int64).clip(-(2**31), 2**31 - 1).astype(np.int32)


def _sign(np: ModuleType, a: Any) -> Any:
    return np.sign(a)


def _binary(name: str, operands: Operands, result: Result, ref: Reference, stencil: str = "",
            **kw: Any) -> OpSpec:
    return register(OpSpec(name, 2, operands, result, ref, stencil or name, **kw))


def _unary(name: str, operands: Operands, result: Result, ref: Reference, stencil: str = "",
           **kw: Any) -> OpSpec:
    return register(OpSpec(name, 1, operands, result, ref, stencil or name, **kw))


# arithmetic
_binary("add", "num", "same", lambda np, a, b: a + b, commutative=True)
_binary("sub", "num", "same", lambda np, a, b: a - b)
_binary("mul", "num", "same", lambda np, a, b: a * b, commutative=True)
_binary("div", "float", "same", lambda np, a, b: a / b)
_binary("floordiv", "num", "same", lambda np, a, b: np.floor_divide(a, b))
_binary("mod", "num", "same", lambda np, a, b: np.remainder(a, b))
_binary("min", "num", "same", lambda np, a, b: np.minimum(a, b))
_binary("max", "num", "same", lambda np, a, b: np.maximum(a, b))
_binary("pow", "num", "same",
        lambda np, a, b: _int_pow(np, a, b) if a.dtype == np.int32 else np.power(a, b),
        kernel="pow", approx=True)
_binary("atan2", "float", "same", lambda np, a, b: np.arctan2(a, b), kernel="atan2", approx=True)
_unary("neg", "num", "same", lambda np, a: -a)
_unary("abs", "num", "same", lambda np, a: np.abs(a))
_unary("sign", "num", "same", _sign)
_unary("relu", "num", "same", lambda np, a: np.maximum(a, a.dtype.type(0)))

# comparisons
_binary("lt", "num", "bool", lambda np, a, b: a < b)
_binary("le", "num", "bool", lambda np, a, b: a <= b)
_binary("gt", "num", "bool", lambda np, a, b: a > b)
_binary("ge", "num", "bool", lambda np, a, b: a >= b)
_binary("eq", "any", "bool", lambda np, a, b: a == b, commutative=True)
_binary("ne", "any", "bool", lambda np, a, b: a != b, commutative=True)

# bitwise (int32) and logical (bool) operations share the int32 stencils
_binary("and", "intbool", "same", lambda np, a, b: a & b, commutative=True)
_binary("or", "intbool", "same", lambda np, a, b: a | b, commutative=True)
_binary("xor", "intbool", "same", lambda np, a, b: a ^ b, commutative=True)
_unary("invert", "int", "same", lambda np, a: ~a)
_unary("lnot", "bool", "same", lambda np, a: ~a)
_binary("shl", "int", "same", lambda np, a, b: np.left_shift(a, b))
_binary("shr", "int", "same", lambda np, a, b: np.right_shift(a, b))

# elementary functions, computed by the kernels in stencils/math
for _name, _np in [("sqrt", "sqrt"), ("sin", "sin"), ("cos", "cos"), ("tan", "tan"),
                   ("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"), ("exp", "exp"),
                   ("log", "log"), ("tanh", "tanh")]:
    _approx = _name != "sqrt"
    _unary(_name, "float", "same", (lambda f: lambda np, a: getattr(np, f)(a))(_np),
           kernel=_name if _approx else "", approx=_approx)
for _name, _np in [("floor", "floor"), ("ceil", "ceil"), ("round", "rint"), ("trunc", "trunc")]:
    _unary(_name, "float", "same", (lambda f: lambda np, a: getattr(np, f)(a))(_np))

# selection: where(cond, a, b); cond is bool, a and b share the result type
register(OpSpec("where", 3, "any", "same", lambda np, c, a, b: np.where(c, a, b), "where"))

# conversions
_unary("cast_f32", "any", "float32", lambda np, a: a.astype(np.float32), "tof32")
_unary("cast_f64", "any", "float64", lambda np, a: a.astype(np.float64), "tof64")
_unary("cast_i32", "any", "int32", lambda np, a: _to_i32(np, a) if a.dtype.kind == "f"
       else a.astype(np.int32), "toi32")
_unary("cast_bool", "any", "bool", lambda np, a: a != 0, "tobool")

CASTS = {"float32": "cast_f32", "float64": "cast_f64", "int32": "cast_i32", "bool": "cast_bool"}
