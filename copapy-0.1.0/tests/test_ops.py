"""Every registered operation, every operand type: machine code against the NumPy reference.

Exact operations must match bit for bit (special values included); the approximated
functions must be within the documented ulp bound of NumPy's float64 result (docs/math.md)
and bit-identical to the host build of our kernels.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import copapy as cp
from copapy.graph import build
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph
from copapy.value import Value

from .support.checks import same_bits

SPECIALS = {
    "float32": [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.5, 1e-40, 3.4e38, float("inf"),
                float("-inf"), float("nan"), 1e20, -7.0, 100.0],
    "float64": [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.5, 1e-310, 1.7e308, float("inf"),
                float("-inf"), float("nan"), 1e200, -7.0, 100.0],
    "int32": [0, 1, -1, 2, -2, 7, -7, 31, 32, 33, -32, 2**31 - 1, -(2**31), 1000, -1000],
    "bool": [False, True],
}
DTYPES = {"float32": cp.float32, "float64": cp.float64, "int32": cp.int32, "bool": cp.bool_}
#: documented max ulp error of the kernels (docs/math.md) with a margin for NumPy's own error
ULP_BOUND = {"float32": 4, "float64": 8}


def scalars(dtype: str) -> st.SearchStrategy[object]:
    special = st.sampled_from(SPECIALS[dtype])
    if dtype == "float32":
        return special | st.floats(width=32)
    if dtype == "float64":
        return special | st.floats()
    if dtype == "int32":
        return special | st.integers(-(2**31), 2**31 - 1)
    return special


def cases() -> list[tuple[str, str]]:
    """(operation, operand type) pairs the type rules accept."""
    out = []
    for name, spec in sorted(REGISTRY.items()):
        if spec.shape_rule != "elementwise":
            continue  # array operations: tests/test_arrays.py
        for dtype in DTYPES:
            try:
                build.apply(name, *[build.fresh_input_for_test(DTYPES[dtype])] * spec.arity)
            except (TypeError, build.ShapeOrTypeError):
                continue
            out.append((name, dtype))
    return out


class Compiled:
    """One operation compiled once; many inputs run through it."""

    def __init__(self, name: str, dtype: str) -> None:
        spec = REGISTRY[name]
        self.inputs = [cp.value(SPECIALS[dtype][1], DTYPES[dtype]) for _ in range(spec.arity)]
        self.out = Value(build.apply(name, *(v.node for v in self.inputs)))
        self.tg = cp.LocalTarget()
        self.tg.compile(self.out)
        self.spec = spec

    def __call__(self, args: list[object]) -> object:
        for v, a in zip(self.inputs, args, strict=True):
            self.tg.write(v, a)
        self.tg.run()
        return self.tg.read(self.out)

    def reference(self, args: list[object], kernels: bool) -> object:
        env = {v.node: a for v, a in zip(self.inputs, args, strict=True)}
        return evaluate_graph([self.out.node], env, kernels=kernels)[0]


_compiled: dict[tuple[str, str], Compiled] = {}


def compiled(name: str, dtype: str) -> Compiled:
    if (name, dtype) not in _compiled:
        _compiled[(name, dtype)] = Compiled(name, dtype)
    return _compiled[(name, dtype)]


def ulp_distance(got: float, want: float, dtype: str) -> float:
    ftype = np.float32 if dtype == "float32" else np.float64
    g, w = ftype(got), ftype(want)
    if np.isnan(g) and np.isnan(w):
        return 0.0
    if np.isinf(w) or np.isinf(g):
        return 0.0 if g == w else float("inf")
    ulp = np.spacing(np.abs(w)) if w != 0 else np.spacing(ftype(0))
    return float(abs(np.float64(g) - np.float64(w)) / np.float64(ulp))


CASES = cases()


@pytest.mark.parametrize(("name", "dtype"), CASES, ids=[f"{n}-{d}" for n, d in CASES])
@given(data=st.data())
def test_operation_matches_reference(name: str, dtype: str, data: st.DataObject) -> None:
    op = compiled(name, dtype)
    args = [data.draw(scalars(dtype)) for _ in range(op.spec.arity)]
    got = op(args)
    out_dtype = op.out.dtype.numpy
    exact = op.reference(args, kernels=True)
    assert same_bits(got, exact, out_dtype), f"{name}{tuple(args)} = {got!r}, want {exact!r}"
    if op.spec.approx and op.out.dtype.is_float:
        # NumPy evaluates in float64 from the same operands (after their conversion to the
        # operation's type), the result rounded to the type
        operand_types = [n.dtype.numpy for n in op.out.node.args]
        with np.errstate(all="ignore"):
            wide = op.spec.reference(np, *(np.float64(np.asarray(a, t))
                                           for a, t in zip(args, operand_types, strict=True)))
            numpy_ref = float(np.asarray(wide, dtype=out_dtype))
        if name == "pow" and math.isinf(args[0]) and math.isnan(numpy_ref):  # type: ignore[arg-type]
            numpy_ref = math.pow(float(args[0]), float(args[1]))  # type: ignore[arg-type]  # C99 F.9.4.4
        assert ulp_distance(float(got), numpy_ref, out_dtype) <= ULP_BOUND[out_dtype], (
            f"{name}{tuple(args)} = {got!r}, NumPy float64 says {numpy_ref!r}")


def test_every_operation_is_covered() -> None:
    assert {n for n, _ in CASES} == {n for n, s in REGISTRY.items()
                                     if s.shape_rule == "elementwise"}


class _ArmNumPy:
    """numpy whose maximum/minimum order -0.0 below 0.0 (IEEE 754-2019 maximum, AArch64 FMAX),
    as NumPy 1.24 on aarch64 does (x86 NumPy gives the second operand), and whose float32 ceil
    and floor flush subnormals and sqrt is not correctly rounded, and whose float32
    comparisons and sign flush subnormal operands (NEON), as NumPy 1.24 on armv7."""

    #: float32 loops that run on NEON there: their operands' subnormals are flushed
    FLUSHING = frozenset({"less", "less_equal", "greater", "greater_equal", "equal",
                          "not_equal", "sign"})

    def __getattr__(self, name: str) -> Any:
        if name in self.FLUSHING:
            return lambda *args: getattr(np, name)(*(self._flushed(a) for a in args))
        return getattr(np, name)

    @staticmethod
    def _flushed(a: Any) -> Any:
        a = np.asarray(a)
        if a.dtype != np.float32:
            return a
        return np.where(np.abs(a) < np.finfo(np.float32).tiny, a * np.float32(0), a)

    def ceil(self, a: Any) -> Any:
        return np.ceil(self._flushed(a))

    def floor(self, a: Any) -> Any:
        return np.floor(self._flushed(a))

    @staticmethod
    def sqrt(a: Any) -> Any:  # NEON's estimate, 1 ulp low: sqrt(384) gave 19.595917
        a = np.asarray(a)
        exact = np.sqrt(a)
        return np.nextafter(exact, a.dtype.type(0)) if a.dtype == np.float32 else exact

    @staticmethod
    def maximum(a: Any, b: Any) -> Any:
        return np.where((a == b) & (a == 0), np.where(np.signbit(a), b, a), np.maximum(a, b))

    @staticmethod
    def minimum(a: Any, b: Any) -> Any:
        return np.where((a == b) & (a == 0), np.where(np.signbit(a), a, b), np.minimum(a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["min", "max", "relu"])
def test_min_max_of_signed_zeros_are_the_machine_codes(name: str, dtype: str) -> None:
    """Of two equal zeros min and max give b, as the stencils compute it, on every NumPy: the
    reference (and so constant folding) once used numpy.maximum, whose choice depends on the
    platform, and the aarch64 wheel's test of max(0.0, -0.0) failed."""
    ftype = np.float32 if dtype == "float32" else np.float64
    pairs = [(0.0, -0.0), (-0.0, 0.0), (0.0, 0.0), (-0.0, -0.0)]
    op = compiled(name, dtype)
    for pair in pairs:
        args = [ftype(a) for a in pair[:op.spec.arity]]
        got = ftype(op(list(args)))
        for numpy_like in (np, _ArmNumPy()):
            ref = ftype(op.spec.reference(numpy_like, *(np.asarray(a) for a in args)))
            assert np.signbit(ref) == np.signbit(got), (name, pair, got, ref)
        folded = Value(build.apply(name, *(cp.constant(a, DTYPES[dtype]).node for a in args)))
        assert folded.node.op == "const"
        tg = cp.LocalTarget()
        tg.compile(folded)
        tg.run()
        assert np.signbit(ftype(tg.read(folded))) == np.signbit(got), (name, pair)
    if name == "max":
        assert np.signbit(op([ftype(0.0), ftype(-0.0)]))  # b, not the larger zero


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc"])
def test_rounding_of_subnormals_is_the_machine_codes(name: str) -> None:
    """ceil(1e-40) is 1.0 on every NumPy: the reference (and constant folding) once used
    NumPy's float32 loop, which flushes subnormals on armv7 (the armv7l wheel's test failed)."""
    tiny = np.finfo(np.float32).smallest_subnormal
    op = compiled(name, "float32")
    for x in (np.float32(1e-40), np.float32(-1e-40), tiny, -tiny):
        got = np.float32(op([x]))
        assert got == {"floor": np.floor, "ceil": np.ceil, "round": np.rint,
                       "trunc": np.trunc}[name](np.float64(x))
        for numpy_like in (np, _ArmNumPy()):
            ref = np.float32(op.spec.reference(numpy_like, np.asarray(x)))
            assert ref == got and np.signbit(ref) == np.signbit(got), (name, x, got, ref)


@pytest.mark.parametrize("name", ["lt", "le", "gt", "ge", "eq", "ne", "min", "max", "relu",
                                  "sign", "cast_bool"])
def test_comparisons_of_subnormals_are_the_machine_codes(name: str) -> None:
    """-0.0 != 1e-45 on every NumPy: the references (and constant folding) once compared float32
    values in NumPy's float32 loops, which on armv7 run on NEON and flush subnormals (the
    armv7l wheel's test of packed `!=` failed: the machine code said 1, the reference 0)."""
    tiny = np.finfo(np.float32).smallest_subnormal
    values = [np.float32(v) for v in (0.0, -0.0, tiny, -tiny, 1e-40, -1e-40)]
    op = compiled(name, "float32")
    pairs = [(a, b) for a in values for b in values][:: 1 if op.spec.arity == 2 else 7]
    for pair in pairs:
        args = list(pair[:op.spec.arity])
        got = np.asarray(op(args))
        for numpy_like in (np, _ArmNumPy()):
            ref = np.asarray(op.spec.reference(numpy_like, *(np.asarray(a) for a in args)))
            assert same_bits(ref.astype(got.dtype), got, got.dtype.name), (name, pair, got, ref)
        folded = Value(build.apply(name, *(cp.constant(a, DTYPES["float32"]).node for a in args)))
        assert folded.node.op == "const"
        tg = cp.LocalTarget()
        tg.compile(folded)
        tg.run()
        assert same_bits(np.asarray(tg.read(folded), got.dtype), got, got.dtype.name), (name, pair)


def test_sqrt_reference_is_correctly_rounded() -> None:
    """The float32 sqrt reference is float64's, rounded: NumPy 1.24's float32 loop on armv7
    gave sqrt(384) 1 ulp low, and the armv7l wheel's test of the (exact) machine code failed."""
    op = compiled("sqrt", "float32")
    for x in (384.0, 2.0, 3.0, 1e-40, 3.4e38, 0.1):
        got = np.float32(op([np.float32(x)]))
        assert got == np.float32(np.sqrt(np.float64(np.float32(x))))
        assert np.float32(op.spec.reference(_ArmNumPy(), np.asarray(np.float32(x)))) == got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_copysign_special_values(dtype: str) -> None:
    """copysign is NumPy's bit operation (signed zeros, infinities, subnormals, NaN x keep their
    bits but the sign), except that a NaN y counts as positive: a NaN's sign is payload that CPUs
    choose differently. Machine code and the host build (copapy._kernels) alike."""
    from copapy import _kernels

    ftype = np.float32 if dtype == "float32" else np.float64
    tiny = np.finfo(ftype).smallest_subnormal
    values = [ftype(v) for v in SPECIALS[dtype]] + [-ftype("nan"), tiny, -tiny]
    x, y = cp.value(1.0, DTYPES[dtype]), cp.value(1.0, DTYPES[dtype])
    out = cp.copysign(x, y)
    tg = cp.LocalTarget()
    tg.compile(out)
    for a in values:
        for b in values:
            # (not np.abs: NumPy 1.24 on armv7 keeps a NaN's sign bit in abs)
            want = np.copysign(a, ftype(1.0) if np.isnan(b) else b)
            tg.write(x, a)
            tg.write(y, b)
            tg.run()
            host = _kernels.call("copysign", dtype == "float64", float(a), float(b))
            for got in (tg.read(out), host):
                g = ftype(got)
                assert np.signbit(g) == np.signbit(want), (a, b, got)
                assert same_bits(g, want, dtype), (a, b, got, want)
