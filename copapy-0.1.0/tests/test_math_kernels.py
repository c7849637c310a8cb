"""Tests for the deterministic math kernels (stencils/math, cp_math.h).

Uses tools/measure_ulp.py in quick mode.  A missing C compiler makes these
tests fail (the kernels cannot be checked), they are never skipped.
"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
)
import build_stencils as bs
import measure_ulp as mu

F32_BOUND = mu.BOUND_F32
F64_BOUND = mu.BOUND_F64
NAN32 = 0x7FC00000
NAN64 = 0x7FF8000000000000


@pytest.fixture(scope="module", autouse=True)
def lib():
    return mu.build()


def f(name, *args):
    """Evaluate one kernel on scalars, return a numpy scalar."""
    return mu.evaluate(name, *[np.array([a]) for a in args])[0]


def bits(v):
    v = np.asarray(v)
    return int(v.view(np.uint32 if v.dtype == np.float32 else np.uint64))


def same(a, b):
    """bitwise equal (canonical NaN required when b is NaN)"""
    a = np.asarray(a)
    if np.isnan(b):
        return bits(a) == (NAN32 if a.dtype == np.float32 else NAN64)
    b = np.asarray(b, dtype=a.dtype)
    return bits(a) == bits(b)


# ---------------------------------------------------------------- ulp bounds
@pytest.mark.parametrize("row", mu.ROWS)
def test_ulp_bound_f32(row):
    r = mu.measure_f32(row, 50_000, np.random.default_rng(sum(row.encode())))
    assert r["max"] <= F32_BOUND, r


@pytest.mark.parametrize("row", mu.ROWS)
def test_ulp_bound_f64(row):
    r = mu.measure_f64(row, 1_000, np.random.default_rng(sum(row.encode())))
    assert r["max"] <= F64_BOUND, r


# ---------------------------------------------------------------- special values
def test_special_values_against_numpy_f32():
    fails = mu.special_values(32)
    assert not fails, "\n".join(fails[:30])


def test_special_values_against_numpy_f64():
    fails = mu.special_values(64)
    assert not fails, "\n".join(fails[:30])


INF, NAN = math.inf, math.nan
PI, PIO2, PIO4 = math.pi, math.pi / 2, math.pi / 4
EXPLICIT = [
    # (kernel, args, expected); expected compared bitwise (after rounding to the type)
    ("sin", (-0.0,), -0.0), ("sin", (0.0,), 0.0), ("sin", (INF,), NAN), ("sin", (NAN,), NAN),
    ("cos", (-0.0,), 1.0), ("cos", (-INF,), NAN), ("tan", (-0.0,), -0.0), ("tan", (INF,), NAN),
    ("asin", (-0.0,), -0.0), ("asin", (2.0,), NAN), ("asin", (1.0,), PIO2),
    ("asin", (-1.0,), -PIO2),
    ("acos", (1.0,), 0.0), ("acos", (-1.0,), PI), ("acos", (1.5,), NAN), ("acos", (NAN,), NAN),
    ("atan", (-0.0,), -0.0), ("atan", (INF,), PIO2), ("atan", (-INF,), -PIO2),
    ("atan", (NAN,), NAN),
    ("atan2", (0.0, 0.0), 0.0), ("atan2", (-0.0, 0.0), -0.0), ("atan2", (0.0, -0.0), PI),
    ("atan2", (-0.0, -0.0), -PI), ("atan2", (0.0, -1.0), PI), ("atan2", (-0.0, -1.0), -PI),
    ("atan2", (1.0, 0.0), PIO2), ("atan2", (-1.0, -0.0), -PIO2), ("atan2", (INF, INF), PIO4),
    ("atan2", (-INF, -INF), -3 * PIO4), ("atan2", (1.0, INF), 0.0), ("atan2", (-1.0, INF), -0.0),
    ("atan2", (1.0, -INF), PI), ("atan2", (INF, 5.0), PIO2), ("atan2", (NAN, 1.0), NAN),
    ("exp", (-INF,), 0.0), ("exp", (INF,), INF), ("exp", (0.0,), 1.0), ("exp", (-0.0,), 1.0),
    ("exp", (1000.0,), INF), ("exp", (-1000.0,), 0.0), ("exp", (NAN,), NAN),
    ("log", (0.0,), -INF), ("log", (-0.0,), -INF), ("log", (-1.0,), NAN), ("log", (1.0,), 0.0),
    ("log", (INF,), INF), ("log", (-INF,), NAN), ("log", (NAN,), NAN),
    ("pow", (NAN, 0.0), 1.0), ("pow", (NAN, -0.0), 1.0), ("pow", (1.0, NAN), 1.0),
    ("pow", (1.0, INF), 1.0),
    ("pow", (-1.0, INF), 1.0), ("pow", (-1.0, -INF), 1.0), ("pow", (NAN, 1.0), NAN),
    ("pow", (2.0, NAN), NAN),
    ("pow", (-0.0, -3.0), -INF), ("pow", (-0.0, -2.0), INF), ("pow", (0.0, -3.0), INF),
    ("pow", (-0.0, -0.5), INF),
    ("pow", (-0.0, 3.0), -0.0), ("pow", (-0.0, 2.0), 0.0), ("pow", (-0.0, 0.5), 0.0),
    ("pow", (0.0, -INF), INF),
    ("pow", (0.5, -INF), INF), ("pow", (2.0, -INF), 0.0), ("pow", (0.5, INF), 0.0),
    ("pow", (-2.0, INF), INF),
    ("pow", (-INF, 3.0), -INF), ("pow", (-INF, 2.0), INF), ("pow", (-INF, -3.0), -0.0),
    ("pow", (-INF, -2.0), 0.0),
    ("pow", (INF, -1.0), 0.0), ("pow", (INF, 0.5), INF), ("pow", (-8.0, 1.0 / 3.0), NAN),
    ("pow", (-2.0, 3.0), -8.0),
    ("pow", (-2.0, 2.0), 4.0), ("pow", (2.0, 10.0), 1024.0), ("pow", (10.0, 400.0), INF),
    ("pow", (-10.0, 401.0), -INF),
    ("pow", (10.0, -400.0), 0.0), ("pow", (-10.0, -401.0), -0.0), ("pow", (4.0, 0.5), 2.0),
    ("tanh", (-0.0,), -0.0), ("tanh", (INF,), 1.0), ("tanh", (-INF,), -1.0), ("tanh", (NAN,), NAN),
    ("sqrt", (-0.0,), -0.0), ("sqrt", (-1.0,), NAN), ("sqrt", (INF,), INF), ("sqrt", (-INF,), NAN),
    ("sqrt", (4.0,), 2.0),
    ("floor", (-0.0,), -0.0), ("floor", (-0.5,), -1.0), ("floor", (0.5,), 0.0),
    ("floor", (-INF,), -INF),
    ("floor", (NAN,), NAN), ("floor", (-1.5,), -2.0),
    ("ceil", (-0.5,), -0.0), ("ceil", (0.2,), 1.0), ("ceil", (-0.0,), -0.0), ("ceil", (INF,), INF),
    ("ceil", (1.5,), 2.0),
    ("trunc", (-0.7,), -0.0), ("trunc", (2.9,), 2.0), ("trunc", (-2.9,), -2.0),
    ("trunc", (NAN,), NAN),
    ("round", (0.5,), 0.0), ("round", (1.5,), 2.0), ("round", (2.5,), 2.0),
    ("round", (-0.5,), -0.0),
    ("round", (-2.5,), -2.0), ("round", (-0.4,), -0.0), ("round", (3.5,), 4.0),
    ("round", (-INF,), -INF),
    ("fmod", (5.5, 2.0), 1.5), ("fmod", (-5.5, 2.0), -1.5), ("fmod", (5.5, -2.0), 1.5),
    ("fmod", (-4.0, 2.0), -0.0),
    ("fmod", (INF, 2.0), NAN), ("fmod", (1.0, 0.0), NAN), ("fmod", (1.0, INF), 1.0),
    ("fmod", (-0.0, 3.0), -0.0),
    ("fmod", (NAN, 1.0), NAN), ("fmod", (1.0, NAN), NAN),
    # hypot: C99 F.9.4.3 (an infinity wins over NaN), exact Pythagorean triples scaled by powers
    # of two (subnormal and, for float32, overflowing), no overflow or underflow in between
    ("hypot", (INF, NAN), INF), ("hypot", (NAN, -INF), INF), ("hypot", (-INF, 1.0), INF),
    ("hypot", (NAN, 1.0), NAN), ("hypot", (1.0, NAN), NAN), ("hypot", (0.0, -0.0), 0.0),
    ("hypot", (-0.0, -0.0), 0.0), ("hypot", (-7.5, 0.0), 7.5), ("hypot", (-3.0, 4.0), 5.0),
    ("hypot", (3 * 2.0**100, -4 * 2.0**100), 5 * 2.0**100),
    ("hypot", (3 * 2.0**-140, 4 * 2.0**-140), 5 * 2.0**-140),
    ("hypot", (3 * 2.0**126, 4 * 2.0**126), 5 * 2.0**126),
    ("hypot", (2.0**-149, -0.0), 2.0**-149), ("hypot", (1e300, 2.0**-149), 1e300),
    # log1p: C99 F.9.3.9, and x itself for tiny x (both signs, subnormals)
    ("log1p", (0.0,), 0.0), ("log1p", (-0.0,), -0.0), ("log1p", (-1.0,), -INF),
    ("log1p", (-1.5,), NAN), ("log1p", (-INF,), NAN), ("log1p", (INF,), INF),
    ("log1p", (NAN,), NAN), ("log1p", (2.0**-149,), 2.0**-149),
    ("log1p", (-(2.0**-149),), -(2.0**-149)), ("log1p", (2.0**-30,), 2.0**-30 - 2.0**-61),
    # expm1: C99 F.9.3.6, -1 for large negative x, x itself for tiny x
    ("expm1", (0.0,), 0.0), ("expm1", (-0.0,), -0.0), ("expm1", (INF,), INF),
    ("expm1", (-INF,), -1.0), ("expm1", (NAN,), NAN), ("expm1", (1000.0,), INF),
    ("expm1", (-1000.0,), -1.0), ("expm1", (-50.0,), -1.0), ("expm1", (2.0**-149,), 2.0**-149),
    ("expm1", (-(2.0**-149),), -(2.0**-149)), ("expm1", (2.0**-30,), 2.0**-30 + 2.0**-61),
]


@pytest.mark.parametrize("prec", [32, 64])
@pytest.mark.parametrize("name,args,expected", EXPLICIT)
def test_explicit_special(name, args, expected, prec):
    dt = np.float32 if prec == 32 else np.float64
    kn = name + ("f" if prec == 32 else "")
    with np.errstate(all="ignore"):
        y = f(kn, *[dt(a) for a in args])
        exp = np.asarray(expected, dtype=np.float64).astype(dt)
    assert same(y, exp), (
        f"{kn}{args!r} = {float(y)!r} (0x{bits(y):x}), expected {float(exp)!r}"
    )


#: huge and tiny arguments of the kernels where scaling or cancellation is the difficulty
EXTREMES = {
    "hypot": [(1e308, 1e308), (1.7e308, 1.7e308), (1e-308, 1e-308), (5e-324, 5e-324),
              (1e308, 1e-308), (3e38, 3e38), (1e-40, 1e-45), (1e-45, 3e-45), (1e20, 1e-20),
              (1.0, 1e-8), (0.7, 0.7), (1e-200, 1e-210)],
    "log1p": [(1e-300,), (-1e-300,), (1e-17,), (-1e-17,), (1e-8,), (-1e-8,), (-0.9999999,),
              (-0.5,), (0.5,), (1e300,), (3e38,), (5e-324,), (1e-45,), (-0.29,), (0.41,)],
    "expm1": [(1e-300,), (-1e-300,), (1e-17,), (-1e-17,), (1e-8,), (-1e-8,), (0.3,), (-0.3,),
              (0.7,), (-0.7,), (709.7,), (88.7,), (-745.0,), (-38.0,), (-17.0,), (5e-324,),
              (1e-45,), (30.0,), (-30.0,)],
}


@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_extreme_arguments(name):
    """float64 against mpmath, float32 against NumPy's float64, in ulps."""
    for args in EXTREMES[name]:
        y = float(f(name, *args))
        e = mu._mp_err_chunk((name, [np.array([a]) for a in args], np.array([y])))[0]
        assert e <= F64_BOUND, (name, args, y, e)
        with np.errstate(all="ignore"):
            a32 = [np.float32(a) for a in args]
            ref = mu.f32_ref(name, *[np.array([a]) for a in a32])[0]
        assert _ulp_err32(f(name + "f", *a32), ref) <= F32_BOUND, (name, a32)


def test_fmod_exact_and_subnormal():
    rng = np.random.default_rng(7)
    for dt in (np.float32, np.float64):
        x = mu.sample_sym(
            rng, np.finfo(dt).tiny * np.finfo(dt).eps, np.finfo(dt).max, 50_000, dt, 0.0
        )
        y = mu.sample_sym(rng, np.finfo(dt).tiny * np.finfo(dt).eps, 1e-30, 50_000, dt, 0.0)
        got = mu.evaluate("fmodf" if dt == np.float32 else "fmod", x, y)
        with np.errstate(all="ignore"):
            ref = np.fmod(x, y)
        assert np.array_equal(got, ref, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(ref))


# ---------------------------------------------------------------- software sqrt
def test_soft_sqrt_bit_exact():
    rng = np.random.default_rng(3)
    b = rng.integers(0, 0x7F800000, size=2_000_000, endpoint=True, dtype=np.uint64).astype(
        np.uint32
    )
    b[:64] = np.arange(64)  # subnormals
    x = b.view(np.float32)
    assert np.array_equal(mu.evaluate("sqrtf_soft", x).view(np.uint32), np.sqrt(x).view(np.uint32))
    assert np.array_equal(mu.evaluate("sqrtf", x).view(np.uint32), np.sqrt(x).view(np.uint32))
    b = rng.integers(0, 0x7FF0000000000000, size=300_000, endpoint=True, dtype=np.uint64)
    b[:64] = np.arange(64)
    x = b.view(np.float64)
    assert np.array_equal(mu.evaluate("sqrt_soft", x).view(np.uint64), np.sqrt(x).view(np.uint64))
    for name in ("sqrtf_soft", "sqrt_soft"):
        dt = np.float32 if name == "sqrtf_soft" else np.float64
        for v, e in ((-1.0, NAN), (-0.0, -0.0), (INF, INF), (NAN, NAN), (0.0, 0.0)):
            assert same(f(name, dt(v)), e)


# ---------------------------------------------------------------- property tests
f32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


def _ulp_err32(got, ref):
    return float(mu.err_f32(np.array([got], np.float32), np.array([ref], np.float64))[0])


#: the approximated kernels of cp_math.h (CP_KERNELS) and their arities
APPROX = [(n, a) for n, a, acc in mu.kernel_list() if acc == "approx"]
f32_args = st.floats(min_value=-100, max_value=100, width=32) | f32s
f64_args = st.floats(min_value=-1e9, max_value=1e9) | st.floats(allow_nan=False,
                                                                allow_infinity=False)


@pytest.mark.parametrize("name,arity", APPROX)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_prop_f32_against_numpy(name, arity, data):
    """Any finite float32 arguments: within the bound of NumPy's float64 value (NaN where
    NumPy has NaN, the same infinities)."""
    args = [np.float32(data.draw(f32_args)) for _ in range(arity)]
    ref = mu.f32_ref(name, *[np.array([a]) for a in args])
    assert _ulp_err32(f(name + "f", *args), ref[0]) <= F32_BOUND, (name, args)


@pytest.mark.parametrize("name,arity", APPROX)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_prop_f64_against_mpmath(name, arity, data):
    """Any finite float64 arguments: within the bound of mpmath (at 120 bits); the C99 special
    cases (a zero argument, a NaN, infinite or zero result) exactly as NumPy."""
    args = [data.draw(f64_args) for _ in range(arity)]
    y = f(name, *args)
    with np.errstate(all="ignore"):
        numpy_ref = mu.NP_REF[name](*args)
    if 0.0 in args or not np.isfinite(numpy_ref) or numpy_ref == 0:
        assert same(y, numpy_ref), (name, args, y, numpy_ref)
        return
    e = mu._mp_err_chunk((name, [np.array([a]) for a in args], np.array([y])))[0]
    assert e <= F64_BOUND, (name, args, y, e)


# ---------------------------------------------------------------- freestanding build
def test_no_external_calls_on_single_precision_fpu_targets(monkeypatch):
    """The kernels compiled exactly as the stencil build compiles them (tools/build_stencils.py
    with targets/*.toml) call nothing: float32 kernels no function at all, float64 kernels only
    the compiler's soft-double helpers where the target has no FP64."""
    targets = ("armv6", "cortex-m4", "rv32")  # in the order of the report (target ids)
    commands = []
    real_run = subprocess.run

    def spy(cmd, *args, **kwargs):
        commands.append(list(cmd))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(mu.subprocess, "run", spy)
    ok, report = mu.check_targets(verbose=False, targets=set(targets))
    monkeypatch.undo()
    assert ok, report
    assert [ln.split()[0] for ln in report.splitlines()] == list(targets), report
    for name in targets:
        flags = " ".join(bs.target_flags(bs.load_target(name)))
        compiled = [c for c in commands if flags in " ".join(c)]
        assert len(compiled) == len(mu.kernel_sources()), f"{name}: not built with {flags}"


# ---------------------------------------------------------------- kernel templates
KERNEL_FIT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                          "kernel_fit")
sys.path.insert(0, KERNEL_FIT)
import assemble  # noqa: E402


def test_kernel_sources_are_their_assembled_templates():
    """Every kernel source with fitted constants is its template (tools/kernel_fit/templates)
    with the committed constants (coefs.h, tables.h) pasted in: a hand edit of the source
    fails here."""
    names = assemble.templates()
    assert names and all(os.path.join(mu.MATH_DIR, n) in mu.kernel_sources() for n in names)
    bad = assemble.differences()
    assert not bad, (f"{bad} differ from their templates: edit tools/kernel_fit/templates/"
                     "<name>.c.in and run python tools/kernel_fit/assemble.py")


def test_sources_without_template_have_no_fitted_constants():
    fitted = re.compile(r"^#define \w+ -?0x1\.[0-9a-f]+p[-+]?\d+f?\s*$", re.M)
    for src in mu.kernel_sources():
        name = os.path.basename(src)
        if name not in assemble.templates():
            with open(src) as fh:
                assert not fitted.search(fh.read()), f"{name} has fitted constants: make a template"


def test_generated_tables_are_reproducible(tmp_path):
    """gen_tab.py (seconds, unlike the fits of gen_coef.py) gives the committed tables.h."""
    proc = subprocess.run([sys.executable, os.path.join(KERNEL_FIT, "gen_tab.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(KERNEL_FIT, "tables.h")) as fh:
        assert (tmp_path / "tables.h").read_text() == fh.read()
