"""The operation registry: one row per operation, data only.

A row holds what copapy knows about an operation: which operand types it accepts and what it
returns (type rule), its reference semantics on NumPy arrays (used for constant folding of
exact operations and as the test oracle; by default the NumPy ufunc named in ``numpy``), the
stencil family implementing it, and how users reach it: the public function ``cp.<api>``,
the Python operator ``__<operator>__`` of values and arrays, and the NumPy ufunc that
dispatches to it. ``tools/gen_api.py`` writes the public functions and operators from these
rows; derivative rules live beside the differentiation code (graph/grad_rules.py, keyed by
the row's name). Tests enumerate this table, so a new row is tested without touching them.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal, NamedTuple

from . import lanes

Operands = Literal["num", "float", "int", "intbool", "bool", "any"]
Result = Literal["same", "bool", "float32", "float64", "int32"]

#: A NumPy reference: receives the numpy module and operand arrays of the operand dtype.
Reference = Callable[..., Any]


class OpSpec(NamedTuple):
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
    doc: str = ""
    #: how the result's shape follows from the operands' (graph/build.py, _result_shape)
    shape_rule: str = "elementwise"
    #: the public function cp.<api> ("" for none)
    api: str = ""
    #: the dtype the public function converts its operands to first (logical_and: bool)
    api_cast: str = ""
    #: the Python operator of values and arrays: "add" is __add__ (and __radd__ for binary
    #: operations other than comparisons)
    operator: str = ""
    #: the NumPy ufunc that computes it (np.<numpy> on a traced value dispatches here)
    numpy: str = ""


REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.name in REGISTRY:
        raise ValueError(f"operation {spec.name} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def _ufunc(name: str) -> Reference:
    return lambda np, *args: getattr(np, name)(*args)


def _row(name: str, arity: int, operands: Operands, result: Result,
         reference: Reference | None = None, stencil: str = "", **kw: Any) -> OpSpec:
    ufunc = kw.get("numpy", "")
    if reference is None:
        assert ufunc, f"{name}: a row needs a reference or a NumPy ufunc"
        reference = _ufunc(ufunc)
    return register(OpSpec(name, arity, operands, result, reference, stencil or name, **kw))


def _int_pow(np: ModuleType, a: Any, b: Any) -> Any:
    a = np.asarray(a, np.int32)
    b = np.asarray(b, np.int32)
    positive = np.power(a, np.maximum(b, 0)).astype(np.int32)
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(b & 1, -1, 1), 0)).astype(np.int32)
    return np.where(b < 0, neg, positive).astype(np.int32)


def _exact_in_float64(ufunc: str) -> Reference:
    """``ufunc`` through float64, rounded back: exact for these (an integral float32 is a
    float32; float64's 53 bits round sqrt to float32 correctly), and independent of NumPy's
    float32 loops, which on armv7 flush subnormals in ceil, floor and sign (ceil(1e-40) gave
    0.0) and take sqrt from NEON's estimate (sqrt(384) was 1 ulp low) in NumPy 1.24."""
    return lambda np, a: getattr(np, ufunc)(np.asarray(a, np.float64)).astype(a.dtype)


def _to_i32(np: ModuleType, a: Any) -> Any:
    a = np.asarray(a)
    clipped = np.clip(np.nan_to_num(a, nan=0.0), -2147483648.0, 2147483647.0)
    out = np.trunc(clipped.astype(np.float64))
    return out.astype(np.int64).clip(-(2**31), 2**31 - 1).astype(np.int32)


# arithmetic
_row("add", 2, "num", "same", commutative=True, operator="add", numpy="add")
_row("sub", 2, "num", "same", operator="sub", numpy="subtract")
_row("mul", 2, "num", "same", commutative=True, operator="mul", numpy="multiply")
_row("div", 2, "float", "same", operator="truediv", numpy="divide")
_row("floordiv", 2, "num", "same", operator="floordiv", numpy="floor_divide")
_row("mod", 2, "num", "same", operator="mod", numpy="remainder")
# min and max say which of two equal values they give (+0 and -0: b, as the machine code);
# numpy.minimum/maximum leave it to the platform (NumPy 1.24 on ARM gives a for min(0.0, -0.0))
_row("min", 2, "num", "same", lanes.np_min, api="min", numpy="minimum",
     doc="Smaller of a and b; NaN if either is NaN (as numpy.minimum); of equal ones "
         "(-0.0, 0.0) b.")
_row("max", 2, "num", "same", lanes.np_max, api="max", numpy="maximum",
     doc="Larger of a and b; NaN if either is NaN (as numpy.maximum); of equal ones "
         "(0.0, -0.0) b.")
_row("pow", 2, "num", "same",
     lambda np, a, b: _int_pow(np, a, b) if a.dtype == np.int32 else np.power(a, b),
     kernel="pow", approx=True, api="pow", operator="pow", numpy="power",
     doc="a to the power b (C99 pow for floats; int32 powers wrap, as NumPy's).")
_row("atan2", 2, "float", "same", kernel="atan2", approx=True, api="atan2", numpy="arctan2",
     doc="Angle of the point (x, y), quadrant-correct, as C99 atan2.")
_row("neg", 1, "num", "same", operator="neg", numpy="negative")
_row("abs", 1, "num", "same", api="abs", operator="abs", numpy="absolute",
     doc="Absolute value.")
_row("sign", 1, "num", "same", _exact_in_float64("sign"), api="sign", numpy="sign",
     doc="-1, 0 or 1 by the sign of x (NaN stays NaN).")
_row("relu", 1, "num", "same", lambda np, a: lanes.np_max(np, a, a.dtype.type(0)), api="relu",
     doc="max(x, 0).")

# comparisons
_row("lt", 2, "num", "bool", lanes.np_compare("less"), operator="lt",
     numpy="less")
_row("le", 2, "num", "bool", lanes.np_compare("less_equal"), operator="le",
     numpy="less_equal")
_row("gt", 2, "num", "bool", lanes.np_compare("greater"), operator="gt",
     numpy="greater")
_row("ge", 2, "num", "bool", lanes.np_compare("greater_equal"), operator="ge",
     numpy="greater_equal")
_row("eq", 2, "any", "bool", lanes.np_compare("equal"), commutative=True,
     operator="eq", numpy="equal")
_row("ne", 2, "any", "bool", lanes.np_compare("not_equal"), commutative=True,
     operator="ne", numpy="not_equal")

# bitwise (int32) and logical (bool) operations share the int32 stencils
_row("and", 2, "intbool", "same", commutative=True, operator="and", numpy="bitwise_and",
     api="logical_and", api_cast="bool",
     doc="Element-wise logical and; numbers count as true when non-zero.")
_row("or", 2, "intbool", "same", commutative=True, operator="or", numpy="bitwise_or",
     api="logical_or", api_cast="bool",
     doc="Element-wise logical or; numbers count as true when non-zero.")
_row("xor", 2, "intbool", "same", commutative=True, operator="xor", numpy="bitwise_xor",
     api="logical_xor", api_cast="bool",
     doc="Element-wise logical exclusive or; numbers count as true when non-zero.")
_row("invert", 1, "int", "same", operator="invert", numpy="invert")
_row("lnot", 1, "bool", "same", lambda np, a: ~a, operator="invert", api="logical_not",
     api_cast="bool", doc="Element-wise logical not; numbers count as true when non-zero.")
_row("shl", 2, "int", "same", operator="lshift", numpy="left_shift")
_row("shr", 2, "int", "same", operator="rshift", numpy="right_shift")

# elementary functions, computed by the kernels in stencils/math
for _name, _np, _doc in [
    ("sqrt", "sqrt", "Square root (IEEE, correctly rounded)."),
    ("sin", "sin", "Sine (radians)."),
    ("cos", "cos", "Cosine (radians)."),
    ("tan", "tan", "Tangent (radians)."),
    ("asin", "arcsin", "Arc sine, in [-pi/2, pi/2]; NaN outside [-1, 1]."),
    ("acos", "arccos", "Arc cosine, in [0, pi]; NaN outside [-1, 1]."),
    ("atan", "arctan", "Arc tangent, in (-pi/2, pi/2)."),
    ("exp", "exp", "e to the power x."),
    ("log", "log", "Natural logarithm; -inf at 0, NaN below."),
    ("tanh", "tanh", "Hyperbolic tangent."),
]:
    _approx = _name != "sqrt"
    _row(_name, 1, "float", "same", None if _approx else _exact_in_float64(_np),
         kernel=_name if _approx else "", approx=_approx, api=_name, numpy=_np, doc=_doc)
for _name, _np, _doc in [("floor", "floor", "Largest integer value <= x."),
                         ("ceil", "ceil", "Smallest integer value >= x."),
                         ("round", "rint", "Nearest integer value, ties to even (as numpy)."),
                         ("trunc", "trunc", "Integer value toward zero.")]:
    _row(_name, 1, "float", "same", _exact_in_float64(_np), api=_name, numpy=_np, doc=_doc)

# selection: where(cond, a, b); cond is bool, a and b share the result type
_row("where", 3, "any", "same", lambda np, c, a, b: np.where(c, a, b), api="where",
     doc="a where cond is true, else b: a select, both sides computed, nothing leaks.")

# conversions
_row("cast_f32", 1, "any", "float32", lambda np, a: a.astype(np.float32), "tof32")
_row("cast_f64", 1, "any", "float64", lambda np, a: a.astype(np.float64), "tof64")
_row("cast_i32", 1, "any", "int32",
     lambda np, a: _to_i32(np, a) if a.dtype.kind == "f" else a.astype(np.int32), "toi32")
_row("cast_bool", 1, "any", "bool", lambda np, a: np.not_equal(lanes.exact(np, a), 0), "tobool")

# ---- packed arrays ------------------------------------------------------------------------
# Reductions and products use the fixed lane order of graph/lanes.py; views (index, slice,
# reshape) are resolved by the compiler to addresses and compute nothing.

_row("rsum", 1, "num", "same", lambda np, a: lanes.np_reduce(np, a, "sum"), shape_rule="reduce")
_row("rmin", 1, "num", "same", lambda np, a: lanes.np_reduce(np, a, "min"), shape_rule="reduce")
_row("rmax", 1, "num", "same", lambda np, a: lanes.np_reduce(np, a, "max"), shape_rule="reduce")
_row("dot", 2, "num", "same", lambda np, a, b: lanes.np_dot(np, a, b), shape_rule="dot")
_row("matvec", 2, "num", "same", lambda np, a, b: lanes.np_matvec(np, a, b), shape_rule="matvec")
_row("vecmat", 2, "num", "same", lambda np, a, b: lanes.np_vecmat(np, a, b), shape_rule="vecmat")
_row("matmul", 2, "num", "same", lambda np, a, b: lanes.np_matmul(np, a, b), shape_rule="matmul")
_row("transpose", 1, "any", "same", lambda np, a: np.ascontiguousarray(a.T),
     shape_rule="transpose")

# structural nodes: the reference receives the node's attribute first
STRUCTURAL = frozenset({"stack", "index", "slice", "reshape", "fill", "concat", "sgather",
                        "sscatter", "ngather", "nscatter"})


def _np_stack(np: Any, shape: Any, *items: Any) -> Any:
    return np.stack([np.asarray(x) for x in items]).reshape(shape)


def _np_concat(np: Any, shape: Any, *parts: Any) -> Any:
    return np.concatenate([np.ravel(p) for p in parts]).reshape(shape)


_row("stack", -1, "any", "same", _np_stack, shape_rule="stack")
_row("index", 1, "any", "same", lambda np, i, a: np.asarray(a).reshape(-1)[i],
     shape_rule="index")
_row("slice", 1, "any", "same", lambda np, se, a: np.asarray(a).reshape(-1)[se[0]:se[0] + se[1]],
     shape_rule="slice")
_row("reshape", 1, "any", "same", lambda np, shape, a: np.asarray(a).reshape(shape),
     shape_rule="reshape")
_row("concat", -1, "any", "same", _np_concat, shape_rule="stack")
_row("fill", 1, "any", "same", lambda np, shape, a: np.full(shape, a), shape_rule="fill")


def _np_sgather(np: Any, attr: Any, a: Any) -> Any:
    start, step, count = attr
    return np.asarray(a).reshape(-1)[start + step * np.arange(count)]


def _np_sscatter(np: Any, attr: Any, a: Any) -> Any:
    start, step, size = attr
    flat = np.asarray(a).reshape(-1)
    out = np.zeros(size, flat.dtype)
    out[start + step * np.arange(flat.size)] = flat
    return out


# strided views (issue 31): x[start::step] as a copy, attr (start, step, count); its adjoint
# puts a vector at every step-th place of zeros, attr (start, step, size of the result)
_row("sgather", 1, "any", "same", _np_sgather, shape_rule="strided")
_row("sscatter", 1, "any", "same", _np_sscatter, shape_rule="strided")



def level_indices(np: Any, counts: Any, steps: Any) -> Any:
    """The flat indices an ``ngather`` reads, row-major over its levels: base + Σ i·step,
    base = Σ (count - 1)·(-step) over the negative steps (the first index of the block is 0)."""
    base = sum((c - 1) * -s for c, s in zip(counts, steps, strict=True) if s < 0)
    idx = np.full((), base, np.int64)
    for c, s in zip(counts, steps, strict=True):
        idx = idx[..., None] + s * np.arange(c, dtype=np.int64)
    return idx.reshape(-1)


def _np_ngather(np: Any, attr: Any, a: Any) -> Any:
    counts, steps, _ = attr
    return np.asarray(a).reshape(-1)[level_indices(np, counts, steps)]


def _np_nscatter(np: Any, attr: Any, a: Any) -> Any:
    counts, steps, size = attr
    flat = np.asarray(a).reshape(-1)
    out = np.zeros(size, flat.dtype)
    out[level_indices(np, counts, steps)] = flat
    return out


# strided views of N-D arrays (issue 31): up to three levels (count, step) over the bounding
# block of the view (its operand), attr (counts, steps, size of the result); the adjoint puts
# the vector back into zeros of the block's size
_row("ngather", 1, "any", "same", _np_ngather, shape_rule="strided")
_row("nscatter", 1, "any", "same", _np_nscatter, shape_rule="strided")


def _rows(np: Any, a: Any) -> Any:
    a = np.asarray(a)
    return a.reshape(-1, a.shape[-1])


def _np_pgather(np: Any, p: Any, a: Any) -> Any:
    return np.take_along_axis(_rows(np, a), _rows(np, p), axis=-1).reshape(np.shape(a))


def _np_pscatter(np: Any, p: Any, a: Any) -> Any:
    out = np.zeros_like(_rows(np, a))
    np.put_along_axis(out, _rows(np, p), _rows(np, a), axis=-1)
    return out.reshape(np.shape(a))


# sorting along the last axis (issue 31): argsort's stable order (NaNs last, -0.0 equal to
# 0.0, as numpy.argsort(kind="stable")), the gather of a permutation p, pgather(p, a)[i] =
# a[p[i]] per row, and its adjoint pscatter(p, a)[p[i]] = a[i]
_row("argsort", 1, "num", "int32",
     lambda np, a: np.argsort(a, axis=-1, kind="stable").astype(np.int32), shape_rule="rows")
_row("pgather", 2, "any", "same", _np_pgather, shape_rule="rows")
_row("pscatter", 2, "any", "same", _np_pscatter, shape_rule="rows")

CASTS = {"float32": "cast_f32", "float64": "cast_f64", "int32": "cast_i32", "bool": "cast_bool"}


# ---- hypot, copysign, log1p, expm1 -----------------------------------------------------------
_row("hypot", 2, "float", "same", kernel="hypot", approx=True, commutative=True, api="hypot",
     numpy="hypot", doc="sqrt(a*a + b*b), no overflow or underflow in between (C99 "
                        "hypot: hypot(inf, nan) = inf).")
# a NaN y counts as positive: the sign of a NaN is hardware-chosen payload (cp_ops.h)
_row("copysign", 2, "float", "same",
     lambda np, a, b: np.where(np.isnan(b), np.abs(a), np.copysign(a, b)), api="copysign",
     numpy="copysign", doc="|a| with the sign of b; a NaN b counts as positive (NaN signs "
                           "differ between CPUs).")
_row("log1p", 1, "float", "same", kernel="log1p", approx=True, api="log1p", numpy="log1p",
     doc="log(1 + x), accurate near 0.")
_row("expm1", 1, "float", "same", kernel="expm1", approx=True, api="expm1", numpy="expm1",
     doc="exp(x) - 1, accurate near 0.")
