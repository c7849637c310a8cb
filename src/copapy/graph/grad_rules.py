"""Derivative rules, keyed by registry row name: (node, upstream gradient g, need) -> one
gradient per operand (None: no gradient, e.g. for integer or bool operands). ``need[i]`` says
whether operand i depends on a value being differentiated for; a rule builds nothing for the
others (a constant operand's gradient would be thrown away).

They build nodes through build.apply, so the gradient is a graph like any other. An operation
missing here has no gradient; tests/test_grad.py checks that every float operation of the
registry has a rule or is listed in ``ZERO_GRADIENT``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from .build import apply as _a
from .build import (
    broadcast_to,
    cast,
    concat,
    index,
    make,
    reshape,
    scatter,
    slice_,
    strided,
    strided_attr,
)
from .levels import level_attr, regather
from .levels import scatter as level_scatter
from .node import Node, const
from .ops import REGISTRY

Need = tuple[bool, ...]
GradRule = Callable[[Node, Node, Need], tuple[Node | None, ...]]


def _g_add(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return g, g


def _g_sub(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return g, _a("neg", g) if need[1] else None


def _g_mul(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    a, b = n.args
    return (_a("mul", g, b) if need[0] else None), (_a("mul", g, a) if need[1] else None)


def _g_div(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    b = n.args[1]
    return ((_a("div", g, b) if need[0] else None),
            (_a("neg", _a("div", _a("mul", g, n), b)) if need[1] else None))


def _tied(n: Node) -> Node:
    """How many operands of the nest of n's operation (min or max) under n equal n, as a
    float: an operand equals n only if its own nest's tied count does, so each node's count
    is built once from its operands' (a nest of k nodes gives O(k) nodes)."""
    kind = "cast_f32" if n.dtype.name == "float32" else "cast_f64"
    order: list[Node] = []
    todo = [n]
    while todo:  # the nested nodes without a count yet, users before operands
        x = todo.pop()
        if x.op == n.op and _known(x) is None:
            order.append(x)
            todo.extend(x.args)
    made: list[Node] = []  # the counts alive until their users hold them (the map is weak)
    for x in reversed(order):
        parts = []
        for a in x.args:
            hit = _a(kind, _a("eq", a, x))
            below = _known(a) if a.op == x.op else None
            parts.append(hit if below is None else _a("mul", hit, below))
        made.append(_a("add", parts[0], parts[1]))
        _TIED[x] = weakref.ref(made[-1])
    found = _known(n)
    assert found is not None
    return found


def _known(x: Node) -> Node | None:
    ref = _TIED.get(x)
    return None if ref is None else ref()


#: nested min/max node -> its count of tied operands, both weak: a count refers to its node
#: (a strong value would keep its key alive); a count that died is built again (hash-consed)
_TIED: weakref.WeakKeyDictionary[Node, weakref.ref[Node]] = weakref.WeakKeyDictionary()


def _ties(operand: Node, n: Node) -> Node:
    """How many operands of ``operand``'s nest of n's operation equal n (a float)."""
    kind = "cast_f32" if n.dtype.name == "float32" else "cast_f64"
    hit = _a(kind, _a("eq", operand, n))
    return _a("mul", hit, _tied(operand)) if operand.op == n.op else hit


def _g_minmax(first_wins: str) -> GradRule:
    """JAX's convention: the gradient goes to the selected operand, half to each on a tie.
    A nest of the same operation (the lane-order tree of an unpacked array's min or max, or
    max(max(a, b), c)) shares it equally among all the tied operands, as the packed
    reduction does (rmin/rmax): each operand gets the share of its nest's ties."""

    def rule(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
        a, b = n.args
        if a.op == n.op or b.op == n.op:
            ties_a, ties_b = _ties(a, n), _ties(b, n)
            total = _a("add", ties_a, ties_b)
            nan = _a("eq", total, 0.0)  # a NaN result equals none of its operands

            def share(ties: Node) -> Node:
                return _a("where", nan, 0.0, _a("div", _a("mul", g, ties), total))

            return (share(ties_a) if need[0] else None), (share(ties_b) if need[1] else None)
        half = _a("mul", g, 0.5)
        ga = (_a("where", _a(first_wins, a, b), g, _a("where", _a("eq", a, b), half, 0.0))
              if need[0] else None)
        gb = (_a("where", _a(first_wins, b, a), g, _a("where", _a("eq", a, b), half, 0.0))
              if need[1] else None)
        return ga, gb

    return rule


def _g_pow(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    a, b = n.args
    # d/da a**b = b a**(b-1), taken as 0 where b == 0 (0 * 0**-1 would be NaN; JAX 0.10
    # gives that NaN at a = 0, docs/semantics.md)
    ga = (_a("mul", g, _a("where", _a("eq", b, 0.0), 0.0,
                          _a("mul", b, _a("pow", a, _a("sub", b, 1.0)))))
          if need[0] else None)
    gb = None
    if need[1]:
        # d/db a**b = log(a) a**b, taken as 0 where a == 0 (as JAX)
        log_a = _a("where", _a("eq", a, 0.0), 0.0, _a("log", a))
        gb = _a("mul", g, _a("mul", log_a, n))
    return ga, gb


def _g_atan2(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """(x, -y) / (x² + y²) as (x/h)/h with h = hypot(x, y): x² + y² would underflow to 0
    (inf gradients) below |x|, |y| ~ 1e-19 and overflow (0 gradients) above 1e19 in float32."""
    y, x = n.args
    h = _a("hypot", x, y)
    return ((_a("mul", g, _a("div", _a("div", x, h), h)) if need[0] else None),
            (_a("neg", _a("mul", g, _a("div", _a("div", y, h), h))) if need[1] else None))


def _g_unary(f: Callable[[Node, Node], Node]) -> GradRule:
    """g * f(node, operand) for a function of one operand."""

    def rule(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
        return (_a("mul", g, f(n, n.args[0])),)

    return rule


def _one_minus_sq_root(a: Node) -> Node:
    return _a("sqrt", _a("sub", 1.0, _a("mul", a, a)))


def _g_zero(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return tuple(None for _ in n.args)


def _g_where(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    c = n.args[0]
    return (None, _a("where", c, g, 0.0) if need[1] else None,
            _a("where", c, 0.0, g) if need[2] else None)


def _g_cast(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    a = n.args[0]
    if not a.dtype.is_float:
        return (None,)
    return (cast(g, a.dtype),)


def _g_mod(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    a, b = n.args
    return g, _a("neg", _a("mul", g, _a("floordiv", a, b))) if need[1] else None


def _g_rsum(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return (broadcast_to(g, n.args[0].shape),)


def _g_rminmax(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """JAX's convention: the gradient is shared equally by every element equal to the result."""
    a = n.args[0]
    mask = _a("cast_f32" if a.dtype.name == "float32" else "cast_f64", _a("eq", a, n))
    share = _a("div", g, _a("rsum", mask))
    return (_a("mul", mask, broadcast_to(share, a.shape)),)


def _g_dot(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    a, b = n.args
    return (_a("mul", g, b) if need[0] else None), (_a("mul", g, a) if need[1] else None)


def _outer(u: Node, v: Node) -> Node:
    return _a("matmul", reshape(u, (u.shape[0], 1)), reshape(v, (1, v.shape[0])))


def _g_matvec(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    m, v = n.args
    return (_outer(g, v) if need[0] else None), (_a("vecmat", g, m) if need[1] else None)


def _g_vecmat(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    v, m = n.args
    return (_a("matvec", m, g) if need[0] else None), (_outer(v, g) if need[1] else None)


def _g_matmul(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    a, b = n.args
    return ((_a("matmul", g, _a("transpose", b)) if need[0] else None),
            (_a("matmul", _a("transpose", a), g) if need[1] else None))


def _g_transpose(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return (_a("transpose", g),)


def _g_view(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """reshape: g reshaped back; index and slice (also what a row broadcast or m[r] makes):
    g at its place in an array of zeros of the operand's shape. Each such view costs an
    operand-sized gradient, so a packed array read element by element differentiates in
    O(n^2); an unpacked vector (packed=False) keeps it per element."""
    x = n.args[0]
    if n.op == "reshape":
        return (reshape(g, x.shape),)
    view: tuple[int, int] = (n.attr, 1) if n.op == "index" else n.attr  # type: ignore[assignment]
    start, length = view
    zero = const(0.0, x.dtype)
    middle = broadcast_to(g, (1,)) if n.op == "index" else reshape(g, (length,))
    parts = [p for p in (broadcast_to(zero, (start,)) if start else None, middle,
                         broadcast_to(zero, (x.size - start - length,))
                         if x.size - start - length else None) if p is not None]
    whole = parts[0] if len(parts) == 1 else concat(parts, (x.size,))
    return (reshape(whole, x.shape),)


def _g_sgather(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """g at every step-th place of zeros of the operand's size: one scatter stencil."""
    x = n.args[0]
    start, step, _ = strided_attr(n)
    return (reshape(scatter(g, start, step, x.size), x.shape),)


def _g_sscatter(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    start, step, _ = strided_attr(n)
    return (strided(g, start, step, n.args[0].size),)


def _g_ngather(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """g back at the levels' places of zeros of the block: one nscatter stencil."""
    counts, steps, _ = level_attr(n)
    x = n.args[0]
    return (reshape(level_scatter(g, counts, steps, x.size), x.shape),)


def _g_nscatter(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    counts, steps, _ = level_attr(n)
    return (regather(reshape(g, (g.size,)), counts, steps),)


def _g_pgather(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """pgather(p, a)[i] = a[p[i]] with p a permutation (sorting): a's gradient puts g back
    where each element came from; p is an index (no gradient)."""
    p = n.args[0]
    return None, (_make_rows("pscatter", p, g) if need[1] else None)


def _g_pscatter(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    p = n.args[0]
    return None, (_make_rows("pgather", p, g) if need[1] else None)


def _make_rows(name: str, p: Node, g: Node) -> Node:
    return make(REGISTRY[name], (p, reshape(g, p.shape)))


def _g_stack(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return tuple(index(g, i) if need[i] else None for i in range(len(n.args)))


def _g_concat(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    out: list[Node | None] = []
    start = 0
    for needed, part in zip(need, n.args, strict=True):
        # a part may be a matrix (a transposed block of an axis permutation): its own shape
        out.append(reshape(slice_(g, start, part.size), part.shape) if needed else None)
        start += part.size
    return tuple(out)


def _g_fill(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    return (_a("rsum", g),)


def _g_hypot(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """(x/h, y/h), taken as 0 where h == 0. The untaken side divides by 1 there, not by h:
    its own derivative (a second derivative: the Hessian of hypot(x, y)**3 at the origin)
    would be 0 · (1/0) = NaN; the limit is 0, as JAX gives."""
    zero = _a("eq", n, 0.0)
    safe = _a("where", zero, 1.0, n)
    return tuple(_a("where", zero, 0.0, _a("div", _a("mul", g, a), safe)) if need[i] else None
                 for i, a in enumerate(n.args))


def _g_copysign(n: Node, g: Node, need: Need) -> tuple[Node | None, ...]:
    """d/dx: +1 where the signs of x and y agree, -1 where not; d/dy: 0."""
    a, b = n.args
    sign_match = _a("mul", _a("copysign", 1.0, a), _a("copysign", 1.0, b))
    return (_a("mul", g, sign_match) if need[0] else None), None


#: operations whose gradient is zero almost everywhere (steps, rounding, integer results)
ZERO_GRADIENT = frozenset({"floordiv", "sign", "floor", "ceil", "round", "trunc", "cast_i32",
                           "cast_bool", "argsort"})

RULES: dict[str, GradRule] = {
    "add": _g_add,
    "sub": _g_sub,
    "mul": _g_mul,
    "div": _g_div,
    "mod": _g_mod,
    "min": _g_minmax("lt"),
    "max": _g_minmax("gt"),
    "pow": _g_pow,
    "atan2": _g_atan2,
    "neg": lambda n, g, need: (_a("neg", g),),
    "abs": _g_unary(lambda n, a: _a("sign", a)),
    "relu": _g_unary(lambda n, a: _a("where", _a("gt", a, 0.0), 1.0, 0.0)),
    "sqrt": _g_unary(lambda n, a: _a("div", 0.5, n)),
    "sin": _g_unary(lambda n, a: _a("cos", a)),
    "cos": _g_unary(lambda n, a: _a("neg", _a("sin", a))),
    "tan": _g_unary(lambda n, a: _a("add", 1.0, _a("mul", n, n))),
    "asin": _g_unary(lambda n, a: _a("div", 1.0, _one_minus_sq_root(a))),
    "acos": _g_unary(lambda n, a: _a("div", -1.0, _one_minus_sq_root(a))),
    "atan": _g_unary(lambda n, a: _a("div", 1.0, _a("add", 1.0, _a("mul", a, a)))),
    "exp": _g_unary(lambda n, a: n),
    "log": _g_unary(lambda n, a: _a("div", 1.0, a)),
    "tanh": _g_unary(lambda n, a: _a("sub", 1.0, _a("mul", n, n))),
    "hypot": _g_hypot,
    "copysign": _g_copysign,
    "log1p": _g_unary(lambda n, a: _a("div", 1.0, _a("add", 1.0, a))),
    "expm1": _g_unary(lambda n, a: _a("add", n, 1.0)),
    "where": _g_where,
    "cast_f32": _g_cast,
    "cast_f64": _g_cast,
    "rsum": _g_rsum,
    "rmin": _g_rminmax,
    "rmax": _g_rminmax,
    "dot": _g_dot,
    "matvec": _g_matvec,
    "vecmat": _g_vecmat,
    "matmul": _g_matmul,
    "transpose": _g_transpose,
    "stack": _g_stack,
    "index": _g_view,
    "slice": _g_view,
    "sgather": _g_sgather,
    "sscatter": _g_sscatter,
    "ngather": _g_ngather,
    "nscatter": _g_nscatter,
    "pgather": _g_pgather,
    "pscatter": _g_pscatter,
    "reshape": _g_view,
    "concat": _g_concat,
    "fill": _g_fill,
    **{name: _g_zero for name in ZERO_GRADIENT},
}


def rule_for(name: str) -> GradRule | None:
    """The derivative rule of an operation; None for results that carry no gradient."""
    return RULES.get(name)
