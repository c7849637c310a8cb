"""@cp.jit: per-signature compilation, buffers, results, errors, cache, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import copapy as cp

from .support.checks import examples


@cp.jit
def rms_error(measured, reference):  # type: ignore[no-untyped-def]
    error = measured - reference
    return cp.sqrt((error * error).sum() / error.size)


@cp.jit
def normalize(v):  # type: ignore[no-untyped-def]
    return cp.map_to_numpy(v / cp.sqrt((v * v).sum()))


def test_issue_examples() -> None:
    assert rms_error([1.0, 2.0, 3.0, 4.0], [1.1, 2.2, 3.0, 3.9]) == pytest.approx(0.1225, abs=1e-4)
    out = normalize([1.0, 2.0, 3.0, 4.0])
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, [0.183, 0.365, 0.548, 0.730], atol=1e-3)


def test_signature_changes_recompile() -> None:
    @cp.jit
    def total(x):  # type: ignore[no-untyped-def]
        return cp.vector(x).sum() if isinstance(x, list) else x.sum()

    assert total([1.0, 2.0]) == 3.0
    assert total([1.0, 2.0, 3.0]) == 6.0  # a longer list: a new program
    assert total.cache_info().misses == 2

    @cp.jit
    def triple(x):  # type: ignore[no-untyped-def]
        return x * 3

    assert triple(2) == 6 and isinstance(triple(2), int)
    assert triple(2.5) == 7.5  # int then float: not truncated
    # an array result is a NumPy array the caller owns, of the program's element type
    got = triple(np.array([1.5, 2.0], np.float32))
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.tolist() == [4.5, 6.0]
    got = triple(np.array([1.5, 2.0], np.float64))
    assert got.dtype == np.float64 and got.tolist() == [4.5, 6.0]
    got = triple(np.array([[1, 2], [3, 4]], np.int32))
    assert got.dtype == np.int32 and got.shape == (2, 2) and got.tolist() == [[3, 6], [9, 12]]
    again = triple(np.array([[1, 2], [3, 4]], np.int32))
    assert again is not got and got.tolist() == [[3, 6], [9, 12]]  # not a view: kept as it was


def test_float64_arrays_keep_precision() -> None:
    @cp.jit
    def add_tiny(x):  # type: ignore[no-untyped-def]
        return cp.map_to_numpy(x + 1e-12, copy=True)

    out = add_tiny(np.array([1.0, 2.0]))
    assert out.dtype == np.float64 and out[0] == 1.0 + 1e-12


def test_small_integer_arrays_are_widened() -> None:
    @cp.jit
    def brightness(img):  # type: ignore[no-untyped-def]
        return img.sum()

    img = np.arange(200, dtype=np.uint8)
    assert brightness(img) == int(img.astype(np.int64).sum())


def test_view_and_copy_semantics() -> None:
    @cp.jit
    def scaled_view(x):  # type: ignore[no-untyped-def]
        return cp.map_to_numpy(x * 2.0)

    @cp.jit
    def scaled_copy(x):  # type: ignore[no-untyped-def]
        return cp.map_to_numpy(x * 2.0, copy=True)

    a = scaled_view(np.array([1.0, 2.0], np.float32))
    b = scaled_view(np.array([5.0, 6.0], np.float32))
    assert a is b or np.shares_memory(a, b)
    assert a.tolist() == [10.0, 12.0]  # the view changed with the next call
    c = scaled_copy(np.array([1.0, 2.0], np.float32))
    scaled_copy(np.array([5.0, 6.0], np.float32))
    assert c.tolist() == [2.0, 4.0]


def test_tuple_results_and_python_control_flow_on_shapes() -> None:
    @cp.jit
    def stats(x):  # type: ignore[no-untyped-def]
        if x.size > 3:  # resolved at trace time
            return x.min(), x.max(), x.mean()
        return x.sum(), x.sum(), x.sum()

    assert stats(np.array([3.0, 1.0, 2.0, 4.0], np.float32)) == (1.0, 4.0, 2.5)
    assert stats(np.array([1.0, 2.0], np.float32)) == (3.0, 3.0, 3.0)


def test_bad_inputs_raise_clear_errors() -> None:
    @cp.jit
    def f(x):  # type: ignore[no-untyped-def]
        return x + 1

    with pytest.raises(TypeError, match="str"):
        f("a")
    with pytest.raises(TypeError, match="ragged"):
        f([[1.0, 2.0], [3.0]])
    with pytest.raises(TypeError, match="numbers"):
        f(np.array(["a", "b"]))
    with pytest.raises(TypeError, match="where"):
        cp.jit(lambda x: x if x > 0 else -x)(1.0)
    with pytest.raises(OverflowError):
        f(2**40)


def test_lru_eviction() -> None:
    @cp.jit(cache_size=2)
    def g(x):  # type: ignore[no-untyped-def]
        return x.sum()

    for n in (2, 3, 4):
        g(np.ones(n, np.float32))
    info = g.cache_info()
    assert (info.misses, info.currsize, info.maxsize) == (3, 2, 2)
    g(np.ones(4, np.float32))
    assert g.cache_info().hits == 1
    g(np.ones(2, np.float32))  # evicted: compiled again
    assert g.cache_info().misses == 4


def test_threads_do_not_corrupt_each_other() -> None:
    @cp.jit
    def affine(x, k):  # type: ignore[no-untyped-def]
        return cp.map_to_numpy(x * k + k, copy=True)

    errors = []

    def worker(k: float) -> None:
        x = np.arange(100, dtype=np.float32)
        for _ in range(300):
            out = affine(x, k)
            if not np.array_equal(out, x * np.float32(k) + np.float32(k)):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(float(k),)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


OPS = {
    "affine": lambda x: x * 1.5 - 0.25,
    "square_sum": lambda x: (x * x).sum(),
    "mean_abs": lambda x: abs(x).mean(),
    "max_min": lambda x: x.max() - x.min(),
    "clipped": lambda x: cp.clamp(x, -1.0, 1.0),
}
NP_OPS = {
    "affine": lambda x: x * np.float32(1.5) - np.float32(0.25),
    "square_sum": None,
    "mean_abs": None,
    "max_min": lambda x: x.max() - x.min(),
    "clipped": lambda x: np.clip(x, np.float32(-1.0), np.float32(1.0)),
}


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(sorted(OPS)),
       hnp.arrays(np.float32, st.integers(1, 300), elements=st.floats(-50, 50, width=32)))
def test_random_functions_match_numpy_float32(name: str, x: np.ndarray) -> None:
    f = cp.jit(OPS[name])
    got = np.asarray(f(x), dtype=np.float32)
    ref = NP_OPS[name]
    if ref is None:  # sums: copapy's fixed lane order, compared with the same order in NumPy
        from copapy.graph.lanes import reduce_in_lane_order

        items = list(x * x) if name == "square_sum" else list(np.abs(x))
        want = reduce_in_lane_order(items, lambda a, b: np.float32(a + b))
        if name == "mean_abs":
            want = np.float32(want) / np.float32(x.size)
    else:
        want = ref(x)
    np.testing.assert_array_equal(got, np.asarray(want, dtype=np.float32))


def test_threads_mixing_signatures_never_share_a_program_unsafely() -> None:
    """Thread A alternates two signatures (each call takes the general path), thread B calls
    one of them; every result must be right (the general path used to run the slow Python
    write-run-read of a program whose fast path B was using at the same time)."""
    import sys
    import time

    @cp.jit
    def total(x):  # type: ignore[no-untyped-def]
        return (x * 2.0).sum()

    xs4 = [np.full(4, i, np.float32) for i in range(64)]
    xs5 = [np.full(5, -i, np.float32) for i in range(64)]
    want4 = [8.0 * i for i in range(64)]
    want5 = [-10.0 * i for i in range(64)]
    errors: list[str] = []
    start = threading.Barrier(2)

    def alternate() -> None:
        start.wait()
        end, n = time.perf_counter() + 1.5, 0
        while time.perf_counter() < end:
            k, n = n & 63, n + 1
            if total(xs4[k]) != want4[k]:
                errors.append("A4")
            if total(xs5[k]) != want5[k]:
                errors.append("A5")

    def same() -> None:
        start.wait()
        end, n = time.perf_counter() + 1.5, 0
        while time.perf_counter() < end:
            k, n = 63 - (n & 63), n + 1
            if total(xs4[k]) != want4[k]:
                errors.append("B")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=alternate), threading.Thread(target=same)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


class _SlowArray:
    """An array-like argument (not a buffer) whose conversion lets other threads run."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.shape, self.dtype = a, a.shape, a.dtype

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        import time

        time.sleep(0.02)  # releases the GIL in the middle of the argument conversion
        return self.a if dtype is None else self.a.astype(dtype)


def test_argument_conversion_is_not_interleaved_with_other_calls() -> None:
    """An argument the one-call fast path cannot take (here: not a buffer) is converted before
    anything is written, so a thread on the fast path of the same program cannot slip in
    between the writes and the run."""

    @cp.jit
    def weighted(x, y):  # type: ignore[no-untyped-def]
        return (x * 2.0 + y).sum()

    xb, yb = np.full(4, 100.0, np.float32), np.full(4, 1.0, np.float32)
    assert weighted(xb, yb) == 804.0
    done = threading.Event()
    errors: list[float] = []

    def hammer() -> None:
        while not done.is_set():
            got = weighted(xb, yb)
            if got != 804.0:
                errors.append(got)

    t = threading.Thread(target=hammer)
    t.start()
    try:
        xa, ya = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
        results = [weighted(xa, _SlowArray(ya)) for _ in range(5)]
    finally:
        done.set()
        t.join()
    assert results == [14.0] * 5
    assert errors == []


# ---- the signature decides, always (a fast path may only skip work) -------------------------


def test_new_shape_with_the_same_byte_size_recompiles() -> None:
    @cp.jit
    def twice(m):  # type: ignore[no-untyped-def]
        return cp.map_to_numpy(m * 2, copy=True)

    a = np.arange(6, dtype=np.float32)
    for shape in [(2, 3), (3, 2), (6,), (1, 6), (2, 3)]:
        got = twice(a.reshape(shape))
        assert got.shape == shape
        np.testing.assert_array_equal(got, a.reshape(shape) * 2)
    assert twice.cache_info().misses == 4

    @cp.jit
    def mm(x, y):  # type: ignore[no-untyped-def]
        return cp.map_to_numpy(x @ y, copy=True)

    x = np.arange(12, dtype=np.float32)
    for (p, q), (r, s) in [((3, 4), (4, 3)), ((4, 3), (3, 4)), ((2, 6), (6, 2))]:
        want = x.reshape(p, q) @ x.reshape(r, s)
        np.testing.assert_array_equal(mm(x.reshape(p, q), x.reshape(r, s)), want)


def test_scalar_kinds_are_part_of_the_signature() -> None:
    @cp.jit
    def half(x):  # type: ignore[no-untyped-def]
        return x // 2

    assert half(7) == 3 and isinstance(half(7), int)
    assert half(7.0) == 3.0 and isinstance(half(7.0), float)
    assert half(True) == 0
    assert half(7) == 3 and isinstance(half(7), int)


@pytest.mark.parametrize("scalar, want", [
    (np.float32(3.0), 6.0), (np.int64(3), 6), (np.int32(3), 6), (np.int8(3), 6),
    (np.uint16(3), 6), (np.bool_(True), 2), (np.array(3.0, dtype=np.float32), 6.0),
    (np.array(3), 6),
])  # float64 ones are float64 arguments: tests/test_jit_float64_scalars.py
def test_numpy_scalars_are_numbers(scalar: object, want: object) -> None:
    @cp.jit
    def double(x):  # type: ignore[no-untyped-def]
        return x * 2

    got = double(scalar)
    assert got == want and type(got) is type(want)
    assert double(scalar.item()) == want  # type: ignore[attr-defined]  # same program
    assert double.cache_info().misses == 1
    assert cp.value(scalar).dtype is cp.value(scalar.item()).dtype  # type: ignore[attr-defined]


def test_numpy_scalar_out_of_int32_range() -> None:
    @cp.jit
    def ident(x):  # type: ignore[no-untyped-def]
        return x + 0

    with pytest.raises(OverflowError):
        ident(np.int64(2**40))


@pytest.mark.parametrize("n", [3, 100])
def test_int_arrays_out_of_int32_range_raise(n: int) -> None:
    """int64/uint32 arrays become int32 inputs: a value that does not fit raises (as an int
    argument does) instead of wrapping."""
    @cp.jit
    def twice(x):  # type: ignore[no-untyped-def]
        return x + x

    assert twice(np.full(n, 7, np.int64)).tolist() == [14] * n
    for big in (np.full(n, 2**31 + 5, np.int64), np.full(n, 2**32 - 1, np.uint32),
                [2**31] * n):
        with pytest.raises(OverflowError, match="int32"):
            twice(big)
    with pytest.raises(OverflowError, match="int32"):  # a fresh signature: at trace time
        cp.jit(lambda x: x * 2)(np.full(n, -(2**40), np.int64))

    @cp.jit
    def pick(flags, x):  # type: ignore[no-untyped-def]
        return cp.where(flags, x, 0)  # a bool array input: the program's slow path

    flags = np.ones(n, bool)
    assert pick(flags, np.full(n, 3, np.int64)).tolist() == [3] * n
    with pytest.raises(OverflowError, match="int32"):
        pick(flags, np.full(n, 2**33, np.int64))


def test_bool_array_results_are_bool() -> None:
    """Bool array results are bool arrays, also on the slow path (a bool array argument) and as
    map_to_numpy views (they were int32 0/1 there: a[mask] then indexed with 0 and 1)."""
    a = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    flags = np.array([True, False, True, True])
    results = [cp.jit(lambda m: cp.logical_not(m))(flags),
               cp.jit(lambda m, x: (x > 0) & m)(flags, a),
               cp.jit(lambda x: cp.map_to_numpy(x > 0))(a),
               cp.jit(lambda x: cp.map_to_numpy(x > 0))(np.tile(a, 50))[:4],
               cp.jit(lambda x: cp.map_to_numpy(x > 0))(a.reshape(2, 2)).reshape(-1)]
    want = [~flags, (a > 0) & flags, a > 0, a > 0, a > 0]
    for got, w in zip(results, want, strict=True):
        assert got.dtype == np.bool_ and got.tolist() == w.tolist()
    assert a[results[2]].tolist() == [2.0, 4.0]


def test_view_of_a_constant_result_is_read_only() -> None:
    """map_to_numpy of a constant array views the program's constant: writing it would change
    every later call's result, so the view is read-only."""
    w = np.linspace(0.0, 1.0, 100, dtype=np.float32)
    f = cp.jit(lambda x: (cp.map_to_numpy(cp.vector(w)), x * 2.0))
    view, _ = f(1.0)
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 42.0
    assert f(1.0)[0].tolist() == w.tolist()


def test_keyword_arguments_and_defaults() -> None:
    @cp.jit
    def affine(x, scale=2.0, offset=0.5):  # type: ignore[no-untyped-def]
        return x * scale + offset

    assert affine(1.0) == 2.5
    assert affine(1.0, offset=1.0) == 3.0
    assert affine(x=1.0, scale=3.0) == 3.5
    assert affine(1.0, 3.0, 0.0) == 3.0
    with pytest.raises(TypeError, match=r"affine\(\).*unexpected keyword argument 'bias'"):
        affine(1.0, bias=1.0)
    with pytest.raises(TypeError, match=r"affine\(\)"):
        affine()

    @cp.jit
    def star(x, **options):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(TypeError, match=r"\*\*options"):
        star(1.0, y=2.0)


def test_keyword_only_parameters() -> None:
    """A keyword-only parameter keeps its default, and giving one says what to do (it raised a
    bare StopIteration, also for f(x=1.0) with a keyword-only default)."""
    @cp.jit
    def scaled(x, *, k=2.0):  # type: ignore[no-untyped-def]
        return x * k

    assert scaled(1.0) == 2.0
    assert scaled(x=1.5) == 3.0
    with pytest.raises(TypeError, match=r"keyword-only parameters.*\(k\).*ordinary parameters"):
        scaled(1.0, k=3.0)


def test_a_jitted_function_calls_another() -> None:
    """Called while another jitted function traces, a jitted function traces into the caller's
    program (an array argument raised AttributeError 'DType' object has no attribute 'kind')."""
    @cp.jit
    def inner(x, k=1.0):  # type: ignore[no-untyped-def]
        return x * 2.0 + k

    @cp.jit
    def outer(x):  # type: ignore[no-untyped-def]
        return inner(x) + inner(x, k=3.0)

    a = np.arange(5.0, dtype=np.float32)
    np.testing.assert_array_equal(outer(a), (a * 2 + 1) + (a * 2 + 3))
    assert outer(2.0) == 12.0
    assert inner.cache_info().misses == 0  # nothing compiled for inner on its own


def test_results_that_are_not_values() -> None:
    """An empty tuple result is refused by name (the generated call raised SyntaxError), a
    list result points to a tuple."""
    with pytest.raises(TypeError, match=r"at least one value; it returned \(\)"):
        cp.jit(lambda x: ())(1.0)
    with pytest.raises(TypeError, match=r"it returned a list of Value.*return a tuple"):
        cp.jit(lambda x: [x, x])(1.0)
    # it said "got tuple" without naming which result or what it held
    with pytest.raises(TypeError, match=r"its result \[1\] is a tuple of int, \(3,\)\. "
                                        r"Allowed: a traced value or array"):
        cp.jit(lambda x: (x.sum(), x.shape))(np.ones(3))
    with pytest.raises(TypeError, match=r"its result \[0\] is a str, 'a'"):
        cp.jit(lambda x: ("a", x))(1.0)


def test_signal_state_lives_in_the_program_of_a_signature() -> None:
    """What the jit docstring says: each call is one run of the signature's program."""
    f = cp.jit(lambda v: cp.delay(v))
    assert [f(1.0), f(2.0), f(3.0)] == [0.0, 1.0, 2.0]
    assert f(np.float32(5.0).item()) == 3.0  # the same signature (float)
    assert f(7) == 0  # int: another program, its own state


def test_numpy_array_results() -> None:
    """Results that NumPy's functions give on traced arrays (object arrays of values: np.cumsum,
    np.concatenate, np.stack) and NumPy constants are returned as arrays ("got ndarray")."""
    a = np.arange(1, 6, dtype=np.float32)
    cases = [(np.cumsum, np.cumsum(a)), (lambda x: np.concatenate([x, x * 2]),
                                         np.concatenate([a, a * 2])),
             (lambda x: np.stack([x, -x]), np.stack([a, -a])),
             (lambda x: np.arange(3.0), np.arange(3.0))]
    for fn, want in cases:
        got = cp.jit(fn)(a)
        assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)
