"""The C call slot of jitted functions (copapy._dispatch): the fast plan of the most recent
signature answers first, and anything it does not take goes to the general path — results
always as the signature decides, hits counted either way."""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import copapy as cp
from copapy._dispatch import Dispatcher

from .support.checks import examples


def test_result_forms_through_the_fast_plan() -> None:
    @cp.jit
    def one(x: float) -> object:
        return x * 2.0

    @cp.jit
    def pair(x: float, n: int) -> object:
        return x + 1.0, n * 3

    @cp.jit
    def arr(a: np.ndarray) -> object:
        return a * 2.0

    for _ in range(3):  # first call compiles, the others run through the C slot
        assert one(1.5) == 3.0
        assert pair(1.5, 4) == (2.5, 12)
        out = arr(np.arange(3, dtype=np.float32))
        assert isinstance(out, np.ndarray) and out.tolist() == [0.0, 2.0, 4.0]
    assert one.cache_info().hits == 2 and one.cache_info().misses == 1
    assert pair.cache_info().hits == 2


def test_another_signature_after_the_fast_one_is_right() -> None:
    @cp.jit
    def f(x: object) -> object:
        return x + 1

    assert f(1) == 2 and f(1) == 2          # int signature, fast plan
    assert f(1.5) == 2.5                     # float: the int plan rejects it, no wrong answer
    assert f(np.float32(2.0)) == 3.0         # converted by the general path
    assert f(np.float64(2.0)) == 3.0         # a float64 argument: its own signature
    assert f(x=4) == 5                       # keywords skip the fast plan
    info = f.cache_info()
    assert info.misses == 3 and info.currsize == 3


def test_cache_clear_forgets_the_fast_plan_and_the_hits() -> None:
    @cp.jit
    def f(x: float) -> object:
        return x - 1.0

    f(1.0), f(2.0), f(3.0)
    f.cache_clear()
    assert f.cache_info() == (0, 0, 32, 0)
    assert f(5.0) == 4.0 and f.cache_info().misses == 1


def test_errors_of_the_general_path_reach_the_caller() -> None:
    @cp.jit
    def f(x: float) -> object:
        return x * 2.0

    f(1.0)
    with pytest.raises(TypeError, match="f\\(\\)"):
        f(1.0, 2.0)
    with pytest.raises(TypeError):
        f("abc")


def test_threads_share_one_jitted_function() -> None:
    @cp.jit
    def f(x: float, y: float) -> object:
        return x * 10.0 + y

    errors: list[str] = []

    def worker(k: int) -> None:
        for i in range(300):
            x = float(k) if i % 2 else k  # alternate signatures: plans replaced concurrently
            got = f(x, float(i))
            if got != k * 10 + i:
                errors.append(f"{k} {i} {got}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_dispatcher_falls_back_to_dispatch_without_a_plan() -> None:
    class Probe(Dispatcher):
        def _dispatch(self, *args: object, **kwargs: object) -> object:
            return ("slow", args, kwargs)

    p = Probe()
    assert p(1, k=2) == ("slow", (1,), {"k": 2})
    p._set_fast(lambda args, i, o: (sum(args),), (), (), None, True)
    assert p(1, 2) == 3 and p._fast_hits == 1
    p._set_fast(lambda args, i, o: (_ for _ in ()).throw(TypeError("plan")), (), (), None, True)
    assert p(1) == ("slow", (1,), {})                # TypeError: another signature
    p._set_fast(lambda args, i, o: 1 / 0, (), (), None, True)
    with pytest.raises(ZeroDivisionError):           # any other error is the caller's
        p(1)
    with pytest.raises(TypeError, match="callable"):
        p._set_fast(1, (), (), None, True)


def test_invoke_parses_each_plan_it_is_given() -> None:
    """Program.invoke keeps the plan it parsed last (a signature passes the same tuples on
    every call); any other plan on the same program — an equal copy, another output plan, a
    bad one — is parsed anew, never answered from the kept one."""
    @cp.jit
    def f(x: float) -> object:
        return x * 2.0, x + 1.0

    assert f(1.5) == (3.0, 2.5)
    (compiled,) = f._cache.values()
    fast = compiled.fast
    program = fast.invoke.__self__
    if not hasattr(program, "invoke_copies"):
        pytest.skip("the jit runs on an emulator here (no native Program.invoke)")
    assert program.invoke((2.0,), fast.inputs, fast.outputs) == (4.0, 3.0)
    copies = (tuple(tuple(e) for e in fast.inputs), tuple(tuple(e) for e in fast.outputs))
    assert program.invoke((2.5,), *copies) == (5.0, 3.5)
    assert program.invoke((2.0,), fast.inputs, fast.outputs[1:]) == (3.0,)
    first = fast.outputs[0]
    bad = ((first[0], program.data_size, *first[2:]),)
    with pytest.raises(ValueError, match="outside the data region"):
        program.invoke((2.0,), fast.inputs, bad)
    with pytest.raises(TypeError, match="argument type differs"):
        program.invoke((2,), fast.inputs, fast.outputs)
    assert program.invoke((3.0,), fast.inputs, fast.outputs) == (6.0, 4.0)
    assert f(4.0) == (8.0, 5.0)


class _Tagged(np.ndarray):
    """A user subclass of ndarray that adds nothing: its data is a plain array's."""


def _refused(case: str) -> tuple[Any, Any, str]:
    """A subclass whose buffer is not what it means: (argument, NumPy's answer for
    ``x.sum()`` of a 1-D, ``x * x`` of a 2-D argument, the error's words)."""
    if case == "masked":
        x = np.array([1.0, 2.0, 3.0], np.float32)
        masked = np.ma.masked_array(x, mask=[False, True, False])
        return masked, 4.0, r"masked array.*x\.filled\(value\)"
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]], np.float32)
    return m, m * m, r"np\.matrix.*np\.asarray\(m\)"


def _sum_or_square(x: Any) -> Any:
    return x.sum() if x.ndim == 1 else x * x


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
@pytest.mark.parametrize("case", ["masked", "matrix"])
def test_masked_arrays_and_matrices_are_refused_on_the_first_call(case: str) -> None:
    arg, _, error = _refused(case)
    f = cp.jit(_sum_or_square)
    with pytest.raises(TypeError, match=error):
        f(arg)
    with pytest.raises(TypeError, match=error):
        f(x=arg)
    with pytest.raises(TypeError, match="masked array"):
        f(np.ma.masked)  # 0-d: not the number under the mask either
    assert f.cache_info().misses == 0


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("case", ["masked", "matrix"])
def test_masked_arrays_and_matrices_are_refused_by_a_warm_fast_plan(case: str) -> None:
    """The plan a plain array of the same shape and element type warmed does not take them:
    its C call would read the raw buffer (the masked elements; the matrix's, element-wise)."""
    arg, numpy_answer, error = _refused(case)
    plain = np.asarray(arg).copy()
    f = cp.jit(_sum_or_square)
    raw = f(plain)
    np.testing.assert_array_equal(f(plain), raw)
    assert f._fast_hits == 1
    assert not np.array_equal(raw, np.asarray(numpy_answer))  # what the raw buffer gives
    with pytest.raises(TypeError, match=error):
        f(arg)
    assert f._fast_hits == 1
    if case == "masked":  # the fix the message names
        assert f(arg.filled(0.0)) == numpy_answer


_both = cp.jit(lambda a: (a * 2.0 + 1.0, a.sum()))  # read in place, and copied


@settings(max_examples=examples(40), deadline=None)
@given(hnp.arrays(np.float32, 64, elements=st.floats(-1e3, 1e3, width=32)))
def test_other_ndarray_subclasses_are_their_base_ndarray(x: np.ndarray) -> None:
    """A memmap or a subclass that adds nothing computes as np.asarray(x) does, whether or not
    a plain array's plan is warm; the results are plain ndarrays."""
    with tempfile.TemporaryDirectory() as tmp:
        mm = np.memmap(os.path.join(tmp, "x.f32"), dtype=np.float32, mode="w+", shape=x.shape)
        mm[:] = x
        want_fused, want_total = _both(x.copy())
        np.testing.assert_allclose(want_fused, x * np.float32(2.0) + np.float32(1.0),
                                   rtol=1e-6, atol=1e-6)
        assert want_total == pytest.approx(float(x.sum(dtype=np.float64)), rel=1e-4, abs=1e-2)
        for arg in (mm, x.view(_Tagged), x, mm):
            fused, total = _both(arg)
            assert type(fused) is np.ndarray
            np.testing.assert_array_equal(fused, want_fused)
            assert total == want_total
    assert _both.cache_info().misses == 1


def test_invoke_refuses_an_ndarray_subclass() -> None:
    """Program.invoke leaves a subclass to the general path (TypeError before writing)."""
    f = cp.jit(lambda a: a * 2.0 + 1.0)
    x = np.arange(4, dtype=np.float32)
    f(x)
    (compiled,) = f._cache.values()
    fast = compiled.fast
    if fast is None or not hasattr(fast.invoke.__self__, "invoke_copies"):
        pytest.skip("the jit runs on an emulator here (no native Program.invoke)")
    with pytest.raises(TypeError, match="ndarray subclass"):
        fast.invoke((x.view(_Tagged),), fast.inputs, fast.outputs)
    assert fast.invoke((x,), fast.inputs, fast.outputs)[0] is not None


# np.float64 is a float64 argument (NEP 50), not a float: tests/test_jit_float64_scalars.py
_NUMPY_SCALARS = [np.float16, np.float32, np.int8, np.int16, np.int32, np.int64,
                  np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


@pytest.mark.parametrize("kind", _NUMPY_SCALARS, ids=lambda k: k.__name__)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_numpy_scalars_take_the_fast_plan(kind: Any, data: st.DataObject) -> None:
    """A NumPy scalar (``dt=np.float32(0.01)``) has the signature of the Python number it
    holds, and a warm plan takes it in C: same program, same result bits as the Python number,
    no general-path call (it once went through _dispatch on every call, ~10 µs more)."""
    info = np.finfo(kind) if kind(0).dtype.kind == "f" else None
    if kind is np.bool_:
        x = data.draw(st.booleans())
    elif info is not None:
        x = data.draw(st.floats(width=min(32, info.bits)))
    else:
        lo, hi = np.iinfo(kind).min, np.iinfo(kind).max
        x = data.draw(st.integers(max(lo, -2**31), min(hi, 2**31 - 1)))
    f = cp.jit(lambda v, dt: v + dt * 3)
    scalar = kind(x)
    python = scalar.item()
    expected = f(1.5, python)  # compiles the signature (float, type(python))
    hits = f._fast_hits
    for _ in range(3):
        got = f(1.5, scalar)
        assert type(got) is type(expected)
        assert np.float32(got).tobytes() == np.float32(expected).tobytes()
    assert f._fast_hits == hits + 3, "a NumPy scalar went to the general path"
    assert f.cache_info().misses == 1


def test_numpy_scalars_of_another_kind_are_another_signature() -> None:
    """The fast plan checks the kind: a float plan refuses np.int32 (a new int signature),
    an int plan refuses np.float32 and np.bool_, and a value that does not fit int32 is an
    OverflowError either way."""
    f = cp.jit(lambda v: v * 2)
    assert f(1.5) == 3.0
    assert f(np.int32(4)) == 8 and type(f(np.int32(4))) is int
    assert f(np.float32(1.5)) == 3.0
    assert f(np.bool_(True)) == 2
    assert f.cache_info().misses == 3
    with pytest.raises(OverflowError):
        f(np.int64(2**40))
