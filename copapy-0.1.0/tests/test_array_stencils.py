"""The packed-array stencils (stencils/array.c) against NumPy, run as host C functions.

tools/array_harness builds stencils/array.c for the host (slots as real objects, a cp_next that
records the registers), so every stencil can be called directly. Checked here:

* the set of stencils is exactly the one the compiler emits names for (the element-wise ones
  for every operation of the registry, read from the compiler's lowering);
* element-wise operations, selects, broadcasts and casts against NumPy element by element, bit
  for bit (a NaN result may have any payload where the hardware chooses it: arithmetic; moves,
  selects, min/max, neg/abs keep payloads exactly); the math kernels against the host build of
  the scalar kernels (copapy._kernels); also in place (out bound to the same memory as a, b or
  c, as the compiler may do);
* reductions, dot products and matrix products against a Python model of the lane order
  (the determinism contract, cp_array.h), bit for bit, for n = 1..200 with NaN, -0.0 and inf;
* every stencil leaves the registers it does not write unchanged, reaches cp_next exactly once,
  writes nothing beyond out[n) and does not modify its inputs;
* on the 32-bit ARM vector units, which flush float32 denormals, no float32 arithmetic or
  comparison is vectorised (tools/array_harness/check_vectorisation.py).

A missing C compiler fails these tests (tools/array_harness/harness.py), it never skips them.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import build
from copapy.graph.ops import CASTS as CAST_ROWS
from copapy.graph.ops import REGISTRY

from .support import registry_ops
from .support.archs import stencils_used
from .support.registry_ops import DTYPES

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "array_harness"))

import harness as hx  # noqa: E402

try:
    from copapy import _kernels
except ImportError:  # running from a source tree without an installed copapy
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from copapy import _kernels
    except ImportError:
        _kernels = None

Array = np.ndarray[Any, Any]

# ---------------------------------------------------------------------------- the stencil set

BIN_FORMS = [("v", "v"), ("v", "m"), ("m", "v")]
WHERE_FORMS = [f for f in itertools.product("vm", repeat=3) if f != ("m", "m", "m")]
REDUCTIONS = ["rsum", "rmin", "rmax"]
FUSED_DOTS = ["dotadd", "dotsub", "dotrsub", "dotmul"]
TYPES = ["f32", "f64", "i32"]
CLASS = {"float32": "f32", "float64": "f64", "int32": "i32", "bool": "i32"}


@dataclass(frozen=True)
class Element:
    """A packed loop of a registry operation: its family, operation, operand and result type."""

    family: str  # binary, compare, unary or cast
    op: str      # the registry row
    ti: str
    to: str


def _packed(dtype: str, form: str) -> Any:
    from copapy.arrays import array_input

    d = DTYPES[dtype]
    if form == "m":
        return cp.value(0, d).node
    return array_input(np.zeros(4, d.numpy), packed=True, dtype=d).node()


def elementwise_stencils() -> dict[str, Element]:
    """The packed loops the compiler emits for every element-wise registry operation (read
    from its lowering), each operand type the operation's type rule accepts, every form."""
    out: dict[str, Element] = {}
    for op in registry_ops.ELEMENTWISE:
        spec = REGISTRY[op]
        if spec.arity == 3:
            continue  # where: a stencil family of its own (WHERE_FORMS)
        family = ("cast" if op in CAST_ROWS.values() else "compare" if spec.result == "bool"
                  else "binary" if spec.arity == 2 else "unary")
        for dtype in DTYPES:
            if not registry_ops.accepts(op, dtype):
                continue
            for forms in (BIN_FORMS if spec.arity == 2 else [("v",)]):
                node = build.apply(op, *(_packed(dtype, f) for f in forms))
                for name in stencils_used([node]):
                    if name.startswith(f"{spec.stencil}_") and "__v" in name:
                        ti = name.split("__")[0].rsplit("_", 1)[1]
                        to = CLASS[node.dtype.name]
                        out[name] = Element(family, op, ti, to)
    return out


ELEMENTS = elementwise_stencils()


def expected_names() -> dict[str, str]:
    """Every stencil name the compiler may emit -> its family."""
    names = {name: e.family for name, e in ELEMENTS.items()}
    for t in TYPES:
        names[f"mov_{t}__v_v"] = "unary"
        for c, a, b in WHERE_FORMS:
            names[f"where_{t}__v_{c}_{a}_{b}"] = "where"
        names[f"fill_{t}__v_m"] = "fill"
        for op in REDUCTIONS:
            for d in "01":
                names[f"{op}_{t}__{d}_v"] = "reduce"
        for d in "01":
            names[f"dot_{t}__{d}_v_v"] = "reduce"
            for fused in FUSED_DOTS:
                names[f"{fused}_{t}__{d}_v_m_v"] = "fused"
        for op in ["matvec", "vecmat", "matmul"]:
            names[f"{op}_{t}__v_v_v"] = "matrix"
    # strided views (issue 31): they move integers of the element's width, 4 or 8 bytes
    # (tests/test_strided.py and test_strided_cross_arch.py check their values)
    for width in ("i32", "f64"):
        for op in ("sgather", "sscatter"):
            names[f"{op}_{width}__v_v_m_m"] = "strided"
    return names


def types_of(name: str) -> tuple[str, str]:
    """(operand type, result type) of a stencil; the structural ones keep their type."""
    if name in ELEMENTS:
        return ELEMENTS[name].ti, ELEMENTS[name].to
    t = parse(name)[1]
    return t, t


NAMES = expected_names()


def of(family: str) -> list[str]:
    return sorted(n for n, f in NAMES.items() if f == family)


# ---------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def h() -> hx.Harness:
    return hx.Harness()  # HarnessError (a failure) without a C compiler


@pytest.fixture(scope="module", params=["scalar", "vectors"])
def hr(request: pytest.FixtureRequest, h: hx.Harness) -> hx.Harness:
    """The reductions in both of their C forms (cp_array.h): the lanes as scalars (every
    target's tables) and in vector registers (CP_LANE_VECTORS: x86_64, its variants, aarch64)."""
    if request.param == "scalar":
        return h
    hv = hx.Harness(lane_vectors=True)
    assert hv.lane_vectors, "the vector form of the reductions was not built"
    return hv


@pytest.fixture(scope="module")
def kernels() -> Any:
    if _kernels is None:
        pytest.fail("copapy._kernels is not built: run `python setup.py build_ext --inplace`")
    return _kernels


ALIASED: dict[str, hx.Harness] = {}


def aliased(role: str) -> hx.Harness:
    if role not in ALIASED:
        ALIASED[role] = hx.Harness(alias_out=role)
    return ALIASED[role]


def capped(n: int) -> Any:
    """Hypothesis settings with at most n examples (fewer under a smaller profile)."""
    return settings(max_examples=min(settings.default.max_examples, n))


# ---------------------------------------------------------------------------- values

DT = {"f32": np.float32, "f64": np.float64, "i32": np.int32}
UINT = {"f32": np.uint32, "f64": np.uint64}


def f32_bits(*bits: int) -> Array:
    return np.array(bits, dtype=np.uint32).view(np.float32)


def f64_bits(*bits: int) -> Array:
    return np.array(bits, dtype=np.uint64).view(np.float64)


SPECIALS = {
    "f32": np.concatenate([
        np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -7.0, 0.1, 1e-3,
                  np.inf, -np.inf, 16777217.0, 2147483520.0, 2147483648.0, -2147483648.0,
                  -2147483904.0, 1e10, -1e10, 3.4028235e38, -3.4028235e38, 1.1754944e-38],
                 dtype=np.float32),
        # NaNs (quiet, negative, payloads, signalling) and denormals
        f32_bits(0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFD00001, 0x7F800001, 0x7FA00000,
                 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000),
    ]),
    "f64": np.concatenate([
        np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -7.0, 0.1, 1e-3,
                  np.inf, -np.inf, 2147483647.0, 2147483647.5, 2147483648.0, -2147483648.0,
                  -2147483648.5, -2147483649.0, 9007199254740993.0, 1e300, -1e300,
                  1.7976931348623157e308, 2.2250738585072014e-308], dtype=np.float64),
        f64_bits(0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000012345,
                 0xFFF0000000000001, 0x7FF4000000000000, 0x0000000000000001,
                 0x8000000000000001, 0x000FFFFFFFFFFFFF),
    ]),
    "i32": np.array([0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 32, 33, -31, -32, 46341, 65536,
                     0x40000000, 2**31 - 1, -(2**31), -(2**31) + 1], dtype=np.int32),
}


def random_values(rng: np.random.Generator, t: str, n: int, kind: str) -> Array:
    """n values of type t: 'bits' (any bit pattern), 'normal' (moderate numbers), 'special',
    'small' (small integers, also as floats: exact products and sums), or 'mixed'."""
    if kind == "mixed":
        parts = [random_values(rng, t, n, k) for k in ("bits", "normal", "special", "small")]
        pick = rng.integers(0, 4, n)
        return np.choose(pick, parts).astype(DT[t])
    if kind == "special":
        return rng.choice(SPECIALS[t], n)
    if kind == "small":
        return rng.integers(-8, 9, n).astype(DT[t])
    if t == "i32":
        if kind == "bits":
            return rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
        return rng.integers(-1000, 1001, n).astype(np.int32)
    if kind == "bits":
        width = 32 if t == "f32" else 64
        raw = rng.integers(0, 2**width, n, dtype=np.uint64) if width == 32 else \
            rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
        return raw.astype(UINT[t]).view(DT[t])
    scale = 10.0 ** rng.uniform(-4, 4, n)
    return (rng.standard_normal(n) * scale).astype(DT[t])


KINDS = st.sampled_from(["bits", "normal", "special", "small", "mixed"])
SEEDS = st.integers(0, 2**63 - 1)


# ---------------------------------------------------------------------------- comparison

def bits_of(x: Array) -> Array:
    x = np.asarray(x)
    return x.view(UINT[{4: "f32", 8: "f64"}[x.itemsize]]) if x.dtype.kind == "f" else x


def assert_same(got: Array, want: Array, payload: bool, what: str) -> None:
    """Bit-for-bit equal; with payload=False any NaN matches any NaN."""
    got = np.asarray(got)
    want = np.asarray(want, dtype=got.dtype)
    assert got.shape == want.shape, what
    if got.dtype.kind == "f":
        same = bits_of(got) == bits_of(want)
        if not payload:
            same |= np.isnan(got) & np.isnan(want)
    else:
        same = got == want
    if not same.all():
        i = int(np.flatnonzero(~same)[0])
        raise AssertionError(f"{what}: {int((~same).sum())} of {got.size} differ; first at "
                             f"[{i}]: got {got.flat[i]!r} ({hex(int(bits_of(got).flat[i]))}), want "
                             f"{want.flat[i]!r} ({hex(int(bits_of(want).flat[i]))})")


# registers going in: distinctive values that every stencil must pass through unchanged
REGS_IN = hx.Regs(np.float32(1.25), np.float32(-2.5), np.float64(3.75), np.float64(-4.125),
                  np.int32(12345), np.int32(-678))
DEST = {("f32", "0"): "f0", ("f32", "1"): "f1", ("f64", "0"): "d0", ("f64", "1"): "d1",
        ("i32", "0"): "i0", ("i32", "1"): "i1"}
GUARD = 24  # elements after out[n) that must stay untouched


def run(h: hx.Harness, name: str, out_t: str | None, n_out: int,
        arrays: dict[str, Array], scalars: dict[str, Any], lengths: dict[str, int],
        dest: str | None = None) -> tuple[Array | None, hx.Regs]:
    """Set the slots, call the stencil, check the side conditions; return (out[:n_out], regs)."""
    for role, value in arrays.items():
        h.slot(role)[: len(value)] = value
    for slot, value in scalars.items():
        h.slot(slot)[0] = value
    for length, value in lengths.items():
        h.slot(f"cp_{length}_i32")[0] = value
    out = None
    if out_t is not None:
        out = h.slot(f"cp_vout_{out_t}")
        aliases_input = any(out.ctypes.data == h.slot(r).ctypes.data for r in arrays)
        if not aliases_input:
            out.view(np.uint8)[: (n_out + GUARD) * out.itemsize] = 0xA5
    before = {role: h.slot(role)[: len(v)].copy() for role, v in arrays.items()}
    regs = h.call(name, REGS_IN)
    for r in hx.REGS:
        if r != dest:
            kept = bits_of(np.asarray(getattr(regs, r))) == bits_of(np.asarray(getattr(REGS_IN, r)))
            assert kept, f"{name} changed register {r}"
    got = None
    if out is not None:
        got = out[:n_out].copy()
        if not any(out.ctypes.data == h.slot(r).ctypes.data for r in arrays):
            tail = out.view(np.uint8)[n_out * out.itemsize: (n_out + GUARD) * out.itemsize]
            assert (tail == 0xA5).all(), f"{name} wrote beyond out[{n_out})"
            for role, v in before.items():
                assert (bits_of(h.slot(role)[: len(v)]) == bits_of(v)).all(), \
                    f"{name} modified its input {role}"
    return got, regs


def parse(name: str) -> tuple[str, str, list[str]]:
    """(op, type, forms) of a stencil name; casts give op 'tof64' and type 'f32'."""
    head, forms = name.split("__")
    op, t = head.rsplit("_", 1)
    return op, t, forms.split("_")


# ---------------------------------------------------------------------------- NumPy models

def wrap32(x: Any) -> Array:
    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int32)


def np_min(a: Array, b: Array) -> Array:
    """cp_min_f32/f64 and the int min: NaN in a wins, else a < b ? a : b (NaN b gives b)."""
    return np.where(a != a, a, np.where(a < b, a, b))


def np_max(a: Array, b: Array) -> Array:
    return np.where(a != a, a, np.where(a > b, a, b))


def int_pow(a: Array, b: Array) -> Array:
    out = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        if y < 0:
            out.append(1 if x == 1 else ((-1 if y & 1 else 1) if x == -1 else 0))
        else:
            out.append(pow(x, y, 2**32))
    return wrap32(out)


def int_floordiv(a: Array, b: Array) -> Array:
    return wrap32([0 if y == 0 else x // y for x, y in zip(a.tolist(), b.tolist(), strict=True)])


def int_mod(a: Array, b: Array) -> Array:
    return wrap32([0 if y == 0 else x % y for x, y in zip(a.tolist(), b.tolist(), strict=True)])


def shl(a: Array, b: Array) -> Array:
    return wrap32([0 if (y % 2**32) >= 32 else x << y
                   for x, y in zip(a.tolist(), b.tolist(), strict=True)])


def shr(a: Array, b: Array) -> Array:
    return wrap32([x >> min(y % 2**32, 31) for x, y in zip(a.tolist(), b.tolist(), strict=True)])


def kernel2(name: str, t: str) -> Callable[[Array, Array], Array]:
    def f(a: Array, b: Array) -> Array:
        out = np.empty_like(a)
        _kernels.apply(name, t == "f64", out, np.ascontiguousarray(a), np.ascontiguousarray(b))
        return out
    return f


def kernel1(name: str, t: str) -> Callable[[Array], Array]:
    def f(a: Array) -> Array:
        out = np.empty_like(a)
        _kernels.apply(name, t == "f64", out, np.ascontiguousarray(a))
        return out
    return f


def sign(a: Array) -> Array:
    one = np.ones_like(a)
    return np.where(a > 0, one, np.where(a < 0, -one, np.where(a == 0, np.zeros_like(a), a)))


def reference(op: str, to: str) -> Callable[..., Array]:
    """The registry's NumPy reference of ``op``, its result in the stencil's type ``to``."""
    ref = REGISTRY[op].reference
    return lambda *xs: np.asarray(ref(np, *xs)).astype(DT[to])


#: independent models of the integer operations whose edge cases (division by 0, INT32_MIN,
#: shift counts out of range, bools as int32 0/1) are worked out in Python
INT_MODELS: dict[str, Callable[..., Array]] = {
    "floordiv": int_floordiv, "mod": int_mod, "pow": int_pow, "shl": shl, "shr": shr,
    "neg": lambda a: wrap32(-a.astype(np.int64)),
    "abs": lambda a: wrap32(np.abs(a.astype(np.int64))),
    "lnot": lambda a: a ^ 1,
}
#: float operations that keep NaN payloads exactly (only move bits, or select an operand)
FLOAT_MODELS: dict[str, Callable[..., Array]] = {
    "min": np_min, "max": np_max, "neg": np.negative, "abs": np.abs, "sign": sign,
    "relu": lambda a: np_max(a, np.zeros_like(a)),
}


def model(name: str) -> tuple[Callable[..., Array], bool]:
    """(expected result of the stencil ``name``, NaN payloads significant): the approximated
    float operations against the host build of the kernels (canonical NaNs), the others against
    the registry's NumPy reference (a NaN may have any payload where the hardware chooses it:
    arithmetic), or one of the models above."""
    if name not in ELEMENTS:  # mov: a copy
        return (lambda a: a), True
    e = ELEMENTS[name]
    spec = REGISTRY[e.op]
    if e.ti == "i32":
        return INT_MODELS.get(e.op, reference(e.op, e.to)), True
    if spec.kernel:
        return (kernel2 if spec.arity == 2 else kernel1)(spec.kernel, e.ti), True
    if e.op in FLOAT_MODELS:
        return FLOAT_MODELS[e.op], True
    return reference(e.op, e.to), e.to == "i32"


# ---------------------------------------------------------------------------- lane model

def lane_reduce(x: Array, op: Callable[[Array, Array], Array]) -> Array:
    """The determinism contract, written out: x has shape (batch, n), n >= 1; the reduction runs
    along the last axis. Lane l folds x[..., l], x[..., l + 8], ... from its first element on;
    the present lanes are combined by the fixed tree (0,1)(2,3)(4,5)(6,7), (01,23)(45,67),
    (0123,4567), a pair with a missing right member passing its left member through."""
    n = x.shape[-1]
    assert n >= 1
    slots: list[Array | None] = [None] * 8
    for lane in range(min(n, 8)):
        acc = x[..., lane]
        for i in range(lane + 8, n, 8):
            acc = op(acc, x[..., i])
        slots[lane] = acc
    while len(slots) > 1:
        nxt: list[Array | None] = []
        for left, right in zip(slots[0::2], slots[1::2], strict=True):
            if left is None:
                nxt.append(None)
            elif right is None:
                nxt.append(left)
            else:
                nxt.append(op(left, right))
        slots = nxt
    assert slots[0] is not None
    return slots[0]


def reduce_op(op: str, t: str) -> tuple[Callable[[Array, Array], Array], bool]:
    if op in ("rsum", "dot"):
        return np.add, t == "i32"  # int32 arrays wrap in NumPy
    return (np_min if op == "rmin" else np_max), True


# ---------------------------------------------------------------------------- the set

def test_the_library_defines_exactly_the_emitted_stencils(h: hx.Harness) -> None:
    got = set(h.stencil_names())
    want = set(NAMES)
    assert got == want, f"missing: {sorted(want - got)}; unexpected: {sorted(got - want)}"


def test_families_count() -> None:
    """The structural families have fixed sizes; every element-wise registry operation has a
    packed loop for each operand type it accepts."""
    counts: dict[str, int] = {}
    for family in NAMES.values():
        counts[family] = counts.get(family, 0) + 1
    assert {f: c for f, c in counts.items() if f not in ("binary", "compare", "unary", "cast")} \
        == {"where": 21, "fill": 3, "reduce": 24, "matrix": 9, "fused": 24, "strided": 4}
    covered = {e.op for e in ELEMENTS.values()}
    assert covered == set(registry_ops.ELEMENTWISE) - {"where"}


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("fused", FUSED_DOTS)
def test_fused_dot_equals_elementwise_then_dot(hr: hx.Harness, t: str, fused: str) -> None:
    """dot(a op s, b) in one pass gives the bits of the element-wise result fed to dot."""
    from copapy.graph import lanes

    rng = np.random.default_rng(5)
    for n in (*range(1, 20), 64, 65, 200):
        a = random_values(rng, t, n, "normal")
        b = random_values(rng, t, n, "normal")
        s = random_values(rng, t, 1, "normal")
        with np.errstate(all="ignore"):
            dt_ = a.dtype
            temp = {"dotadd": a + s[0], "dotsub": a - s[0], "dotrsub": s[0] - a,
                    "dotmul": a * s[0]}[fused].astype(dt_)
            want = lanes.np_dot(np, temp, b)
        _, regs = run(hr, f"{fused}_{t}__0_v_m_v", None, 0, {f"cp_va_{t}": a, f"cp_vb_{t}": b},
                      {f"cp_c_{t}": s[0]}, {"n": n}, dest=DEST[(t, "0")])
        assert_same(np.asarray([getattr(regs, DEST[(t, "0")])]), np.asarray([want]),
                    t == "i32", f"{fused}_{t} n={n}")


# ---------------------------------------------------------------------------- element-wise

def elementwise_case(name: str, family: str, rng: np.random.Generator, n: int, kind: str
                     ) -> tuple[dict[str, Array], dict[str, Any], str, Callable[[], Array], bool]:
    """(arrays, scalars, out type, expected-value thunk, payload significant) for one call."""
    op, t, forms = parse(name)
    if family in ("binary", "compare"):
        fa, fb = forms[1], forms[2]
        a = random_values(rng, t, n if fa == "v" else 1, kind)
        b = random_values(rng, t, n if fb == "v" else 1, kind)
        if op in ("shl", "shr") and rng.random() < 0.7:
            b = rng.integers(-40, 40, len(b)).astype(np.int32)
        arrays = {**({f"cp_va_{t}": a} if fa == "v" else {}),
                  **({f"cp_vb_{t}": b} if fb == "v" else {})}
        scalars = {**({f"cp_a_{t}": a[0]} if fa == "m" else {}),
                   **({f"cp_b_{t}": b[0]} if fb == "m" else {})}
        ea = a if fa == "v" else np.repeat(a, n)
        eb = b if fb == "v" else np.repeat(b, n)
        fn, payload = model(name)
        to = types_of(name)[1]

        def want() -> Array:
            with np.errstate(all="ignore"):
                return np.asarray(fn(ea, eb)).astype(DT[to])
        return arrays, scalars, to, want, payload
    if family in ("cast", "unary"):
        ti, to = types_of(name)
        a = random_values(rng, ti, n, kind)
        if op == "lnot" and rng.random() < 0.7:
            a = rng.integers(0, 2, n).astype(np.int32)
        fn1, payload = model(name)

        def want_un() -> Array:
            with np.errstate(all="ignore"):
                return np.asarray(fn1(a)).astype(DT[to])
        return {f"cp_va_{ti}": a}, {}, to, want_un, payload
    if family == "where":
        fc, fa, fb = forms[1], forms[2], forms[3]
        c = rng.integers(0, 2, n if fc == "v" else 1).astype(np.int32)
        if rng.random() < 0.3:  # any nonzero int is true
            c = random_values(rng, "i32", len(c), "bits")
        a = random_values(rng, t, n if fa == "v" else 1, kind)
        b = random_values(rng, t, n if fb == "v" else 1, kind)
        arrays = {**({"cp_vc_i32": c} if fc == "v" else {}),
                  **({f"cp_va_{t}": a} if fa == "v" else {}),
                  **({f"cp_vb_{t}": b} if fb == "v" else {})}
        scalars = {**({"cp_c_i32": c[0]} if fc == "m" else {}),
                   **({f"cp_a_{t}": a[0]} if fa == "m" else {}),
                   **({f"cp_b_{t}": b[0]} if fb == "m" else {})}
        ec = c if fc == "v" else np.repeat(c, n)
        ea = a if fa == "v" else np.repeat(a, n)
        eb = b if fb == "v" else np.repeat(b, n)
        return arrays, scalars, t, lambda: np.where(ec != 0, ea, eb).astype(DT[t]), True
    assert family == "fill"
    a = random_values(rng, t, 1, kind)
    return {}, {f"cp_a_{t}": a[0]}, t, lambda: np.repeat(a, n), True


ELEMENTWISE = of("binary") + of("compare") + of("unary") + of("cast") + of("where") + of("fill")


@pytest.mark.parametrize("name", ELEMENTWISE)
@capped(60)
@given(n=st.integers(1, 200), seed=SEEDS, kind=KINDS)
def test_elementwise(h: hx.Harness, kernels: Any, name: str, n: int, seed: int, kind: str) -> None:
    rng = np.random.default_rng(seed)
    arrays, scalars, out_t, want, payload = elementwise_case(name, NAMES[name], rng, n, kind)
    got, _ = run(h, name, out_t, n, arrays, scalars, {"n": n})
    assert_same(got, want(), payload, name)


@pytest.mark.parametrize("name", [n for n in of("binary") + of("compare") if n.endswith("v_v_v")])
def test_binary_special_pairs(h: hx.Harness, kernels: Any, name: str) -> None:
    """Every pair of special values, in one array of len(SPECIALS)**2 elements."""
    t, to = types_of(name)
    s = SPECIALS[t]
    a = np.repeat(s, len(s))
    b = np.tile(s, len(s))
    fn, payload = model(name)
    got, _ = run(h, name, to, len(a), {f"cp_va_{t}": a, f"cp_vb_{t}": b}, {}, {"n": len(a)})
    with np.errstate(all="ignore"):
        want = np.asarray(fn(a, b)).astype(got.dtype)
    assert_same(got, want, payload, name)


@pytest.mark.parametrize("name", of("unary") + of("cast"))
def test_unary_specials(h: hx.Harness, kernels: Any, name: str) -> None:
    ti, to = types_of(name)
    a = SPECIALS[ti]
    fn, payload = model(name)
    got, _ = run(h, name, to, len(a), {f"cp_va_{ti}": a}, {}, {"n": len(a)})
    with np.errstate(all="ignore"):
        want = np.asarray(fn(a)).astype(DT[to])
    assert_same(got, want, payload, name)


def test_casts_out_of_range_and_nan(h: hx.Harness) -> None:
    a = np.array([np.nan, -np.nan, np.inf, -np.inf, 2147483648.0, -2147483904.0, 2147483520.0,
                  -2147483648.0, 1e20, -1e20, -0.0, 0.99999994, -0.99999994, 1.5, -1.5],
                 dtype=np.float32)
    got, _ = run(h, "toi32_f32__v_v", "i32", len(a), {"cp_va_f32": a}, {}, {"n": len(a)})
    assert got.tolist() == [0, 0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 2147483520,
                            -(2**31), 2**31 - 1, -(2**31), 0, 0, 0, 1, -1]
    d = np.array([np.nan, np.inf, -np.inf, 2147483647.0, 2147483647.99, 2147483648.0,
                  -2147483648.0, -2147483648.99, -2147483649.0, 1e300, -0.0, -1.5],
                 dtype=np.float64)
    got, _ = run(h, "toi32_f64__v_v", "i32", len(d), {"cp_va_f64": d}, {}, {"n": len(d)})
    assert got.tolist() == [0, 2**31 - 1, -(2**31), 2**31 - 1, 2**31 - 1, 2**31 - 1, -(2**31),
                            -(2**31), -(2**31), 2**31 - 1, 0, -1]
    got, _ = run(h, "tobool_f32__v_v", "i32", len(a), {"cp_va_f32": a}, {}, {"n": len(a)})
    assert got.tolist() == [1] * 10 + [0] + [1] * 4
    big = np.array([np.inf, -np.inf, 1e300, -1e300, 3.4028235677973366e38, 1e-300, np.nan],
                   dtype=np.float64)
    got, _ = run(h, "tof32_f64__v_v", "f32", len(big), {"cp_va_f64": big}, {}, {"n": len(big)})
    with np.errstate(over="ignore"):
        assert_same(got, big.astype(np.float32), False, "tof32_f64")


def in_place_cases() -> list[tuple[str, str]]:
    """(stencil, role) where out can be the same memory as the array of that role: the role is
    an array operand (form v) of the out array's element type."""
    cases = []
    for name in ELEMENTWISE:
        _, _, forms = parse(name)
        family = NAMES[name]
        roles = {"binary": "ab", "compare": "ab", "unary": "a", "cast": "a", "where": "cab",
                 "fill": ""}[family]
        t, out_t = types_of(name)
        for i, role in enumerate(roles):
            in_t = "i32" if role == "c" else t
            if forms[1 + i] == "v" and in_t == out_t:
                cases.append((name, role))
    return cases


@pytest.mark.parametrize(("name", "role"), in_place_cases())
def test_elementwise_in_place(kernels: Any, name: str, role: str) -> None:
    """out bound to the same memory as the a (b, c) array: the result is the same."""
    family = NAMES[name]
    out_t = types_of(name)[1]
    h = aliased(role)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(1, 200))
        arrays, scalars, _, want, payload = elementwise_case(name, family, rng, n, "mixed")
        got, _ = run(h, name, out_t, n, arrays, scalars, {"n": n})
        assert_same(got, want(), payload, f"{name} in place on {role}")


# ---------------------------------------------------------------------------- reductions

def check_reduction(h: hx.Harness, name: str, a: Array, b: Array | None = None) -> None:
    op, t, forms = parse(name)
    dest = DEST[(t, forms[0])]
    arrays = {f"cp_va_{t}": a, **({f"cp_vb_{t}": b} if b is not None else {})}
    _, regs = run(h, name, None, 0, arrays, {}, {"n": len(a)}, dest=dest)
    combine, payload = reduce_op(op, t)
    with np.errstate(all="ignore"):
        elems = (a * b) if op == "dot" else a
        want = lane_reduce(elems[None, :], combine)
    assert_same(np.asarray([getattr(regs, dest)]), want, payload, f"{name} n={len(a)}")


@pytest.mark.parametrize("name", of("reduce"))
@capped(150)
@given(n=st.integers(1, 200), seed=SEEDS, kind=KINDS)
def test_reduction(hr: hx.Harness, name: str, n: int, seed: int, kind: str) -> None:
    _, t, _ = parse(name)
    rng = np.random.default_rng(seed)
    a = random_values(rng, t, n, kind)
    b = random_values(rng, t, n, kind) if name.startswith("dot") else None
    check_reduction(hr, name, a, b)


@pytest.mark.parametrize("name", of("reduce"))
def test_reduction_every_length(hr: hx.Harness, name: str) -> None:
    """n = 1..40: every lane count and tail length, with values whose order matters."""
    _, t, _ = parse(name)
    rng = np.random.default_rng(7)
    for n in range(1, 41):
        for kind in ("normal", "special", "bits"):
            a = random_values(rng, t, n, kind)
            b = random_values(rng, t, n, kind) if name.startswith("dot") else None
            check_reduction(hr, name, a, b)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_reduction_special_placements(hr: hx.Harness, t: str) -> None:
    """-0.0 sums stay -0.0 (no +0.0 start), NaNs and infinities at every position, distinct NaN
    payloads in min/max (the first NaN in lane and tree order wins, as in the model)."""
    dt = DT[t]
    for n in (1, 2, 3, 7, 8, 9, 15, 16, 17, 33):
        zeros = np.full(n, -0.0, dtype=dt)
        for name in (f"rsum_{t}__0_v", f"rmin_{t}__1_v", f"rmax_{t}__0_v"):
            check_reduction(hr, name, zeros)
        check_reduction(hr, f"dot_{t}__1_v_v", zeros, np.ones(n, dtype=dt))
        for pos in range(n):
            for special in (np.nan, np.inf, -np.inf, -0.0):
                a = np.arange(1, n + 1, dtype=dt)
                a[pos] = special
                for name in (f"rsum_{t}__0_v", f"rmin_{t}__0_v", f"rmax_{t}__1_v"):
                    check_reduction(hr, name, a)
        payloads = (f32_bits if t == "f32" else f64_bits)(
            *([0x7FC00001 + i for i in range(n)] if t == "f32"
              else [0x7FF8000000000001 + i for i in range(n)]))
        for name in (f"rmin_{t}__0_v", f"rmax_{t}__0_v"):
            check_reduction(hr, name, payloads)
            mixed = np.where(np.arange(n) % 3 == 1, payloads, np.arange(n, dtype=dt))
            check_reduction(hr, name, mixed.astype(dt))


def test_int_sum_wraps(hr: hx.Harness) -> None:
    a = np.full(100, 2**31 - 1, dtype=np.int32)
    check_reduction(hr, "rsum_i32__0_v", a)
    _, regs = run(hr, "rsum_i32__1_v", None, 0, {"cp_va_i32": a}, {}, {"n": 100}, dest="i1")
    assert int(regs.i1) == int(wrap32(100 * (2**31 - 1)))
    _, regs = run(hr, "dot_i32__0_v_v", None, 0, {"cp_va_i32": a, "cp_vb_i32": a}, {},
                  {"n": 100}, dest="i0")
    assert int(regs.i0) == int(wrap32(100 * wrap32((2**31 - 1) ** 2).item()))


def test_lane_model_examples() -> None:
    """The model itself, on cases worked out by hand."""
    def r(xs: list[float]) -> float:
        return float(lane_reduce(np.array([xs], dtype=np.float64), np.add)[0])
    assert r([5.0]) == 5.0
    assert np.signbit(r([-0.0, -0.0, -0.0]))
    # n = 3: lanes 0, 1, 2; ((e0 + e1) + e2)
    assert r([1e16, 1.0, -1e16]) == 0.0
    assert r([1.0, 1e16, -1e16]) == 0.0
    # n = 9: lane 0 = e0 + e8 first, then the tree
    assert r([1e16] + [0.0] * 7 + [1.0]) == 1e16
    xs = [float(i) for i in range(1, 20)]
    lanes = [sum(xs[lane::8]) for lane in range(8)]
    want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) +
                                                              (lanes[6] + lanes[7]))
    assert r(xs) == want
    # n = 5: (0,1)(2,3)(4) -> ((01 + 23) + 4)
    big = [1e16, 1.0, 1.0, 1.0, -1e16]
    assert r(big) == ((1e16 + 1.0) + (1.0 + 1.0)) + -1e16


# ---------------------------------------------------------------------------- matrices

def check_matrix(h: hx.Harness, name: str, n: int, k: int, j: int, a: Array, b: Array) -> None:
    op, t, _ = parse(name)
    with np.errstate(all="ignore"):
        if op == "matvec":   # a (n x k) @ b (k)
            prods = a.reshape(n, k) * b[None, :]
            want = lane_reduce(prods, np.add)
            out_n = n
        elif op == "vecmat":  # a (k) @ b (k x j)
            prods = (a[:, None] * b.reshape(k, j)).T
            want = lane_reduce(prods, np.add)
            out_n = j
        else:                 # a (n x k) @ b (k x j)
            am, bm = a.reshape(n, k), b.reshape(k, j)
            prods = (am[:, None, :] * bm.T[None, :, :]).reshape(n * j, k)
            want = lane_reduce(prods, np.add)
            out_n = n * j
    got, _ = run(h, name, t, out_n, {f"cp_va_{t}": a, f"cp_vb_{t}": b}, {},
                 {"n": n, "k": k, "j": j})
    assert_same(got, want.astype(DT[t]), t == "i32", f"{name} n={n} k={k} j={j}")


def matrix_operands(rng: np.random.Generator, name: str, n: int, k: int, j: int, kind: str
                    ) -> tuple[Array, Array]:
    op, t, _ = parse(name)
    size_a = {"matvec": n * k, "vecmat": k, "matmul": n * k}[op]
    size_b = {"matvec": k, "vecmat": k * j, "matmul": k * j}[op]
    return random_values(rng, t, size_a, kind), random_values(rng, t, size_b, kind)


@pytest.mark.parametrize("name", of("matrix"))
@capped(80)
@given(n=st.integers(1, 12), k=st.integers(1, 40), j=st.integers(1, 12), seed=SEEDS,
       kind=KINDS)
def test_matrix(hr: hx.Harness, name: str, n: int, k: int, j: int, seed: int, kind: str) -> None:
    a, b = matrix_operands(np.random.default_rng(seed), name, n, k, j, kind)
    check_matrix(hr, name, n, k, j, a, b)


@pytest.mark.parametrize("name", of("matrix"))
def test_matrix_shapes(hr: hx.Harness, name: str) -> None:
    """Every inner dimension 1..20 and column counts around the block widths."""
    rng = np.random.default_rng(3)
    for k in range(1, 21):
        for n, j in ((1, 1), (3, 5), (2, 8), (1, 9), (4, 2)):
            a, b = matrix_operands(rng, name, n, k, j, "mixed")
            check_matrix(hr, name, n, k, j, a, b)


# ---------------------------------------------------------------------------- ARM rule

def test_no_float32_vector_arithmetic_on_flushing_arm_units() -> None:
    """armv7a NEON and (qemu's) cortex-m55 MVE flush float32 denormals: see cp_array.h."""
    import check_vectorisation as cv

    if cv.OBJDUMP is None:  # a missing tool is a failure, never a skip
        pytest.fail(f"llvm-objdump is not installed: {cv.OBJDUMP_INSTALL}")
    for target in cv.FLUSHING:
        _, bad = cv.analyse(target)
        assert not bad, "\n".join(bad[:20])


def test_denormal_comparisons_on_host(h: hx.Harness) -> None:
    """The IEEE answer the ARM rule protects: 2^-149 is not 0 and not below 0."""
    den = f32_bits(1, 0x80000001)
    zero = np.zeros(2, dtype=np.float32)
    got, _ = run(h, "eq_f32__v_v_v", "i32", 2, {"cp_va_f32": den, "cp_vb_f32": zero}, {},
                 {"n": 2})
    assert got.tolist() == [0, 0]
    got, _ = run(h, "lt_f32__v_v_v", "i32", 2, {"cp_va_f32": den, "cp_vb_f32": zero}, {},
                 {"n": 2})
    assert got.tolist() == [0, 1]



@pytest.mark.parametrize("target", ["armv7a", "aarch64", "rv64"])
def test_emulated_target_matches_host(h: hx.Harness, target: str) -> None:
    """The same stencils on emulated CPUs (unicorn) compute the host's bits; armv7a covers the
    NEON float32 rule above (tools/array_harness/cross_check.py runs every target)."""
    from .support.archs import missing_tools

    problem = missing_tools("unicorn")
    if problem:  # a missing emulator is a failure, never a skip
        pytest.fail(problem)
    import cross_check

    count, bad = cross_check.check_target(target, h)
    assert count > 200
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("t", TYPES)
def test_agrees_with_the_compilers_lane_model(hr: hx.Harness, t: str) -> None:
    """copapy.graph.lanes (the order the compiler folds and unpacks with) gives the same bits as
    the stencils, for reductions and matrix products."""
    from copapy.graph import lanes

    rng = np.random.default_rng(11)
    payload = t == "i32"
    for n in (*range(1, 20), 64, 65, 131):
        a = random_values(rng, t, n, "mixed")
        b = random_values(rng, t, n, "mixed")
        for op, name in (("sum", "rsum"), ("min", "rmin"), ("max", "rmax")):
            _, regs = run(hr, f"{name}_{t}__0_v", None, 0, {f"cp_va_{t}": a}, {}, {"n": n},
                          dest=DEST[(t, "0")])
            assert_same(np.asarray([getattr(regs, DEST[(t, "0")])]),
                        np.asarray([lanes.np_reduce(np, a, op)]), payload or op != "sum",
                        f"{name}_{t} n={n}")
        _, regs = run(hr, f"dot_{t}__1_v_v", None, 0, {f"cp_va_{t}": a, f"cp_vb_{t}": b}, {},
                      {"n": n}, dest=DEST[(t, "1")])
        assert_same(np.asarray([getattr(regs, DEST[(t, "1")])]),
                    np.asarray([lanes.np_dot(np, a, b)]), payload, f"dot_{t} n={n}")
    for n, k, j in ((3, 9, 5), (1, 17, 4), (6, 8, 1), (2, 33, 7)):
        am = random_values(rng, t, n * k, "normal").reshape(n, k)
        bm = random_values(rng, t, k * j, "normal").reshape(k, j)
        v = random_values(rng, t, k, "normal")
        for name, arrays, want in (
                ("matvec", {f"cp_va_{t}": am.ravel(), f"cp_vb_{t}": v}, lanes.np_matvec(np, am, v)),
                ("vecmat", {f"cp_va_{t}": v, f"cp_vb_{t}": bm.ravel()}, lanes.np_vecmat(np, v, bm)),
                ("matmul", {f"cp_va_{t}": am.ravel(), f"cp_vb_{t}": bm.ravel()},
                 lanes.np_matmul(np, am, bm))):
            want = np.asarray(want).ravel()
            got, _ = run(hr, f"{name}_{t}__v_v_v", t, len(want), arrays, {},
                         {"n": n, "k": k, "j": j})
            assert_same(got, want, payload, f"{name}_{t} {n}x{k}x{j}")
