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
    #: how the result's shape follows from the operands' (graph/build.py, _result_shape)
    shape_rule: str = "elementwise"


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


# Derivative rules: (node, upstream gradient g) -> one gradient per operand (None: no
# gradient, e.g. integer or bool operands). They build nodes through build.apply, imported
# lazily because build imports this registry.


def _a(name: str, *args: Any) -> Any:
    from .build import apply

    return apply(name, *args)


def _g_add(n: Any, g: Any) -> tuple[Any, ...]:
    return g, g


def _g_sub(n: Any, g: Any) -> tuple[Any, ...]:
    return g, _a("neg", g)


def _g_mul(n: Any, g: Any) -> tuple[Any, ...]:
    a, b = n.args
    return _a("mul", g, b), _a("mul", g, a)


def _g_div(n: Any, g: Any) -> tuple[Any, ...]:
    b = n.args[1]
    return _a("div", g, b), _a("neg", _a("div", _a("mul", g, n), b))


def _g_minmax(first_wins: str) -> GradRule:
    """JAX's convention: the gradient goes to the selected operand, half to each on a tie."""

    def rule(n: Any, g: Any) -> tuple[Any, ...]:
        a, b = n.args
        half = _a("mul", g, 0.5)
        ga = _a("where", _a(first_wins, a, b), g, _a("where", _a("eq", a, b), half, 0.0))
        gb = _a("where", _a(first_wins, b, a), g, _a("where", _a("eq", a, b), half, 0.0))
        return ga, gb

    return rule


def _g_pow(n: Any, g: Any) -> tuple[Any, ...]:
    a, b = n.args
    ga = _a("mul", g, _a("mul", b, _a("pow", a, _a("sub", b, 1.0))))
    # d/db a**b = log(a) a**b, taken as 0 where a == 0 (as JAX)
    log_a = _a("where", _a("eq", a, 0.0), 0.0, _a("log", a))
    gb = _a("mul", g, _a("mul", log_a, n))
    return ga, gb


def _g_atan2(n: Any, g: Any) -> tuple[Any, ...]:
    y, x = n.args
    r2 = _a("add", _a("mul", x, x), _a("mul", y, y))
    return _a("div", _a("mul", g, x), r2), _a("neg", _a("div", _a("mul", g, y), r2))


def _g_unary(f: Callable[[Any, Any], Any]) -> GradRule:
    def rule(n: Any, g: Any) -> tuple[Any, ...]:
        return (_a("mul", g, f(n, n.args[0])),)

    return rule


def _one_minus_sq_root(a: Any) -> Any:
    return _a("sqrt", _a("sub", 1.0, _a("mul", a, a)))


def _g_zero(n: Any, g: Any) -> tuple[Any, ...]:
    return tuple(None for _ in n.args)


def _g_where(n: Any, g: Any) -> tuple[Any, ...]:
    c = n.args[0]
    return None, _a("where", c, g, 0.0), _a("where", c, 0.0, g)


def _g_cast(n: Any, g: Any) -> tuple[Any, ...]:
    a = n.args[0]
    if not a.dtype.is_float:
        return (None,)
    from .build import cast

    return (cast(g, a.dtype),)


def _g_mod(n: Any, g: Any) -> tuple[Any, ...]:
    a, b = n.args
    return g, _a("neg", _a("mul", g, _a("floordiv", a, b)))





# arithmetic
_binary("add", "num", "same", lambda np, a, b: a + b, commutative=True, grad=_g_add)
_binary("sub", "num", "same", lambda np, a, b: a - b, grad=_g_sub)
_binary("mul", "num", "same", lambda np, a, b: a * b, commutative=True, grad=_g_mul)
_binary("div", "float", "same", lambda np, a, b: a / b, grad=_g_div)
_binary("floordiv", "num", "same", lambda np, a, b: np.floor_divide(a, b), grad=_g_zero)
_binary("mod", "num", "same", lambda np, a, b: np.remainder(a, b), grad=_g_mod)
_binary("min", "num", "same", lambda np, a, b: np.minimum(a, b), grad=_g_minmax("lt"))
_binary("max", "num", "same", lambda np, a, b: np.maximum(a, b), grad=_g_minmax("gt"))
_binary("pow", "num", "same",
        lambda np, a, b: _int_pow(np, a, b) if a.dtype == np.int32 else np.power(a, b),
        kernel="pow", approx=True, grad=_g_pow)
_binary("atan2", "float", "same", lambda np, a, b: np.arctan2(a, b), kernel="atan2", approx=True,
        grad=_g_atan2)
_unary("neg", "num", "same", lambda np, a: -a, grad=lambda n, g: (_a("neg", g),))
_unary("abs", "num", "same", lambda np, a: np.abs(a), grad=_g_unary(lambda n, a: _a("sign", a)))
_unary("sign", "num", "same", _sign, grad=_g_zero)
_unary("relu", "num", "same", lambda np, a: np.maximum(a, a.dtype.type(0)),
       grad=_g_unary(lambda n, a: _a("where", _a("gt", a, 0.0), 1.0, 0.0)))

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
_ELEMENTARY: list[tuple[str, str, GradRule]] = [
    ("sqrt", "sqrt", _g_unary(lambda n, a: _a("div", 0.5, n))),
    ("sin", "sin", _g_unary(lambda n, a: _a("cos", a))),
    ("cos", "cos", _g_unary(lambda n, a: _a("neg", _a("sin", a)))),
    ("tan", "tan", _g_unary(lambda n, a: _a("add", 1.0, _a("mul", n, n)))),
    ("asin", "arcsin", _g_unary(lambda n, a: _a("div", 1.0, _one_minus_sq_root(a)))),
    ("acos", "arccos", _g_unary(lambda n, a: _a("div", -1.0, _one_minus_sq_root(a)))),
    ("atan", "arctan", _g_unary(lambda n, a: _a("div", 1.0, _a("add", 1.0, _a("mul", a, a))))),
    ("exp", "exp", _g_unary(lambda n, a: n)),
    ("log", "log", _g_unary(lambda n, a: _a("div", 1.0, a))),
    ("tanh", "tanh", _g_unary(lambda n, a: _a("sub", 1.0, _a("mul", n, n)))),
]
for _name, _np, _grad in _ELEMENTARY:
    _approx = _name != "sqrt"
    _unary(_name, "float", "same", (lambda f: lambda np, a: getattr(np, f)(a))(_np),
           kernel=_name if _approx else "", approx=_approx, grad=_grad)
for _name, _np in [("floor", "floor"), ("ceil", "ceil"), ("round", "rint"), ("trunc", "trunc")]:
    _unary(_name, "float", "same", (lambda f: lambda np, a: getattr(np, f)(a))(_np), grad=_g_zero)

# selection: where(cond, a, b); cond is bool, a and b share the result type
register(OpSpec("where", 3, "any", "same", lambda np, c, a, b: np.where(c, a, b), "where",
                grad=_g_where))

# conversions
_unary("cast_f32", "any", "float32", lambda np, a: a.astype(np.float32), "tof32", grad=_g_cast)
_unary("cast_f64", "any", "float64", lambda np, a: a.astype(np.float64), "tof64", grad=_g_cast)
_unary("cast_i32", "any", "int32", lambda np, a: _to_i32(np, a) if a.dtype.kind == "f"
       else a.astype(np.int32), "toi32", grad=_g_zero)
_unary("cast_bool", "any", "bool", lambda np, a: a != 0, "tobool", grad=_g_zero)

# ---- packed arrays ------------------------------------------------------------------------
# Reductions and products use the fixed lane order of graph/lanes.py; views (index, slice,
# reshape) are resolved by the compiler to addresses and compute nothing.


def _lanes() -> Any:
    from . import lanes

    return lanes


def _g_rsum(n: Any, g: Any) -> tuple[Any, ...]:
    from .build import broadcast_to

    return (broadcast_to(g, n.args[0].shape),)


def _g_rminmax(n: Any, g: Any) -> tuple[Any, ...]:
    """JAX's convention: the gradient is shared equally by every element equal to the result."""
    from .build import broadcast_to

    a = n.args[0]
    mask = _a("cast_f32" if a.dtype.name == "float32" else "cast_f64", _a("eq", a, n))
    share = _a("div", g, _a("rsum", mask))
    return (_a("mul", mask, broadcast_to(share, a.shape)),)


def _g_dot(n: Any, g: Any) -> tuple[Any, ...]:
    a, b = n.args
    return _a("mul", g, b), _a("mul", g, a)


def _outer(u: Any, v: Any) -> Any:
    from .build import reshape

    return _a("matmul", reshape(u, (u.shape[0], 1)), reshape(v, (1, v.shape[0])))


def _g_matvec(n: Any, g: Any) -> tuple[Any, ...]:
    m, v = n.args
    return _outer(g, v), _a("vecmat", g, m)


def _g_vecmat(n: Any, g: Any) -> tuple[Any, ...]:
    v, m = n.args
    return _a("matvec", m, g), _outer(v, g)


def _g_matmul(n: Any, g: Any) -> tuple[Any, ...]:
    a, b = n.args
    return _a("matmul", g, _a("transpose", b)), _a("matmul", _a("transpose", a), g)


def _g_transpose(n: Any, g: Any) -> tuple[Any, ...]:
    return (_a("transpose", g),)


def _g_view(n: Any, g: Any) -> tuple[Any, ...]:
    if n.op == "reshape":
        from .build import reshape

        return (reshape(g, n.args[0].shape),)
    from .grad import NotDifferentiableError

    raise NotDifferentiableError(
        "gradients through indexing or slicing a packed array are not supported; "
        "use an unpacked vector (packed=False) to differentiate element by element")


def _g_stack(n: Any, g: Any) -> tuple[Any, ...]:
    from .build import index

    return tuple(index(g, i) for i in range(len(n.args)))


register(OpSpec("rsum", 1, "num", "same", lambda np, a: _lanes().np_reduce(np, a, "sum"),
                "rsum", shape_rule="reduce", grad=_g_rsum))
register(OpSpec("rmin", 1, "num", "same", lambda np, a: _lanes().np_reduce(np, a, "min"),
                "rmin", shape_rule="reduce", grad=_g_rminmax))
register(OpSpec("rmax", 1, "num", "same", lambda np, a: _lanes().np_reduce(np, a, "max"),
                "rmax", shape_rule="reduce", grad=_g_rminmax))
register(OpSpec("dot", 2, "num", "same", lambda np, a, b: _lanes().np_dot(np, a, b), "dot",
                shape_rule="dot", grad=_g_dot))
register(OpSpec("matvec", 2, "num", "same", lambda np, a, b: _lanes().np_matvec(np, a, b),
                "matvec", shape_rule="matvec", grad=_g_matvec))
register(OpSpec("vecmat", 2, "num", "same", lambda np, a, b: _lanes().np_vecmat(np, a, b),
                "vecmat", shape_rule="vecmat", grad=_g_vecmat))
register(OpSpec("matmul", 2, "num", "same", lambda np, a, b: _lanes().np_matmul(np, a, b),
                "matmul", shape_rule="matmul", grad=_g_matmul))
register(OpSpec("transpose", 1, "any", "same", lambda np, a: np.ascontiguousarray(a.T),
                "transpose", shape_rule="transpose", grad=_g_transpose))

# structural nodes: the reference receives the node's attribute first
STRUCTURAL = frozenset({"stack", "index", "slice", "reshape", "fill", "concat"})


def _np_stack(np: Any, shape: Any, *items: Any) -> Any:
    return np.stack([np.asarray(x) for x in items]).reshape(shape)


register(OpSpec("stack", -1, "any", "same", _np_stack, "stack", shape_rule="stack",
                grad=_g_stack))
register(OpSpec("index", 1, "any", "same", lambda np, i, a: np.asarray(a).reshape(-1)[i],
                "index", shape_rule="index", grad=_g_view))
register(OpSpec("slice", 1, "any", "same",
                lambda np, se, a: np.asarray(a).reshape(-1)[se[0]:se[0] + se[1]], "slice",
                shape_rule="slice", grad=_g_view))
register(OpSpec("reshape", 1, "any", "same", lambda np, shape, a: np.asarray(a).reshape(shape),
                "reshape", shape_rule="reshape", grad=_g_view))
def _g_concat(n: Any, g: Any) -> tuple[Any, ...]:
    from .build import slice_

    out, start = [], 0
    for part in n.args:
        out.append(slice_(g, start, part.size))
        start += part.size
    return tuple(out)


def _np_concat(np: Any, shape: Any, *parts: Any) -> Any:
    return np.concatenate([np.ravel(p) for p in parts]).reshape(shape)


register(OpSpec("concat", -1, "any", "same", _np_concat, "concat", shape_rule="stack",
                grad=_g_concat))
register(OpSpec("fill", 1, "any", "same", lambda np, shape, a: np.full(shape, a), "fill",
                shape_rule="fill", grad=lambda n, g: (_a("rsum", g),)))

CASTS = {"float32": "cast_f32", "float64": "cast_f64", "int32": "cast_i32", "bool": "cast_bool"}


# ---- hypot, copysign, log1p, expm1 -----------------------------------------------------------


def _g_hypot(n: Any, g: Any) -> tuple[Any, ...]:
    """(x/h, y/h), taken as 0 where h == 0 (the select keeps the untaken 0/0 out)."""
    zero = _a("eq", n, 0.0)
    return tuple(_a("where", zero, 0.0, _a("div", _a("mul", g, a), n)) for a in n.args)


def _g_copysign(n: Any, g: Any) -> tuple[Any, ...]:
    """d/dx: +1 where the signs of x and y agree, -1 where not; d/dy: 0."""
    a, b = n.args
    return _a("mul", g, _a("mul", _a("copysign", 1.0, a), _a("copysign", 1.0, b))), None


_binary("hypot", "float", "same", lambda np, a, b: np.hypot(a, b), kernel="hypot", approx=True,
        commutative=True, grad=_g_hypot)
# a NaN y counts as positive: the sign of a NaN is hardware-chosen payload (cp_ops.h)
_binary("copysign", "float", "same",
        lambda np, a, b: np.where(np.isnan(b), np.abs(a), np.copysign(a, b)), grad=_g_copysign)
_unary("log1p", "float", "same", lambda np, a: np.log1p(a), kernel="log1p", approx=True,
       grad=_g_unary(lambda n, a: _a("div", 1.0, _a("add", 1.0, a))))
_unary("expm1", "float", "same", lambda np, a: np.expm1(a), kernel="expm1", approx=True,
       grad=_g_unary(lambda n, a: _a("add", n, 1.0)))
