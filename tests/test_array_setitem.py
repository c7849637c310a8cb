"""NumPy's item assignment on copapy arrays (docs/decisions/2026-12-05-numpy-item-assignment.md):
``a[key] = v`` and ``a[key] op= v`` traced by cp.jit, compiled and run, against the same function
run by NumPy on NumPy arrays, bit for bit, packed and unpacked; NumPy's views (a write through
a slice, reshape or transpose reaches the base, and the other way round); and each refusal
(jit arguments, read-only views, traced indices, ambiguous writes) naming the problem and fix.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arrays import _numpy_views
from copapy.graph.node import Node

from .support.checks import examples

SETTINGS = settings(max_examples=examples(60), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
DTYPES = ("float32", "int32", "bool")


def same_bits(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    assert got.tobytes() == want.tobytes(), (got, want)


def in_form(y: Any, packed: bool) -> Any:
    """A copapy array in the form under test (a NumPy array unchanged)."""
    if isinstance(y, np.ndarray):
        return y
    return y.to_packed() if packed else y.to_unpacked()


def run_both(f: Callable[[Any], Any], x: np.ndarray) -> None:
    """f jitted equals f run by NumPy, bit for bit; where NumPy raises, copapy raises too."""
    try:
        want = f(x.copy())
    except Exception:  # NumPy refuses: copapy must not give a result
        with pytest.raises(Exception):  # noqa: B017
            cp.jit(f)(x)
        return
    got = cp.jit(f)(x)
    for g, w in zip(got, want, strict=True) if isinstance(want, tuple) else [(got, want)]:
        same_bits(g, w)


@st.composite
def values(draw: st.DrawFn, shape: tuple[int, ...], dtype: str, op: str) -> Callable[[Any], Any]:
    """A value to assign into elements of ``shape``: a number, a constant array, or one
    computed from the argument (traced), of the full shape or broadcast (a row). Floats into
    int32 for ``=`` only (a[..., 0] is a 0-d view in NumPy, whose += of a float raises)."""
    kind = draw(st.sampled_from(["number", "constant", "traced scalar", "traced", "row"]))
    if dtype == "bool":
        number: Any = draw(st.booleans())
    elif dtype == "int32" and op == "+=":
        number = draw(st.integers(-9, 9))
    elif dtype == "int32":
        number = draw(st.integers(-9, 9) | st.floats(-9, 9).map(lambda v: round(v, 1)))
    else:
        number = draw(st.floats(-9, 9, width=32) | st.integers(-9, 9))
    if kind == "number" or (kind != "traced scalar" and (not shape or 0 in shape)):
        return lambda x: number
    sub = shape if kind != "row" else shape[-1:]
    if kind == "constant":
        data = draw(hnp.arrays(np.dtype(dtype), sub, elements=st.integers(-9, 9).map(
            lambda v: np.asarray(v).astype(dtype).item())))
        return lambda x: data
    scale = draw(st.sampled_from([1, 2, 3]))

    def traced(x: Any) -> Any:
        flat = x.ravel()
        if kind == "traced scalar":
            return flat[scale % flat.size] if dtype == "bool" else flat[scale % flat.size] * scale
        picked = flat[np.arange(int(np.prod(sub))) % flat.size].reshape(sub)
        return picked if dtype == "bool" else picked * scale - 1
    return traced


VIEWS: dict[str, Callable[[Any], Any]] = {
    "itself": lambda y: y, "reshape": lambda y: y.reshape(-1), "T": lambda y: y.T,
    "rows": lambda y: y[1:], "reversed": lambda y: y[::-1], "flip": np.flip,
}


@st.composite
def steps(draw: st.DrawFn, shape: tuple[int, ...], dtype: str) -> list[Any]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        view = draw(st.sampled_from(sorted(VIEWS)))
        vshape = VIEWS[view](np.zeros(shape)).shape
        assume(0 not in vshape)
        key_kind = draw(st.sampled_from(["basic", "basic", "fancy", "mask"]))
        if key_kind == "basic":
            key: Any = draw(hnp.basic_indices(vshape, allow_newaxis=True))
        elif key_kind == "fancy":
            key = draw(hnp.integer_array_indices(vshape, result_shape=hnp.array_shapes(
                max_dims=2, max_side=3)))
            picked = np.arange(int(np.prod(vshape))).reshape(vshape)[key]
            assume(np.unique(picked).size == picked.size)  # else which write wins is open
        else:
            key = draw(hnp.arrays(np.bool_, vshape))
        tshape = np.zeros(vshape)[key].shape
        op = draw(st.sampled_from(["=", "=", "+="]))
        if op == "+=":
            assume(0 not in tshape and len(tshape) <= 4)  # a[k] is a copapy array
        out.append((view, key, op, draw(values(tshape, dtype, op))))
    return out


def program(plan: list[Any], packed: bool) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        y = in_form(x.copy(), packed)
        kept = VIEWS[plan[-1][0]](y)  # a view taken before the writes, read after them
        for view, key, op, value in plan:
            target = VIEWS[view](y)
            v = value(x)
            if op == "=":
                target[key] = v
            elif y.dtype == bool or str(y.dtype) == "bool":
                target[key] |= v
            else:
                target[key] += v
        return y, kept
    return f


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), packed=st.booleans(),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
def test_assignment_matches_numpy(data: st.DataObject, dtype: str, packed: bool,
                                  shape: tuple[int, ...]) -> None:
    """Random shapes, keys (ints, slices, ..., None, int arrays, bool masks), values (numbers,
    constants, traced, broadcast rows), views (slices, reshape, transpose, np.flip) and +=:
    the jitted function equals NumPy's, bit for bit, packed and unpacked."""
    x = data.draw(hnp.arrays(np.dtype(dtype), shape, elements=st.integers(-9, 9).map(
        lambda v: np.asarray(v).astype(dtype).item())))
    plan = data.draw(steps(shape, dtype))
    run_both(program(plan, packed), x)


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), packed=st.booleans(), rows=st.integers(17, 24),
       cols=st.integers(1, 6))
def test_many_runs_match_numpy(data: st.DataObject, packed: bool, rows: int, cols: int) -> None:
    """Targets in more runs than one concat takes (a column, every other element, a mask):
    the scatter-and-select and constant-mask forms, against NumPy."""
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) - 7
    mask = data.draw(hnp.arrays(np.bool_, (rows, cols)))
    col = data.draw(st.integers(0, cols - 1))
    step = data.draw(st.integers(2, 3))

    def f(a: Any) -> Any:
        y = in_form(a.copy(), packed)
        y[:, col] = a[:, 0] * 3
        y.reshape(-1)[::step] = -a.reshape(-1)[: len(range(0, rows * cols, step))]
        y[mask] = 0.5
        y[::-2, ::-1] *= 2
        return y
    run_both(f, x)


@pytest.mark.parametrize("packed", [False, True])
def test_probe_cases(packed: bool) -> None:
    """The item assignments that all failed before (float() of a traced value, or "copapy
    arrays are immutable"), with the traced array in both forms."""
    a = np.array([1.0, 2.0, 3.0], np.float32)

    def zeros_like_set(x: Any) -> Any:
        J = np.zeros((2, 2), np.float32, like=x) if not isinstance(x, np.ndarray) else \
            np.zeros((2, 2), np.float32)
        J[0, 0] = x[0]
        J[1, 1] = x[1] * 2
        return J

    def copy_set(x: Any) -> Any:
        y = in_form(x.copy(), packed)
        y[0] = 5.0
        return y

    def empty_loop(x: Any) -> Any:
        y = in_form(x * 0, packed)
        for i in range(3):
            y[i] = x[i] * i
        return y

    def concat_set(x: Any) -> Any:
        y = in_form(np.concatenate([x, x]), packed)
        y[0] = x[2]
        return y

    def slice_iadd(x: Any) -> Any:
        y = in_form(x * 1, packed)
        y[1:] += 1.0
        return y

    def mask_set(x: Any) -> Any:
        y = in_form(x * 1, packed)
        y[y > 1.5] = 0
        return y

    for f in (zeros_like_set, copy_set, empty_loop, concat_set, slice_iadd, mask_set):
        run_both(f, a)


@pytest.mark.parametrize("packed", [False, True])
def test_the_empty_key_is_the_whole_array(packed: bool) -> None:
    """``a[()]`` is every element, as NumPy's (hypothesis found ``a[()] += 1`` raising
    "0 indices for an array of 1 dimensions")."""
    def f(x: Any) -> Any:
        y = in_form(x.copy(), packed)
        y[()] += 3
        return y[()] * 2

    run_both(f, np.array([0], np.int32))
    run_both(f, np.array([[1.5, 2.0], [3.0, -4.0]], np.float32))


@pytest.mark.parametrize("packed", [False, True])
def test_views_write_through_both_ways(packed: bool) -> None:
    """NumPy's views: a write into a slice, reshape, transpose, np.flip, np.split part or a
    row of iteration reaches the base, a write into the base reaches the views taken before,
    ravel of a transpose and flatten are copies, and another name for the same array sees
    a += b."""
    x = np.arange(1, 13, dtype=np.float32)

    def f(a: Any) -> Any:
        y = in_form(a.copy(), packed)
        m = y.reshape(3, 4)
        t = m.T
        part = np.split(y, 3)[1]
        flat_copy = t.ravel()
        flattened = m.flatten()
        alias = y
        t[0, 1] = -1.0  # m[1, 0], y[4]
        y[5] = -2.0  # part[1], m[1, 1]
        part[2] += 10.0  # y[6]
        np.flip(m)[0, 0] = 99.0  # y[11]
        for row in m:
            row[3] *= 2
        y += 1
        flat_copy[0] = 1000.0
        flattened[1] = 2000.0
        return y, m, t, part, flat_copy, flattened, alias
    got = cp.jit(f)(x)
    want = f(x.copy())
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        same_bits(g, w)


@pytest.mark.parametrize("packed", [False, True])
def test_overlapping_source_and_target(packed: bool) -> None:
    """y[1:] = y[:-1], z[:] = z[::-1], a transposed view += its own row: the value is read
    before anything is written, as NumPy's assignment does for overlapping memory."""
    def f(a: Any) -> Any:
        y = in_form(a.copy(), packed)
        y[1:] = y[:-1]
        z = in_form(a.copy(), packed)
        z[:] = z[::-1]
        w = in_form(a.copy(), packed).reshape(2, 3)
        w[:] = w[::-1, ::-1]
        w.T[0] += w[0, :2]
        return y, z, w
    x = np.arange(6, dtype=np.float32)
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)


@pytest.mark.parametrize("packed", [False, True])
def test_views_of_copies(packed: bool) -> None:
    """A view of a copy made by a possible-view operation (ravel of a transpose): writes into
    the base do not reach it, writes into the copy reach its view, in either order."""
    def f(a: Any) -> Any:
        y = in_form(a.copy(), packed).reshape(2, 3)
        p = y.T.ravel()
        c = p[1:]
        d = np.flip(p)
        y[0, 0] = 50.0
        p[1] = 7.0
        c[-1] += 1.0
        return y, p, c, d
    x = np.arange(6, dtype=np.float32)
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)


def test_copies_are_independent() -> None:
    """copy(), to_packed(), to_unpacked() and cp.matrix(m) are copies in either form:
    assigning into one leaves the original as it is (to_packed of a packed array and
    cp.matrix of a matrix gave the array itself); a.imag is read-only, as NumPy's."""
    with pytest.raises(ValueError, match=r"read-only.*imag"):
        cp.vector([1.0]).imag[0] = 1.0
    for packed in (False, True):
        v = cp.vector([1.0, 2.0, 3.0], packed=packed)
        m = v.reshape(1, 3)
        for c in (v.copy(), v.to_packed(), v.to_unpacked(), cp.matrix(m)[0]):
            c[0] = 7.0
        t = cp.LocalTarget()
        t.compile(v)
        t.run()
        same_bits(t.read(v), np.array([1.0, 2.0, 3.0], np.float32))


def test_casting_is_numpys() -> None:
    """Numbers convert as NumPy's assignment converts them (2.7 into int32 is 2, True into
    float32 is 1.0); traced values as astype (in range: NumPy's unsafe cast, bit for bit);
    NaN or an out-of-range number into int32 raise NumPy's own error."""
    x = np.array([1.5, -2.75, 3.25, 0.0], np.float32)

    def f(a: Any) -> Any:
        y = (a * 0).astype(np.int32)
        y[0] = 2.7
        y[1] = a[1] * 2
        y[2:] = a[2:] + 0.5
        z = a * 1
        z[0] = True
        z[1] = np.float64(1e-50)
        b = a > 0
        b[0] = 0.0
        b[1] = a[3] + 1
        return y, z, b
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)
    y = cp.vector([1, 2, 3])
    with pytest.raises(ValueError, match=r"cannot convert float NaN to integer.*copapy int32"):
        y[0] = float("nan")
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        y[0] = 1e10


def test_in_place_operators_use_same_kind_casting() -> None:
    """a op= b is NumPy's np.op(a, b, out=a): int32 /= or += a float, bool += 1 raise as
    NumPy's 'same_kind' rule does; float32 += float64 rounds into float32; a shape the
    result does not keep raises."""
    i = cp.vector([1, 2, 3])
    with pytest.raises(TypeError, match=r"same_kind.*astype"):
        i /= 2
    with pytest.raises(TypeError, match="same_kind"):
        i += 1.5
    b = cp.vector([True, False])
    with pytest.raises(TypeError, match="same_kind"):
        b += 1
    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        cp.vector([1.0, 2.0]).__iadd__(cp.matrix([[1.0, 2.0], [3.0, 4.0]]))

    def f(a: Any) -> Any:
        y = a * 1
        y += a.astype(np.float64) / 3
        y -= 1
        y *= 2
        y **= 2
        y //= 3
        y %= 5
        n = (a * 4).astype(np.int32)
        n <<= 1
        n >>= 1
        n &= 6
        n |= 1
        n ^= 3
        m = np.stack([a[:2], a[2:]])
        m @= np.eye(2, dtype=np.float32) * 2
        return y, n, m
    x = np.array([1.5, -2.75, 3.25, 7.0], np.float32)
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)


def test_jit_argument_refuses_assignment() -> None:
    """Assigning into an argument (or a view of it, or a += on it): NumPy would change the
    caller's array, a jitted function only reads it: refused, naming the copy to take."""
    x = np.ones(4, np.float32)

    def direct(a: Any) -> Any:
        a[0] = 2.0
        return a

    def through_view(a: Any) -> Any:
        a[1:][0] = 2.0
        return a

    def augmented(a: Any) -> Any:
        a += 1
        return a

    for f in (direct, through_view, augmented):
        with pytest.raises(ValueError, match=r"argument of a @cp.jit function.*x = x.copy\(\)"):
            cp.jit(f)(x)
    assert (x == 1).all()

    def copied(a: Any) -> Any:
        a = a.copy()
        a[0] = 2.0
        return a
    same_bits(cp.jit(copied)(x), np.array([2, 1, 1, 1], np.float32))


def test_program_input_refuses_assignment() -> None:
    for packed in (False, True):
        v = cp.value([1.0, 2.0], packed=packed)
        with pytest.raises(ValueError, match=r"program input.*y = x.copy\(\)"):
            v[0] = 1.0


def test_read_only_views_refuse() -> None:
    """np.broadcast_to gives a read-only view in NumPy: refused the same way."""
    y = cp.vector([1.0, 2.0, 3.0])
    b = np.broadcast_to(y, (2, 3))
    with pytest.raises(ValueError, match=r"read-only.*np.broadcast_to.*copy\(\)"):
        b[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        np.broadcast_to(np.arange(3.0), (2, 3))[0, 0] = 1.0  # NumPy's own


def test_traced_indices_refuse_and_name_the_fix() -> None:
    y = cp.vector([1.0, 2.0, 3.0])
    i = cp.value(1)
    with pytest.raises(TypeError, match=r"traced index.*cp.where\(np.arange"):
        y[i] = 0.0
    with pytest.raises(TypeError, match=r"traced index"):
        y[cp.vector([0, 1])] = 0.0
    with pytest.raises(TypeError, match=r"traced mask.*cp.where\(mask, v_full, a\)"):
        y[y > 1.0] = cp.vector([5.0, 6.0, 7.0])
    with pytest.raises(IndexError, match="leading dimensions"):
        cp.matrix([[1.0, 2.0]])[cp.vector([True, False])] = 0.0


def test_ambiguous_repeated_writes_refuse() -> None:
    """a[[0, 0]] = [1, 2]: which write NumPy keeps is unspecified: refused; the same value
    twice is fine (NumPy's a[[0, 0]] += 1 adds once, as here)."""
    y = cp.vector([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="more than once with different values"):
        y[[0, 0]] = [1.0, 2.0]
    run_both(lambda a: _repeat_add(a), np.array([1.0, 2.0, 3.0], np.float32))


def _repeat_add(a: Any) -> Any:
    y = a * 1
    y[[0, 0, 2]] += 1
    return y


def test_numpy_array_error_names_the_fix() -> None:
    """A traced value assigned into a plain NumPy array: NumPy asks for float()/int()/bool();
    the error names that case and np.zeros(shape, like=x)."""
    x = cp.vector([1.0, 2.0])
    for arr, v in ((np.zeros(2), x[0]), (np.zeros(2, np.int32), x[0].astype(np.int32)),
                   (np.zeros(2, bool), x[0] > 1)):
        with pytest.raises(TypeError, match=r"NumPy (bool )?array.*like=x"):
            arr[0] = v


def test_packed_assignment_is_few_nodes() -> None:
    """A slice, a column and a mask of a packed 100 000-element array are a handful of nodes
    (slices laid end to end, one scatter and select), not one per element."""
    n = 100_000
    y = cp.value(np.zeros(n, np.float32)).copy()
    y[1:] = y[:-1] + 1.0
    m = y.reshape(1000, 100)
    m[:, 3] = 2.0
    m[:, 5] = m[:, 4]
    y[::7] = 0.5
    assert _count(y.node()) < 40


def _count(root: Node) -> int:
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) not in seen:
            seen.add(id(node))
            todo.extend(node.args)
    return len(seen)


@pytest.mark.parametrize("packed", [False, True])
def test_gradient_through_assignment(packed: bool) -> None:
    """cp.grad through assigned slices, an in-place product and a column: the update is made
    of differentiable operations (concat, scatter, select), against central differences."""
    x0 = np.array([0.5, -1.0, 2.0, 3.0, 1.5, -0.25], np.float32)

    def f(a: Any) -> Any:
        y = a.copy()
        y[1:] = a[:-1] * 2
        y[::2] *= a[1::2]
        m = y.reshape(2, 3)
        m[:, 1] = np.sin(a[:2])
        return (y * y).sum()
    x = cp.value(x0, packed=packed)
    s = f(x)
    g = cp.grad(s, x)
    t = cp.LocalTarget()
    t.compile(s, g)
    t.run()
    wide = x0.astype(np.float64)
    want = [(f(wide + d) - f(wide - d)) / 2e-3 for d in np.eye(6) * 1e-3]
    np.testing.assert_allclose(t.read(g), want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(t.read(s), f(wide), rtol=1e-6)


def test_target_reads_the_array_as_assigned() -> None:
    """tg.read keeps a copy plan by the array's identity: an assignment after a read makes a
    new one (the old plan read the elements before the assignment, silently)."""
    y = cp.vector([1.0, 2.0, 3.0, 4.0], packed=True).copy()
    t = cp.LocalTarget()
    t.compile(y)
    t.run()
    same_bits(t.read(y), np.array([1, 2, 3, 4], np.float32))
    y[0] = 9.0
    view = y[1:]
    with pytest.raises(Exception, match=r"(?i)not|compute"):
        t.read(y)  # the assigned elements are not in the compiled program
    t.compile(y, view)
    t.run()
    same_bits(t.read(y), np.array([9, 2, 3, 4], np.float32))
    y[1] = 7.0
    with pytest.raises(Exception, match=r"(?i)not|compute"):
        t.read(view)  # the view took the assignment too


def test_copyto() -> None:
    """np.copyto(dst, src[, where=]) into a copapy array, as NumPy's; 'same_kind' refusals."""
    def f(a: Any) -> Any:
        y = a * 1
        np.copyto(y, a[::-1] * 2)
        z = a.copy()
        z.fill(0.5)
        np.copyto(z, 3.5, where=a > 2)
        n = (a * 0).astype(np.int32)
        np.copyto(n, a * 1.5, casting="unsafe", where=np.array([True, False, True, True]))
        return y, z, n
    x = np.array([1.5, -2.75, 3.25, 7.0], np.float32)
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)
    with pytest.raises(TypeError, match="same_kind"):
        np.copyto(cp.vector([1, 2]), cp.vector([1.5, 2.5]))
    with pytest.raises(TypeError, match="like=x"):
        np.copyto(np.zeros(2), cp.vector([1.5, 2.5]))


@pytest.mark.parametrize("packed", [False, True])
def test_flat_put_and_fill_diagonal(packed: bool) -> None:
    """a.flat[k] = v (the value repeated, through a view's own order), a.flat = v, a.put,
    np.put and np.fill_diagonal (NumPy's own code, through a.flat), against NumPy."""
    def f(a: Any) -> Any:
        y = in_form(a.copy(), packed)
        y.flat[[0, 1, 2]] = a[:2]
        m = y.reshape(3, 4)
        m.T.flat[1:3] = [5.0, 6.0]
        np.put(y, [4, 11], a[7])
        m.put([5], -1.5)
        np.fill_diagonal(m, a[3] * 2)
        z = in_form(a.copy(), packed)
        z.flat = [1.0, 2.0, 3.0]
        return y, m, z, y.flat[2:5]
    x = np.arange(12, dtype=np.float32) - 3.5
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)
    with pytest.raises(TypeError, match="mode='raise' only"):
        cp.vector([1.0, 2.0]).put([0], 1.0, mode="wrap")


def test_a_function_writing_its_argument_leaves_the_index_maps() -> None:
    """The second run on index maps (which finds NumPy's views) of a function that writes
    into its argument: the maps are restored and its result refuses assignment."""
    def writes(a: Any) -> Any:
        a[0] = 9
        return a[1:]
    y = cp.vector([1.0, 2.0, 3.0])
    r = _numpy_views(writes, (y,), {}, y[1:].copy())
    with pytest.raises(ValueError, match="cannot tell"):
        r[0] = 1.0
    assert y._index_map()[1].tolist() == [0, 1, 2]


def test_views_of_large_arrays_make_no_index_maps() -> None:
    """Slices of a 4 Mi-element array, an assignment into another array, the slices read
    again: no index map of the large array (its elements could not have changed)."""
    x = cp.value(np.zeros(1 << 22, np.float32))
    tracemalloc.start()
    try:
        v = x[::2].reshape(-1, 2).T
        y = x[:3].copy()
        y[0] = 1.0
        v.sum()
        w = y[1:]
        y[2] = 5.0
        w.sum()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def test_numpy_constructors_with_like() -> None:
    """np.zeros/ones/empty/full(shape, like=x) of a traced x: NumPy's types and shapes,
    assignable (NumPy never dispatched them: "no implementation found for numpy.zeros");
    np.zeros_like is a copapy array, so an assigned value is cast into its type."""
    def f(a: Any) -> Any:
        like = {} if isinstance(a, np.ndarray) else {"like": a}
        z = np.zeros((2, 2), **like)
        z[0, 1] = a[0]
        o = np.ones(3, np.int32, **like)
        o[1:] = a[1:3] * 2
        e = np.empty(2, bool, **like)
        e[:] = a[:2] > 1
        e[1] = False
        f = np.full(2, 2.5, np.float32, **like)
        f[0] = a[2]
        n = np.zeros_like(a.astype(np.int32))
        n[0] = a[1] * 2  # cast into int32 (an object array kept the float)
        n[1:] += 3
        return z, o, e, f, n
    x = np.array([1.5, 2.25, 3.0], np.float32)
    for g, w in zip(cp.jit(f)(x), f(x.copy()), strict=True):
        same_bits(g, w)
