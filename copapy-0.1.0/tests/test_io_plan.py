"""tg.write / tg.read of arrays through copy plans (io_plan): values, dtypes, shapes and the
errors of the element-wise path, on compiled and executed programs; the element-wise reads
(one port at a time) are the independent reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.runtime.errors import NotComputedError, TargetError


def element_wise(tg: cp.LocalTarget, a: Any) -> Any:
    """The elements read one by one (the reference the plan must match)."""
    return np.array([tg.read(v) for v in a.items()]).reshape(a.shape)


def test_unpacked_gradient_round_trip() -> None:
    xs = np.linspace(0.0, 1.0, 100, dtype=np.float32)
    x = cp.value(xs, packed=False)
    g = cp.grad((x * x * 0.5 + cp.sin(x)).sum(), x)
    tg = cp.LocalTarget()
    tg.compile(g)
    for k in range(3):
        new = xs * (k + 1)
        tg.write(x, new)
        tg.run()
        got = tg.read(g)
        assert got.dtype == np.float32 and got.shape == (100,)
        np.testing.assert_allclose(got, new + np.cos(new.astype(np.float64)), rtol=1e-5)
        assert np.array_equal(got, element_wise(tg, g))
        assert np.array_equal(tg.read(x), new)
    assert tg._write_plans[id(x)][1] is not None and tg._read_plans[id(g)][1] is not None
    tg.write(x, [float(v) for v in xs])  # a list and float64 are converted
    assert np.array_equal(tg.read(x), xs)


@pytest.mark.parametrize("dtype, values", [
    (np.float32, np.arange(6, dtype=np.float32) / 3),
    (np.int32, np.arange(6, dtype=np.int32) - 3),
    (np.bool_, np.array([True, False, True, True, False, False])),
])
@pytest.mark.parametrize("packed", [True, False])
def test_dtypes_and_matrix_shape(dtype: Any, values: Any, packed: bool) -> None:
    m = cp.value(np.zeros((2, 3), dtype=dtype), packed=packed)
    out = cp.where(m, m, m) if dtype is np.bool_ else m * 2
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.write(m, values.reshape(2, 3))
    tg.run()
    back = tg.read(m)
    assert back.shape == (2, 3) and back.dtype == np.dtype(dtype)
    assert np.array_equal(back, values.reshape(2, 3))
    expect = values.reshape(2, 3) if dtype is np.bool_ else values.reshape(2, 3) * 2
    assert np.array_equal(tg.read(out), expect)
    if not packed:
        assert np.array_equal(tg.read(out), element_wise(tg, out))


def test_scattered_elements_are_gathered() -> None:
    """An unpacked array whose elements are not neighbours in the data region (reversed, and
    every other one): one gather through the plan's index array."""
    xs = np.arange(8, dtype=np.float32)
    x = cp.value(xs, packed=False)
    items = x.items()
    y = x * 3
    rev = cp.vector(items[::-1])
    odd = cp.vector(y.items()[1::2])
    tg = cp.LocalTarget()
    tg.compile(y, rev, odd)
    tg.write(x, xs + 1)
    tg.run()
    assert np.array_equal(tg.read(rev), (xs + 1)[::-1])
    assert np.array_equal(tg.read(odd), ((xs + 1) * 3)[1::2])
    tg.write(rev, xs)  # writing through the reversed view scatters
    assert np.array_equal(tg.read(x), xs[::-1])
    # the copies went through plans: a gather for the reversed view, a slice for x
    assert tg._read_plans[id(rev)][1]._index is not None
    assert tg._write_plans[id(rev)][1]._index is not None
    assert tg._read_plans[id(x)][1]._index is None


def test_several_at_once() -> None:
    a = cp.value(np.zeros(4, np.float32), packed=False)
    b = cp.value(np.zeros(3, np.float32))
    s = cp.value(0.0)
    out = a.sum() + b.sum() + s
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.write(a, [1, 2, 3, 4], b, np.ones(3, np.float32), s, 0.5)
    tg.run()
    ra, rb, total = tg.read(a, b, out)
    assert np.array_equal(ra, [1, 2, 3, 4]) and np.array_equal(rb, [1, 1, 1])
    assert total == pytest.approx(13.5)
    with pytest.raises(TypeError, match=r"\(input, value\) pairs"):
        tg.write(a, [1, 2, 3, 4], b)


@pytest.mark.parametrize("packed", [True, False])
def test_wrong_writes_raise_and_change_nothing(packed: bool) -> None:
    x = cp.value(np.arange(4, dtype=np.float32), packed=packed)
    i = cp.value(np.arange(4, dtype=np.int32), packed=packed)
    flag = cp.value(np.zeros(4, dtype=bool), packed=packed)
    out = x * 2 + i + cp.where(flag, 1.0, 0.0)
    tg = cp.LocalTarget()
    tg.compile(out)
    for _ in range(2):  # the first call makes the plan, the second uses it
        with pytest.raises(ValueError, match=r"writing shape \(3,\) into an input of shape "
                                             r"\(4,\)"):
            tg.write(x, [1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="shape"):
            tg.write(x, np.ones((4, 1), np.float32))
        with pytest.raises(ValueError, match="shape"):
            tg.write(x, np.float32(1))  # no broadcasting of one number
        with pytest.raises(TypeError, match="not a number"):
            tg.write(x, ["a", "b", "c", "d"])
        with pytest.raises(TypeError, match="truncated"):
            tg.write(i, [0.5, 1, 2, 3])
        with pytest.raises(OverflowError, match="int32"):
            tg.write(i, np.array([2**40, 0, 0, 0]))
        with pytest.raises(TypeError, match="True or False"):
            tg.write(flag, [2, 0, 0, 0])
        with pytest.raises((TargetError, TypeError)):
            tg.write(out, np.zeros(4, np.float32))  # computed, not an input
    assert np.array_equal(tg.read(x), np.arange(4, dtype=np.float32))
    assert np.array_equal(tg.read(i), np.arange(4))


def test_read_before_run_is_not_computed_then_planned() -> None:
    x = cp.value(np.arange(3, dtype=np.float32), packed=False)
    y = x + 1
    tg = cp.LocalTarget()
    tg.compile(y)
    with pytest.raises(NotComputedError, match=r"tg\.run"):
        tg.read(y)
    tg.run()
    assert np.array_equal(tg.read(y), [1, 2, 3])
    tg.write(x, [5, 6, 7])
    tg.run()
    assert np.array_equal(tg.read(y), [6, 7, 8])


def test_elements_the_program_does_not_read() -> None:
    """An unpacked input of which the program uses one element: the others are kept as
    written (the element-wise path), the used one reaches the program."""
    x = cp.value(np.zeros(3, np.float32), packed=False)
    y = x[1] * 2
    tg = cp.LocalTarget()
    tg.compile(y)
    tg.write(x, [1, 2, 3])
    tg.run()
    assert tg.read(y) == 4
    assert np.array_equal(tg.read(x), [1, 2, 3])


def test_a_new_program_gets_new_plans() -> None:
    x = cp.value(np.zeros(3, np.float32), packed=False)
    tg = cp.LocalTarget()
    tg.compile(x * 2)
    tg.write(x, [1, 2, 3])
    tg.compile(x * 2, x + 1)  # another layout: the old plan must not be used
    tg.write(x, [4, 5, 6])
    tg.run()
    assert np.array_equal(tg.read(x), [4, 5, 6])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=40), st.booleans())
def test_plan_matches_element_wise(values: list[float], packed: bool) -> None:
    xs = np.array(values, dtype=np.float32)
    x = cp.value(np.zeros_like(xs), packed=packed)
    y = (x * 2).to_unpacked()
    tg = cp.LocalTarget()
    tg.compile(y)
    tg.write(x, xs)
    tg.run()
    assert np.array_equal(tg.read(y), element_wise(tg, y))
    assert np.array_equal(tg.read(y), xs * np.float32(2))


def test_named_array_port_of_a_saved_program(tmp_path: Any) -> None:
    """A loaded program's array port by name: its shape or a flat list of all its elements,
    the port's own error for another size (the first write makes the plan, the next use it)."""
    grid = cp.value(np.zeros((2, 3), np.float32), packed=False, name="grid")
    tg = cp.LocalTarget()
    tg.compile(grid * 2)
    tg.save(str(tmp_path / "p.cpimg"))
    loaded = cp.LocalTarget()
    loaded.deploy(cp.load(str(tmp_path / "p.cpimg")))
    shape = np.shape(loaded.read("grid"))  # the shape the image records, (6,) or (2, 3)
    assert np.prod(shape) == 6
    xs = np.arange(6, dtype=np.float32).reshape(shape)
    for k in range(2):
        loaded.write("grid", xs + k)
        assert np.array_equal(loaded.read("grid"), xs + k)
        loaded.write("grid", (xs + k + 10).reshape(-1).tolist())  # flat, row-major
        assert np.array_equal(loaded.read("grid"), xs + k + 10)
        with pytest.raises(ValueError, match=r"port 'grid' holds 6 values.*got 5"):
            loaded.write("grid", [1, 2, 3, 4, 5])
    assert loaded._write_plans["grid"][1] is not None
    assert loaded._read_plans["grid"][1] is not None
