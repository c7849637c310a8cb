"""Public API behaviour: types, errors that name the problem, graph simplification."""

from __future__ import annotations

import copy
import math
import pickle
import threading
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.compiler.lower import CompileError
from copapy.runtime.errors import TargetError
from copapy.value import Traced, is_traced

from .support.checks import examples, same_bits


def run(*values: cp.Value) -> list[object]:
    tg = cp.LocalTarget()
    tg.compile(*values)
    tg.run()
    return [tg.read(v) for v in values]


def test_value_types() -> None:
    assert cp.value(1.0).dtype is cp.float32
    assert cp.value(1).dtype is cp.int32
    assert cp.value(True).dtype is cp.bool_
    assert cp.value(1.0, cp.float64).dtype is cp.float64
    assert (cp.value(1) + 2.5).dtype is cp.float32
    assert (cp.value(1) + 2).dtype is cp.int32
    assert (cp.value(True) + 1).dtype is cp.int32
    assert (cp.value(1) / cp.value(2)).dtype is cp.float32
    assert (cp.value(1.0) < 2).dtype is cp.bool_


def test_value_rejects_non_numbers() -> None:
    with pytest.raises(TypeError, match="str"):
        cp.value("a")  # type: ignore[arg-type]
    with pytest.raises(OverflowError, match="int32"):
        cp.value(2**40)
    with pytest.raises(TypeError, match="truncate"):
        cp.value(1.5, cp.int32)
    with pytest.raises(TypeError):
        cp.value(1.0) + "x"  # type: ignore[operator]


def test_truthiness_raises_with_hint() -> None:
    x = cp.value(1.0)
    with pytest.raises(TypeError, match=r"cp\.where"):
        if x > 0:
            pass
    with pytest.raises(TypeError, match=r"cp\.where"):
        bool(x)
    # Python's min/max, and/or and chained comparisons ask for a truth value too: the hint
    # names what computes them on traced values
    with pytest.raises(TypeError, match=r"cp\.max.*min\(\) and max\(\)"):
        max(x, 0.0)
    with pytest.raises(TypeError, match=r"cp\.logical_and.*and / or"):
        _ = (x > 0) and (x < 2)
    with pytest.raises(TypeError, match=r"\(lo < x\) & \(x < hi\)"):
        _ = 0 < x < 2


def test_python_conversions_say_there_is_no_value_yet_and_what_to_do() -> None:
    """int(), float(), round(), math.floor() and formats of a traced value name the problem (no
    Python value until it runs) and the fix (cp.cast, cp.round, reading the result)."""
    x = cp.value(1.5)
    for convert, fix in ((int, r"cp\.cast\(x, cp\.int32\)"), (float, r"cp\.cast\(x, cp\.float32\)"),
                         (round, r"cp\.round\(x\)"), (math.floor, r"cp\.floor\(x\)"),
                         (math.ceil, r"cp\.ceil\(x\)"), (math.trunc, r"cp\.trunc\(x\)"),
                         (lambda v: f"{v:.2f}", r"tg\.read")):
        with pytest.raises(TypeError, match=fix) as info:
            convert(x)
        assert "no Python" in str(info.value) or "not known" in str(info.value)
    with pytest.raises(TypeError, match=r"until the program runs.*cp\.where"):
        [1, 2][x]  # type: ignore[index]
    assert "copapy value" in f"{x}"
    v = cp.vector([1.0, 2.0])
    with pytest.raises(TypeError, match=r"format '\.2f' of a traced copapy Array.*tg\.read"):
        f"{v:.2f}"
    assert "copapy vector" in f"{v}"


def test_int_division_by_zero_is_defined() -> None:
    a, b = cp.value(7), cp.value(0)
    assert run(a // b, a % b) == [0, 0]
    m = cp.value(-(2**31))
    assert run(m // cp.value(-1), m % cp.value(-1)) == [-(2**31), 0]
    assert run(cp.value(-7) // cp.value(2), cp.value(-7) % cp.value(2)) == [-4, 1]


def test_int32_wraps() -> None:
    a = cp.value(2**31 - 1)
    assert run(a + 1, a * 2) == [-(2**31), -2]


def test_float_modulo_follows_python_sign_rule() -> None:
    got = run(cp.value(-7.5) % cp.value(2.0), cp.value(7.5) % cp.value(-2.0))
    assert got == [-7.5 % 2.0, 7.5 % -2.0]


def test_where_selects_without_leaking() -> None:
    x = cp.value(0.0)
    (r,) = run(cp.where(x > 0, cp.log(x), 5.0))
    assert r == 5.0


def test_constant_folding_and_identities() -> None:
    x = cp.value(2.0)
    assert (x * 1).node is x.node
    assert (x + 0).node is x.node
    assert (x - 0).node is x.node
    assert (x / 1).node is x.node
    folded = cp.constant(2.0) * 3 + 1
    assert folded.node.op == "const"
    assert run(x + folded) == [9.0]


def test_cse_merges_equal_subexpressions() -> None:
    a, b = cp.value(1.0), cp.value(2.0)
    assert ((a + b) * 2).node is ((b + a) * 2).node
    assert (a * b).node is (b * a).node
    assert (a - b).node is not (b - a).node


def test_read_write_errors_name_the_problem() -> None:
    x, y = cp.value(1.0), cp.value(2.0)
    z = x + y
    tg = cp.LocalTarget()
    with pytest.raises(TargetError, match="compile"):
        tg.run()
    with pytest.raises(TargetError, match="compile"):
        tg.read(z)
    tg.compile(z)
    with pytest.raises(TargetError, match="not an input"):
        tg.write(z, 1.0)
    with pytest.raises(TargetError, match="not part of the compiled program"):
        tg.read(x * y)
    with pytest.raises(TypeError, match="float32 input"):
        tg.write(x, "1")  # type: ignore[arg-type]
    i = cp.value(3)
    tg.compile(i * 2)
    with pytest.raises(TypeError, match="truncated"):
        tg.write(i, 1.5)
    with pytest.raises(OverflowError):
        tg.write(i, 2**33)
    tg.write(i, np.int32(4))
    tg.run()
    assert tg.read(i * 2) == 8


@pytest.mark.parametrize("n", [3, 100])
def test_array_inputs_are_checked_as_numbers_are(n: int) -> None:
    """Array inputs (packed or not) and their writes raise where one number would, instead of
    wrapping or truncating; bool arrays hold True/False, never another integer."""
    for bad, err in ((np.full(n, 2**40), OverflowError), (np.full(n, 1e20), OverflowError),
                     (np.full(n, 2**32 - 1, np.uint32), OverflowError),
                     (np.full(n, 1.5), TypeError), (np.full(n, np.inf), TypeError)):
        with pytest.raises(err):
            cp.value(bad, cp.int32)
    i = cp.value(np.zeros(n, np.int32), name="i")
    tg = cp.LocalTarget()
    tg.compile(i + 1)
    for bad, err in ((np.full(n, 2**40), OverflowError), (np.full(n, 1e20), OverflowError),
                     (np.full(n, 2.5), TypeError)):
        with pytest.raises(err):
            tg.write(i, bad)
    tg.write(i, np.full(n, 2**31 - 2, np.int64))
    tg.run()
    assert tg.read(i + 1).tolist() == [2**31 - 1] * n

    b = cp.value(np.array([0, 2] * n), cp.bool_)  # by truth value, as cp.value(2, cp.bool_)
    flags = cp.value(np.zeros(n, bool))
    outs = [cp.logical_not(b), b == True, cp.logical_not(flags), flags == True]  # noqa: E712
    tg = cp.LocalTarget()
    tg.compile(*outs)
    with pytest.raises(TypeError, match="True or False"):  # as writing one number
        tg.write(flags, np.full(n, 2))
    tg.write(flags, np.ones(n, np.int64))
    tg.run()
    assert tg.read(outs[0]).tolist() == [True, False] * n
    assert tg.read(outs[1]).tolist() == [False, True] * n
    assert tg.read(outs[2]).tolist() == [False] * n
    assert tg.read(outs[3]).tolist() == [True] * n


def test_named_array_writes_and_feeds_are_checked() -> None:
    i = cp.value(np.zeros(100, np.int32), name="i")
    k = cp.value(0, name="k")
    prog = cp.save("/tmp/copapy_named_array_write.cpimg", cp.Task(i + k, period=1e-3),
                   names={"i": i, "k": k})
    tg = cp.LocalTarget()
    tg.deploy(prog)
    with pytest.raises(TypeError, match="truncated"):
        tg.write("i", np.full(100, 0.5))
    with pytest.raises(OverflowError):
        tg.write("i", np.full(100, 2**40))
    tg2 = cp.LocalTarget(tick=1e-3)
    tg2.deploy(cp.Task(k * 2, period=1e-3))
    with pytest.raises(TypeError, match="truncated"):
        tg2.drive(k, [1.5, 2.5])


def test_write_float_rounds_to_float32() -> None:
    x = cp.value(0.0)
    tg = cp.LocalTarget()
    tg.compile(x + 0.0)
    tg.write(x, 0.1)
    assert tg.read(x) == float(np.float32(0.1))


def test_math_functions_close_to_numpy() -> None:
    x = cp.value(0.7)
    outs = [cp.sqrt(x), cp.sin(x), cp.cos(x), cp.exp(x), cp.log(x)]
    got = run(*outs)
    ref = [np.sqrt, np.sin, np.cos, np.exp, np.log]
    for g, f in zip(got, ref, strict=True):
        want = float(f(np.float64(np.float32(0.7))))
        assert math.isclose(g, want, rel_tol=3e-7), (f, g, want)


def test_multiply_by_zero_rule_and_opt_out() -> None:
    x = cp.value(float("nan"))
    assert (x * 0.0).node.op == "const"  # the branch is dropped (documented)
    assert run(x * 0.0) == [0.0]
    with cp.simplify_options(multiply_by_zero=False):
        y = x * 0.0
    (got,) = run(y)
    assert math.isnan(got)  # IEEE semantics kept
    with pytest.raises(TypeError, match="unknown simplify option"):
        with cp.simplify_options(no_such_rule=True):
            pass


def test_simplify_options_are_bools_of_the_thread_that_sets_them() -> None:
    """multiply_by_zero="no" is refused (a truthy string kept the rule on); a with block in one
    thread leaves another thread's tracing alone (it changed a global)."""
    with pytest.raises(TypeError, match="True or False"):
        with cp.simplify_options(multiply_by_zero="no"):  # type: ignore[arg-type]
            pass
    x = cp.value(1.0)
    inside, started = threading.Event(), threading.Event()
    seen: list[str] = []

    def other_thread() -> None:
        started.set()
        inside.wait(5)
        seen.append((x * 0.0).node.op)  # the default rule: x * 0 -> 0

    t = threading.Thread(target=other_thread)
    t.start()
    started.wait(5)
    with cp.simplify_options(multiply_by_zero=False):
        inside.set()
        t.join(5)
        assert (x * 0.0).node.op == "mul"
    assert seen == ["const"]


def test_constant_reassociation() -> None:
    i = cp.value(3)
    assert ((i + 2) + 3).node.args[1].op == "const"
    x = cp.value(1.5)
    assert (2 * (3 * x)).node.args[0] is x.node  # power-of-two scaling: exact
    assert ((x + 2) + 3).node.args[0].op == "add"  # not exact: kept
    with cp.simplify_options(reassociate_floats=True):
        assert ((x + 2) + 3).node.args[0] is x.node
    assert run((i + 2) + 3, 2 * (3 * x)) == [8, 9.0]


def test_where_does_not_leak_nan_or_inf() -> None:
    x = cp.value(0.0)
    a = cp.where(x > 0, 1.0 / x, -1.0)  # 1/0 = inf on the untaken side
    b = cp.where(x != 0, cp.sqrt(-x - 1.0), 2.0)  # NaN on the untaken side
    assert run(a, b) == [-1.0, 2.0]


def test_run_is_the_programs_entry_point_and_follows_recompiles() -> None:
    """tg.run calls the loaded program without a Python frame in between; a new compile or
    deploy rebinds it, so it never runs a stale program."""
    tg = cp.LocalTarget()
    with pytest.raises(TargetError, match="nothing compiled yet"):
        tg.run()
    x = cp.value(2.0)
    first = x + 1.0
    tg.compile(first)
    assert getattr(tg.run, "__func__", None) is not cp.LocalTarget.run
    tg.write(x, 5.0)
    tg.run()
    assert tg.read(first) == 6.0
    second = x * 3.0
    tg.compile(second)
    tg.write(x, 4.0)
    tg.run(task=0)
    assert tg.read(second) == 12.0
    with pytest.raises(TargetError, match="not part of the compiled program"):
        tg.read(first)
    other = cp.LocalTarget()
    with pytest.raises(TargetError, match="nothing compiled yet"):
        other.run(0)


def test_numpy_reductions_missing_from_cp_name_the_method_and_numpy() -> None:
    data = np.array([3.0, -1.5, 2.25, 0.5], np.float32)
    v = cp.vector(data)
    for name in cp._ARRAY_METHODS:
        with pytest.raises(AttributeError, match=rf"x\.{name}\(\).*np\.{name}\(x\)"):
            getattr(cp, name)
        # what the message promises holds: the method and NumPy's function give NumPy's value
        tg = cp.LocalTarget()
        by_method, by_numpy = getattr(v, name)(), getattr(np, name)(v)
        tg.compile(by_method, by_numpy)
        tg.run()
        expected = getattr(np, name)(data)
        np.testing.assert_allclose(tg.read(by_method), expected, rtol=1e-6)
        np.testing.assert_allclose(tg.read(by_numpy), expected, rtol=1e-6)
    with pytest.raises(AttributeError, match=r"no attribute 'nonsense'$"):
        _ = cp.nonsense  # type: ignore[attr-defined]


_F32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


def _clip(x: np.float32, lo: np.float32, hi: np.float32) -> np.float32:
    """np.clip's definition min(max(x, lo), hi), with the tie rule stated: NumPy leaves which of
    two equal operands (0.0, -0.0) it gives to the platform, so bits are checked against this."""
    if np.isnan(x) or np.isnan(lo) or np.isnan(hi):
        return np.float32(np.nan)
    r = lo if x < lo else x
    return hi if r > hi else r


#: NumPy before 2.0 read a NaN bound of np.clip as "no bound" (deprecated); NumPy 2 computes
#: minimum(maximum(x, lo), hi), which copapy's clamp is
_CLIP_NAN_BOUND_IS_NAN = int(np.__version__.split(".")[0]) >= 2


def _check_clip(got: object, x: np.float32, lo: np.float32, hi: np.float32) -> None:
    want = (np.clip(x, lo, hi) if _CLIP_NAN_BOUND_IS_NAN or not (np.isnan(lo) or np.isnan(hi))
            else np.minimum(np.maximum(x, lo), hi))
    assert same_bits(got, _clip(x, lo, hi), "float32"), (x, lo, hi, got)
    assert got == want or (np.isnan(want) and np.isnan(got)), (x, lo, hi, got)  # type: ignore[arg-type]


class _Clamp:
    """One compiled ``cp.clamp`` per form of low and high, written and run per example."""

    def __init__(self, dtype: str) -> None:
        zero: object = 0.0 if dtype == "float32" else 0
        self.x, self.lo, self.hi = (cp.value(zero) for _ in range(3))
        self.tg = cp.LocalTarget()
        self.out = cp.clamp(self.x, self.lo, self.hi)
        self.tg.compile(self.out)

    def __call__(self, x: object, lo: object, hi: object) -> object:
        for v, n in ((self.x, x), (self.lo, lo), (self.hi, hi)):
            self.tg.write(v, n)
        self.tg.run()
        return self.tg.read(self.out)


_CLAMPS: dict[str, _Clamp] = {}


@settings(max_examples=examples(300))
@given(x=_F32, lo=_F32, hi=_F32)
def test_clamp_is_numpy_clip_with_values(x: float, lo: float, hi: float) -> None:
    """low and high as values: NumPy's definition min(max(x, low), high) (high wins when
    low > high, NaN anywhere gives NaN)."""
    clamp = _CLAMPS.setdefault("float32", _Clamp("float32"))
    _check_clip(clamp(x, lo, hi), np.float32(x), np.float32(lo), np.float32(hi))


@given(x=st.integers(-(2**31), 2**31 - 1), lo=st.integers(-50, 50), hi=st.integers(-50, 50))
def test_clamp_is_numpy_clip_for_int32(x: int, lo: int, hi: int) -> None:
    clamp = _CLAMPS.setdefault("int32", _Clamp("int32"))
    assert clamp(x, lo, hi) == np.clip(np.int32(x), np.int32(lo), np.int32(hi))


@pytest.mark.parametrize("lo, hi", [(1.0, 0.0), (0.0, 1.0), (-0.0, 0.0), (0.0, -0.0),
                                    (math.nan, 1.0), (0.0, math.nan), (2.0, 2.0)])
def test_clamp_is_numpy_clip_with_constants(lo: float, hi: float) -> None:
    """Constant low and high (folded into the program), low > high among them."""
    xs = np.array([-3.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf, -np.inf, np.nan], np.float32)
    x = cp.value(0.0)
    y = cp.clamp(x, lo, hi)
    tg = cp.LocalTarget()
    tg.compile(y)
    for v in xs:
        tg.write(x, float(v))
        tg.run()
        _check_clip(tg.read(y), v, np.float32(lo), np.float32(hi))


def test_float32_constants_beyond_the_range_are_infinite() -> None:
    """A float constant or initial value that float32 rounds to infinity is infinite, as NumPy's
    float32 conversion gives (x + 1e40 and x / 2**-130, a subnormal power of two whose
    reciprocal is not a float32, raised struct's OverflowError)."""
    x = cp.value(1.0)
    f32 = np.float32
    cases = [(x + 1e40, f32(1.0) + f32(np.inf)), (x - 1e40, f32(1.0) - f32(np.inf)),
             (x / 2.0**-130, f32(np.inf)),  # 2**130 > FLT_MAX
             (x / 2.0**-149, f32(np.inf)), (x * 2.0**-149, f32(2.0**-149)),
             (cp.value(1e40) * 1.0, f32(np.inf)), (x * 0 + 3.4028235e38, f32(3.4028235e38))]
    got = run(*(v for v, _ in cases))
    for (v, want), g in zip(cases, got, strict=True):
        assert same_bits(g, want, "float32"), (v, g, want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's "overflow encountered in cast" came through
        big = cp.value(np.array([1e40, -1e40, 1.0]))
    assert run(big * 1.0)[0].tolist() == [math.inf, -math.inf, 1.0]  # type: ignore[attr-defined]


@settings(max_examples=examples(50))
@given(st.integers(-(2**62), 2**62), st.sampled_from(["float32", "float64"]))
def test_big_python_ints_next_to_float_values_are_weak(k: int, dtype: str) -> None:
    """An int beyond int32 next to a float value takes the value's type, as every Python number
    does (x + 2**40 raised "does not fit in int32"); next to an int32 value it still raises."""
    x = cp.value(1.5, getattr(cp, dtype))
    outs = [x + k, k * x, cp.max(x, k), cp.where(x > 0, k, x), x < k]
    ftype = np.dtype(dtype).type
    want = [ftype(1.5) + ftype(k), ftype(k) * ftype(1.5), np.maximum(ftype(1.5), ftype(k)),
            ftype(k), ftype(1.5) < ftype(k)]
    for g, w in zip(run(*outs), want, strict=True):
        assert same_bits(g, w, np.asarray(w).dtype.name), (k, dtype, g, w)
    if not -(2**31) <= k < 2**31:
        with pytest.raises(OverflowError, match="does not fit in int32"):
            cp.value(1) + k


@settings(max_examples=examples(100))
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_cast_of_a_python_number_is_the_cast_of_a_value(c: float) -> None:
    """cp.cast(number, int32 / bool) follows the conversion's rule as a traced value does:
    truncation toward zero, saturation, NaN gives 0 (a NaN constant raised ValueError, 1e10
    OverflowError)."""
    x = cp.value(c, cp.float64)
    got = run(cp.cast(x, cp.int32), cp.cast(x, cp.bool_))
    if math.isnan(c):
        want_int = 0
    else:
        want_int = int(max(min(math.trunc(c) if math.isfinite(c) else c, 2**31 - 1), -(2**31)))
    assert got == [want_int, c != 0]
    consts = [cp.cast(c, cp.int32), cp.cast(c, cp.bool_)]
    assert [v.node.op for v in consts] == ["const", "const"]
    assert run(*consts) == got


def test_port_names_are_checked() -> None:
    """name= is a str without NUL (3 raised AttributeError 'encode', 'a\\0b' was saved as 'a'),
    and two inputs of one name are refused (both got the port name, tg.write(name) wrote one)."""
    for bad in (3, "a\0b"):
        with pytest.raises(TypeError, match="name= is the port's name"):
            cp.value(1.0, name=bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="name= is the port's name"):
            cp.value([1.0, 2.0], name=bad)  # type: ignore[arg-type]
    a, b = cp.value(1.0, name="a"), cp.value(2.0, name="a")
    with pytest.raises(CompileError, match="two ports of the program are named 'a'"):
        cp.LocalTarget().compile(a + b)
    tg = cp.LocalTarget(tick=1e-3)
    with pytest.raises(CompileError, match=r"named 't\.out0'"):
        tg.deploy(cp.Task(cp.value(1.0, name="t.out0") * 2, period=1e-3, name="t"))


def test_value_of_traced_things_says_so() -> None:
    """cp.value(vector) spoke of "elements of NumPy dtype object"."""
    for traced in (cp.value(1.0), cp.vector([1.0, 2.0]), cp.quaternion(1.0, 0.0, 0.0, 0.0)):
        with pytest.raises(TypeError, match=r"already traced \(a copapy (Value|Array|Quat)"):
            cp.value(traced)  # type: ignore[call-overload]


def test_constant_takes_numbers_as_value_does() -> None:
    """cp.constant(2**40, cp.float32) is the float (OverflowError), cp.constant(value) says it is
    a value already (it said "expected a number or a copapy value" given one)."""
    assert run(cp.constant(2**40, cp.float32) + cp.value(0.0)) == [2.0**40]
    with pytest.raises(OverflowError, match="int32"):
        cp.constant(2**40, cp.int32)
    with pytest.raises(TypeError, match="already a copapy value"):
        cp.constant(cp.value(1.0))  # type: ignore[arg-type]


def test_grad_names_what_it_differentiates_with_respect_to() -> None:
    """grad(y, 2.0) and grad(y, quaternion) said "'float' object is not iterable"."""
    x = cp.value(2.0)
    with pytest.raises(TypeError, match=r"with respect to a copapy value or array.*got float"):
        cp.grad(x * x, 2.0)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"q\.components\(\)"):
        cp.grad(x * x, cp.quaternion(x, 0.0, 0.0, 0.0))  # type: ignore[call-overload]
    (g,) = cp.grad(x * x, (x,))
    assert run(g) == [4.0]


def test_copies_of_traced_values_are_the_same_graph() -> None:
    """copy.deepcopy of a value (or of a structure holding values) made a second input that no
    write reached: the copy's result stayed at the initial value. Pickling says it cannot."""
    x = cp.value(1.0)
    y = x * 2 + 1
    held = copy.deepcopy({"y": y, "v": cp.vector([x, y]), "x": x})
    assert held["y"].node is y.node and held["x"].node is x.node
    assert held["v"].nodes() == [x.node, y.node]
    tg = cp.LocalTarget()
    tg.compile(y, held["y"])
    tg.write(held["x"], 3.0)
    tg.run()
    assert [tg.read(y), tg.read(held["y"])] == [7.0, 7.0]
    with pytest.raises(TypeError, match=r"cannot be pickled.*cp\.save"):
        pickle.dumps(y)


def test_numpy_dtype_spellings() -> None:
    """dtype="f4" / "<f8" / "i4" / "?" name copapy's types as NumPy's names do (TypeError);
    types copapy has not stay errors."""
    assert [cp.value(1, d).dtype for d in ("f4", "<f8", "i4", "?")] == [
        cp.float32, cp.float64, cp.int32, cp.bool_]
    assert cp.cast(cp.value(1.5), "i4").dtype is cp.int32
    for bad in ("i8", "f2", "U3"):
        with pytest.raises(TypeError, match="copapy computes in bool, int32"):
            cp.value(1, bad)
    # x.dtype == np.float32 as for a NumPy array (it was False: identity only)
    x, d = cp.value(1.0), cp.value([1.0, 2.0], cp.float64)
    assert x.dtype == np.float32 and x.dtype == np.dtype("f4") and x.dtype == "float32"
    assert d.dtype == np.float64 and d.dtype != np.float32 and cp.value(1).dtype == np.int32
    assert cp.value(True).dtype == np.bool_ and x.dtype != "i8" and x.dtype != None  # noqa: E711
    assert {cp.float32: 1}[x.dtype] == 1


def test_the_errors_a_user_catches_are_exported(tmp_path: Any) -> None:
    with pytest.raises(cp.ShapeError):
        cp.vector([1.0, 2.0]) + cp.vector([1.0, 2.0, 3.0])
    with pytest.raises(cp.NotDifferentiableError):
        cp.grad(cp.value(1) * 2, cp.value(1.0))
    with pytest.raises(cp.CompileError):
        cp.LocalTarget().compile(cp.value(1.0, name="a") + cp.value(2.0, name="a"))
    with pytest.raises(cp.TargetError):
        cp.LocalTarget().step(1)
    bad = tmp_path / "bad.cpimg"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(cp.ProgramFileError):
        cp.load(str(bad))
    tg = cp.LocalTarget()
    with pytest.raises(cp.BindingError):
        tg.bind(cp.value(0.5), cp.io.PWM(0))  # an input on an output channel
    assert issubclass(cp.SerialTargetError, Exception)


def test_is_traced_is_the_traced_protocol_check() -> None:
    class OwnTraced:
        def nodes(self) -> list[Any]:
            return []

    things = [cp.value(1.0), cp.vector([1.0, 2.0]), cp.quaternion(1.0, 0.0, 0.0, 0.0),
              OwnTraced(), np.arange(3.0), 1.5, [cp.value(1.0)], "x", None, np.float32(2)]
    assert [is_traced(t) for t in things] == [isinstance(t, Traced) for t in things]
    assert [is_traced(t) for t in things] == [True] * 4 + [False] * 6


def test_cp_max_of_one_array_names_the_reduction() -> None:
    data = np.array([0.5, -2.0, 3.5], np.float32)
    v = cp.vector(data)
    for name, reduce in (("max", np.max), ("min", np.min)):
        with pytest.raises(TypeError, match=rf"element-wise.*x\.{name}\(\) or np\.{name}\(x\)"):
            getattr(cp, name)(v)
        by_method, by_numpy = getattr(v, name)(), reduce(v)
        tg = cp.LocalTarget()
        tg.compile(by_method, by_numpy)
        tg.run()
        assert tg.read(by_method) == tg.read(by_numpy) == reduce(data)
    assert run(cp.max(cp.value(1.0), 2.0)) == [2.0]  # two operands: element-wise as before
