"""Smart construction of nodes: type promotion, constant folding, identities, CSE.

Every node is built through :func:`apply`, so the graph is simplified as it is traced: there is
no separate pass that could be forgotten. Dead code never reaches the compiler because it only
walks what the requested outputs depend on (see :func:`live_nodes`).
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence

from .. import dtypes as dt
from ..dtypes import DType
from . import _intern
from .errors import ShapeError, ShapeOrTypeError
from .fold import fold
from .node import (
    Node,
    canonical_key,
    const,
    const_array,
    const_value,
    fresh_input,
    intern,
    is_const,
)
from .ops import CASTS, REGISTRY, OpSpec
from .options import current as options
from .options import float_regrouping_listeners
from .traverse import live_nodes

__all__ = ["ShapeError", "ShapeOrTypeError", "apply", "cast", "live_nodes", "make", "rebuild"]

Operand = Node | bool | int | float


def _check_scalar(value: object, weak: bool = False) -> bool | int | float:
    """A Python number from ``value``; an int outside int32 raises unless ``weak`` (an operand
    next to a value, which takes a float value's type: _check_int32 once the type is known)."""
    if isinstance(value, bool | int | float):
        if not weak and isinstance(value, int):
            _check_int32(value)
        return value
    # NumPy scalars and other numbers that convert losslessly
    item = getattr(value, "item", None)
    if callable(item):
        return _check_scalar(item(), weak)
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in a copapy expression; "
                    f"expected a number or a copapy value")


def _check_int32(value: bool | int | float) -> None:
    if type(value) is int and not dt.INT32_MIN <= value <= dt.INT32_MAX:
        raise OverflowError(f"integer constant {value} does not fit in int32; use a float "
                            f"(e.g. {float(value)!r}) or a value of dtype float64")


def cast(node: Node, dtype: DType) -> Node:
    """Convert a node to ``dtype`` (no-op if it already has it)."""
    if node.dtype is dtype:
        return node
    return make(REGISTRY[CASTS[dtype.name]], (node,))


def _operand_types(spec: OpSpec, operands: tuple[Operand, ...]) -> DType:
    """The common type the (value) operands of ``spec`` are converted to."""
    nodes = [o for o in operands if isinstance(o, Node)]
    if not nodes:
        common = dt.scalar_type(operands[0])  # type: ignore[arg-type]
        for o in operands[1:]:
            common = dt.promote(common, dt.scalar_type(o))  # type: ignore[arg-type]
    else:
        common = nodes[0].dtype
        for n in nodes[1:]:
            common = dt.promote(common, n.dtype)
        for o in operands:
            if not isinstance(o, Node):
                common = dt.promote(common, dt.weak_type(o, common))
    kind = spec.operands
    if kind == "num" and common.is_bool:
        return dt.int32
    if kind == "float" and not common.is_float:
        return dt.float32
    if kind == "int":
        if common.is_bool:
            return dt.int32
        if not common.is_int:
            raise ShapeOrTypeError(f"{spec.name} needs integer operands, got {common.name}; "
                                   f"convert with cp.cast(x, cp.int32) first")
    if kind == "intbool" and common.is_float:
        raise ShapeOrTypeError(f"{spec.name} needs integer or bool operands, got {common.name}")
    if kind == "bool" and not common.is_bool:
        raise ShapeOrTypeError(f"{spec.name} needs bool operands, got {common.name}")
    return common


#: operand types an operation of each operand kind takes without conversion
_TAKES = {"num": frozenset({"float32", "float64", "int32"}),
          "float": frozenset({"float32", "float64"}),
          "int": frozenset({"int32"}), "intbool": frozenset({"int32", "bool"}),
          "bool": frozenset({"bool"}), "any": frozenset({"float32", "float64", "int32", "bool"})}


#: operand kinds whose common type with float operands is the float type itself
_FLOAT_KINDS = frozenset({"num", "float", "any"})
#: registry rows that convert their operand
_CAST_NAMES = frozenset(CASTS.values())
#: element-wise operations of two operands that are not casts (make's fast path)
_SCALAR_BINARY = frozenset(name for name, spec in REGISTRY.items()
                           if spec.arity == 2 and spec.shape_rule == "elementwise"
                           and name not in _CAST_NAMES)


def _result_type(spec: OpSpec, operand_type: DType) -> DType:
    if spec.result == "same":
        return operand_type
    return dt.BY_NAME[spec.result]


def apply(name: str, *operands: Operand) -> Node:
    """Build ``name(*operands)``: Python scalars become constants, operands are promoted."""
    spec = REGISTRY[name]
    if len(operands) == 2 and spec.arity == 2:
        a, b = operands
        # the common case: two values of one type the operation takes as it is
        if type(a) is Node:
            if type(b) is Node:
                if a.dtype is b.dtype and a.dtype.name in _TAKES[spec.operands]:
                    return make(spec, operands)  # type: ignore[arg-type]
            elif type(b) is float and a.dtype.is_float and spec.operands in _FLOAT_KINDS:
                # a float value and a Python float: the constant takes the value's type
                return make(spec, (a, const(b, a.dtype)))
        elif (type(a) is float and type(b) is Node and b.dtype.is_float
              and spec.operands in _FLOAT_KINDS):
            return make(spec, (const(a, b.dtype), b))
    elif len(operands) == 1 and spec.arity == 1:
        (a,) = operands
        if type(a) is Node and a.dtype.name in _TAKES[spec.operands]:
            return make(spec, operands)  # type: ignore[arg-type]
    if len(operands) != spec.arity:
        raise TypeError(f"{name} takes {spec.arity} operands, got {len(operands)}")
    checked = tuple(o if isinstance(o, Node) else _check_scalar(o, True) for o in operands)
    if name == "where":
        cond = checked[0]
        cond_node = cast(cond, dt.bool_) if isinstance(cond, Node) else const(bool(cond), dt.bool_)
        common = _operand_types(spec, checked[1:])
        if not common.is_float:
            for o in checked[1:]:
                _check_int32(o)  # type: ignore[arg-type]
        a, b = (cast(o, common) if isinstance(o, Node) else const(o, common) for o in checked[1:])
        return make(spec, (cond_node, a, b))
    common = _operand_types(spec, checked)
    if not common.is_float:
        for o in checked:
            _check_int32(o)  # type: ignore[arg-type]
    args = tuple(cast(o, common) if isinstance(o, Node) else const(o, common) for o in checked)
    return make(spec, args)


def _result_shape(spec: OpSpec, args: tuple[Node, ...], attr: object) -> tuple[int, ...]:
    rule = spec.shape_rule
    if rule == "elementwise":
        for arg in args:
            if arg.shape:
                break
        else:
            return ()
    shapes = [a.shape for a in args]
    if rule == "elementwise":
        distinct = {sh for sh in shapes if sh}
        if len(distinct) > 1:
            raise ShapeError(f"{spec.name}: shapes {' and '.join(str(sh) for sh in shapes)} do "
                             f"not match (element-wise operations need equal shapes or a scalar)")
        return distinct.pop() if distinct else ()
    if rule in ("stack", "reshape", "fill"):
        return attr  # type: ignore[return-value]
    if rule == "index":
        return ()
    if rule == "slice":
        return (attr[1],)  # type: ignore[index]
    if rule == "strided":
        return (attr[2],)  # type: ignore[index]
    if rule == "rows":
        if not shapes[0] or any(sh != shapes[0] for sh in shapes):
            raise ShapeError(f"{spec.name} works along the rows of equal arrays; got shapes "
                             f"{' and '.join(str(sh) for sh in shapes)}")
        return shapes[0]
    if rule == "reduce":
        if not shapes[0]:
            raise ShapeError(f"{spec.name} reduces an array; got a scalar")
        return ()
    if rule == "transpose":
        if len(shapes[0]) != 2:
            raise ShapeError(f"transpose needs a matrix, got shape {shapes[0]}")
        return (shapes[0][1], shapes[0][0])
    want = {"dot": (1, 1), "matvec": (2, 1), "vecmat": (1, 2), "matmul": (2, 2)}[rule]
    a, b = shapes
    if (len(a), len(b)) != want or a[-1 if len(a) == 1 else 1] != b[0]:
        raise ShapeError(f"{spec.name}: shapes {a} and {b} do not fit (inner dimensions "
                         f"must agree)")
    if rule == "dot":
        return ()
    if rule == "matvec":
        return (a[0],)
    if rule == "vecmat":
        return (b[1],)
    return (a[0], b[1])


def _make_python(spec: OpSpec, args: tuple[Node, ...], attr: object = None) -> Node:
    """The simplified node for ``spec(*args)``; args already have the operand type (every
    call that make does not handle in C)."""
    if len(args) == 2 and spec.name in _SCALAR_BINARY:
        a, b = args
        if not a.shape and not b.shape:
            # the most common nodes (tracing, cp.grad): what follows, without the cases that
            # cannot apply to two scalar operands
            dtype = b.dtype if spec.result == "same" else dt.BY_NAME[spec.result]
            if a.op == "const" and b.op == "const":  # cp.grad of a chain folds one per node
                return const(fold(spec, args, dtype, attr), dtype)  # type: ignore[arg-type]
            simpler = _identity(spec, args)
            if simpler is not None:
                return simpler
            if spec.commutative and canonical_key(a) > canonical_key(b):
                args = (b, a)
            return intern(spec.name, dtype, args, attr, ())
    if spec.name in _CAST_NAMES:
        dtype = dt.BY_NAME[spec.result]
        if args[0].dtype is dtype:
            return args[0]
    else:
        dtype = _result_type(spec, args[-1].dtype if args else dt.float32)
    shape = _result_shape(spec, args, attr)
    if spec.arity != 0 and _all_const(args):
        value = fold(spec, args, dtype, attr)
        if shape:
            return const_array(value, dtype, shape)  # type: ignore[arg-type]
        return const(value, dtype)  # type: ignore[arg-type]
    simpler = _identity(spec, args)
    if simpler is not None:
        if simpler.shape != shape:
            simpler = broadcast_to(simpler, shape)
        return simpler
    if spec.commutative and canonical_key(args[0]) > canonical_key(args[1]):
        args = (args[1], args[0])
    return intern(spec.name, dtype, args, attr, shape)


#: make(spec, args, attr=None): the simplified node for ``spec(*args)``; args already have the
#: operand type. Two scalar operands that are not constants (and not the same node) of an
#: element-wise binary operation, where no rewrite applies, are built in C (graph/_intern.c:
#: the most common nodes of tracing and cp.grad); every other call is _make_python's.
make = _intern.make
_intern.bind_make({name: (None if REGISTRY[name].result == "same"
                          else dt.BY_NAME[REGISTRY[name].result], REGISTRY[name].commutative)
                   for name in _SCALAR_BINARY}, _make_python)


#: the operations whose non-constant operands _regroup looks into
_REGROUPED = frozenset({"add", "mul", "sub"})


def _regroup_types(floats: bool) -> None:
    """Tell make's C part which element types _regroup rewrites now (int32 always)."""
    types = {dt.int32, dt.float32, dt.float64} if floats else {dt.int32}
    _intern.set_regroup(set(_REGROUPED), types)


_regroup_types(False)
float_regrouping_listeners.append(_regroup_types)


def stack(items: Sequence[Node], shape: tuple[int, ...]) -> Node:
    """A packed array from scalar nodes of one type (row-major)."""
    if not items:
        raise ShapeError("cannot make an empty array")
    dtype = items[0].dtype
    for x in items:
        if x.shape:
            raise ShapeError("stack takes scalars")
        if x.dtype is not dtype:
            raise TypeError("stack: all elements must have the same type; cast them first")
    return make(REGISTRY["stack"], tuple(items), tuple(shape))


def concat(parts: Sequence[Node], shape: tuple[int, ...]) -> Node:
    """Packed arrays laid end to end (row-major) into one array of ``shape``."""
    total = sum(p.size for p in parts)
    if total != math.prod(shape):
        raise ShapeError(f"concat of {total} elements cannot have shape {shape}")
    dtype = parts[0].dtype
    if any(p.dtype is not dtype for p in parts):
        raise TypeError("concat: all parts must have the same type; cast them first")
    return make(REGISTRY["concat"], tuple(parts), tuple(shape))


def index(node: Node, flat: int) -> Node:
    """Element ``flat`` (row-major) of a packed array, as a scalar (a view: no code)."""
    if not 0 <= flat < node.size:
        raise IndexError(f"index {flat} out of range for shape {node.shape}")
    if node.op == "stack":
        return node.args[flat]
    if node.op == "fill":
        return node.args[0]
    return make(REGISTRY["index"], (node,), flat)


def slice_(node: Node, start: int, length: int) -> Node:
    """Contiguous elements [start, start + length) as a packed vector (a view: no code)."""
    if length < 1 or start < 0 or start + length > node.size:
        raise IndexError(f"slice [{start}, {start + length}) out of range for shape {node.shape}")
    if start == 0 and length == node.size and len(node.shape) == 1:
        return node
    return make(REGISTRY["slice"], (node,), (start, length))


def strided(node: Node, start: int, step: int, count: int) -> Node:
    """Elements start, start + step, ... (count of them, step of any sign but 0) of a packed
    array, row-major, as a packed vector: one strided copy (a loop stencil), whatever count."""
    last = start + (count - 1) * step
    if count < 1 or step == 0 or not (0 <= start < node.size and 0 <= last < node.size):
        raise IndexError(f"strided view start {start}, step {step}, count {count} out of range "
                         f"for shape {node.shape}")
    if step == 1:
        return slice_(node, start, count)
    return make(REGISTRY["sgather"], (node,), (start, step, count))


def strided_attr(node: Node) -> tuple[int, int, int]:
    """(start, step, count) of an sgather, (start, step, size) of an sscatter."""
    attr: tuple[int, int, int] = node.attr  # type: ignore[assignment]
    return attr


def scatter(node: Node, start: int, step: int, size: int) -> Node:
    """A vector of ``size`` zeros with ``node``'s elements at start, start + step, ...: the
    adjoint of ``strided``."""
    last = start + (node.size - 1) * step
    if step == 0 or not (0 <= start < size and 0 <= last < size):
        raise IndexError(f"scatter start {start}, step {step} of {node.size} elements out of "
                         f"range for size {size}")
    return make(REGISTRY["sscatter"], (node,), (start, step, size))


def reshape(node: Node, shape: tuple[int, ...]) -> Node:
    size = 1
    for d in shape:
        size *= d
    if size != node.size:
        raise ShapeError(f"cannot reshape {node.shape} into {shape}")
    if tuple(shape) == node.shape:
        return node
    if node.op == "reshape":
        node = node.args[0]
    return make(REGISTRY["reshape"], (node,), tuple(shape))


def broadcast_to(node: Node, shape: tuple[int, ...]) -> Node:
    """A scalar repeated into ``shape`` (or the node itself if it has that shape)."""
    if node.shape == tuple(shape):
        return node
    if node.shape:
        raise ShapeError(f"cannot broadcast shape {node.shape} to {shape}")
    if not shape:
        return node
    return make(REGISTRY["fill"], (node,), tuple(shape))


def _all_const(args: tuple[Node, ...]) -> bool:
    for a in args:
        if a.op != "const":
            return False
    return True


#: (value, dtype code) -> the slot bytes of every scalar constant of that type equal to value
_EQUAL_RAW: dict[tuple[int, int], frozenset[bytes]] = {}


def _is(node: Node, value: int) -> bool:
    """``node`` is a scalar constant equal to ``value`` (0 or 1; -0.0 == 0), decided on the
    constant's bytes: called several times per node built, decoding would dominate."""
    if node.op != "const" or node.shape:
        return False
    dtype = node.dtype
    raws = _EQUAL_RAW.get((value, dtype.code))
    if raws is None:
        raws = frozenset({dtype.pack(value), dtype.pack(-0.0)} if dtype.is_float and value == 0
                         else {dtype.pack(value)})
        _EQUAL_RAW[value, dtype.code] = raws
    return node.attr in raws


def _power_of_two(node: Node) -> bool:
    """A float constant ±2^k whose reciprocal is representable too (so scaling is exact)."""
    if not is_const(node) or node.shape or not node.dtype.is_float:
        return False
    v = float(const_value(node))
    if v == 0.0 or not math.isfinite(v) or math.frexp(abs(v))[0] != 0.5:
        return False
    reciprocal = 1.0 / v
    return bool(node.dtype.unpack(node.dtype.pack(reciprocal)) == reciprocal)


def _identity(spec: OpSpec, args: tuple[Node, ...]) -> Node | None:
    """Rewrites that keep results exact (docs/semantics.md lists each, with exceptions)."""
    name = spec.name
    if name == "where":
        cond, a, b = args
        if is_const(cond) and not cond.shape:
            return a if const_value(cond) else b
        if a is b:
            return a
        return None
    if spec.shape_rule != "elementwise" or len(args) > 2:
        return None
    if len(args) == 1:
        (a,) = args
        if name in ("neg", "lnot", "invert") and a.op == name:
            return a.args[0]  # -(-x), not(not(x)), ~~x
        return None
    a, b = args
    if a.op != "const" and b.op != "const":
        # no constant operand (most nodes): only the rewrites of x op x below apply
        if a is not b:
            return _regroup(spec, a, b) if name in _REGROUPED else None
        if (name == "sub" and not a.dtype.is_float) or name == "xor":
            return const(0, a.dtype)
        return a if name in ("and", "or") else None
    is_int = not a.dtype.is_float
    if name == "add":
        if _is(b, 0) and not a.dtype.is_bool:
            return a
        if _is(a, 0) and not b.dtype.is_bool:
            return b
    elif name == "sub":
        if _is(b, 0):
            return a
        if is_int and a is b:
            return const(0, a.dtype)
    elif name == "mul":
        if _is(b, 1):
            return a
        if _is(a, 1):
            return b
        if _is(a, 0) or _is(b, 0):
            zero = a if is_const(a) else b
            if is_int or options().multiply_by_zero:
                return zero
    elif name == "div" and _is(b, 1):
        return a
    elif name == "div" and _power_of_two(b):
        # x / 2^k == x * 2^-k exactly (both are one correctly rounded scaling)
        return make(REGISTRY["mul"], (a, const(1.0 / float(const_value(b)), b.dtype)))
    elif name == "pow" and is_const(b) and not b.shape and a.dtype.is_float:
        exponent = const_value(b)
        if exponent == 2:
            return make(REGISTRY["mul"], (a, a))
        if exponent == 1:
            return a
        if exponent == 0:
            return const(1.0, a.dtype)  # C99: pow(x, 0) == 1 even for NaN
    elif name in ("and", "or") and a is b:
        return a
    elif name == "xor" and a is b:
        return const(0, a.dtype)
    return _reassociate(spec, a, b)


def _reassociate(spec: OpSpec, a: Node, b: Node) -> Node | None:
    """(x op c1) op c2 -> x op (c1 op c2) for + and *: always for int32, opt-in for floats,
    and for float products whenever a constant is a power of two (exact scaling)."""
    if spec.name not in ("add", "mul"):
        return None
    if is_const(a) and not is_const(b):
        a, b = b, a
    if not is_const(b) or b.shape or a.op != spec.name:
        return None
    inner_const = next((x for x in a.args if is_const(x) and not x.shape), None)
    if inner_const is None:
        return None
    x = a.args[1] if a.args[0] is inner_const else a.args[0]
    allowed = (not a.dtype.is_float or options().reassociate_floats
               or (spec.name == "mul" and (_power_of_two(b) or _power_of_two(inner_const))))
    if not allowed:
        return None
    combined = make(spec, (inner_const, b))
    return make(spec, (x, combined))


def _regroup(spec: OpSpec, a: Node, b: Node) -> Node | None:
    """Constant regrouping across terms (docs/semantics.md): constants move outward,
    ``(x+c1)+(y+c2) -> (x+y)+(c1+c2)`` and ``(x+c)+y -> (x+y)+c`` (the same for *), and like
    terms combine, ``c1*x ± c2*x -> (c1±c2)*x``. Exact in int32 (wrapping arithmetic is a
    ring), so always done there; for floats only under ``reassociate_floats``."""
    dtype = a.dtype
    if dtype.is_bool or (dtype.is_float and not options().reassociate_floats):
        return None
    if dtype is not b.dtype:
        return None
    name = spec.name
    if name != "sub":
        pa, pb = _const_term(a, name), _const_term(b, name)
        if pa is not None and pb is not None:
            return make(spec, (make(spec, (pa[0], pb[0])), make(spec, (pa[1], pb[1]))))
        if pa is not None:
            return make(spec, (make(spec, (pa[0], b)), pa[1]))
        if pb is not None:
            return make(spec, (make(spec, (a, pb[0])), pb[1]))
    if name == "mul":
        return None
    (ca, xa), (cb, xb) = _scaled(a), _scaled(b)
    if xa is not xb or (ca is None and cb is None):
        return None  # unlike terms, or x ± x (x + x is not cheaper as 2*x)
    one = const(1, dtype)
    coefficient = make(spec, (ca or one, cb or one))
    return make(REGISTRY["mul"], (xa, coefficient))


def _const_term(node: Node, name: str) -> tuple[Node, Node] | None:
    """``(x, c)`` if ``node`` is ``x name c`` (or ``c name x``) with a scalar constant c."""
    if node.op != name:
        return None
    x, c = node.args
    if is_const(x) and not x.shape:
        x, c = c, x
    return (x, c) if is_const(c) and not c.shape and not is_const(x) else None


def _scaled(node: Node) -> tuple[Node | None, Node]:
    """``(c, x)`` if ``node`` is ``c*x`` with a scalar constant c, else ``(None, node)``."""
    split = _const_term(node, "mul")
    return (None, node) if split is None else (split[1], split[0])


def fresh_input_for_test(dtype: DType) -> Node:
    """An input leaf of ``dtype`` (used to probe which operand types an operation accepts)."""
    return fresh_input(dtype, 0)


def rebuild(order: Sequence[Node], mapping: dict[Node, Node],
            stop: Container[Node] = (), exact: bool = False) -> dict[Node, Node]:
    """Rebuild ``order`` (operands first) with some nodes replaced, re-simplifying on the way.

    Returns the replacement of every node that changed. With ``exact`` no rewrite applies:
    a changed node keeps its operation, operand order, attribute and shape, and only a node
    whose operands all became constants folds (folded = computed, graph/fold.py), so the
    rebuilt graph runs the same operations on the new values (cp.fori_loop(unroll=True)).
    """
    out = dict(mapping)
    for node in order:
        if node in out or node in stop or not node.args:
            continue
        args = tuple(out.get(a, a) for a in node.args)
        if any(x is not y for x, y in zip(args, node.args, strict=True)):
            # attr carries what is not an operand: shapes, offsets, fill shapes
            if exact and not (node.op in REGISTRY and _all_const(args)):
                out[node] = intern(node.op, node.dtype, args, node.attr, node.shape)
            else:
                out[node] = make(REGISTRY[node.op], args, node.attr)
    return out
