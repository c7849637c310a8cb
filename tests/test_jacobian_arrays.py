"""cp.jacobian of array programs (reductions, broadcasting, views, linear algebra, NumPy
functions on traced arrays) compiled and run, against JAX's ``jacrev`` of the same program in
float64 (jax.numpy takes the place of numpy), both modes, packed and unpacked inputs; and the
conventions at kinks where copapy and JAX differ, pinned (docs/semantics.md, "Gradients";
docs/decisions/2026-12-05-array-jacobians-against-jax.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.graph.node import is_const

jax.config.update("jax_enable_x64", True)

F64 = cp.float64
Program = Callable[..., Any]  # (xp, *arrays) -> array, with xp numpy (traced) or jax.numpy

#: name -> (program, operand shapes); every one runs unchanged on traced arrays and in JAX
CASES: dict[str, tuple[Program, list[tuple[int, ...]]]] = {
    "sum axis 0": (lambda xp, a: xp.sum(a, axis=0), [(2, 3)]),
    "mean axis 1": (lambda xp, a: xp.mean(a, axis=1), [(2, 3)]),
    "max axis 1": (lambda xp, a: xp.max(a, axis=1), [(2, 3)]),
    "min of all": (lambda xp, a: xp.min(a), [(2, 3)]),
    "ptp": (lambda xp, a: xp.ptp(a), [(5,)]),
    "prod": (lambda xp, a: xp.prod(a, axis=0), [(2, 3)]),
    "cumsum, cumprod": (lambda xp, a: xp.cumsum(a) * xp.cumprod(a), [(4,)]),
    "diff": (lambda xp, a: xp.diff(a, axis=0) * 2.0, [(3, 2)]),
    "var, std": (lambda xp, a: xp.var(a, ddof=1) + xp.std(a, axis=0), [(2, 3)]),
    "broadcast row": (lambda xp, a, b: a * b + a / (b * b + 1.0), [(2, 3), (3,)]),
    "broadcast column": (lambda xp, a, b: a / (b[:, None] * b[:, None] + 3.0), [(2, 3), (2,)]),
    "keepdims": (lambda xp, a: a - xp.max(a, axis=1, keepdims=True), [(2, 3)]),
    "views": (lambda xp, a: a.T[1:, ::2] * a[1, :2].sum() + a[::-1, 0][:2], [(3, 3)]),
    "reshape, flip, roll": (lambda xp, a: xp.flip(xp.reshape(a, (3, 2)), 0) @ xp.roll(a, 1, 1),
                            [(2, 3)]),
    "swapaxes, moveaxis": (lambda xp, a: xp.swapaxes(a, 0, 2) * xp.moveaxis(a, 0, -1)[0],
                           [(2, 2, 2)]),
    "matmul, vecmat, matvec": (lambda xp, a, b: (b @ a) * (a.T @ b) + (a.T @ a) @ (b @ a),
                               [(3, 2), (3,)]),
    "stacked matmul": (lambda xp, a, b: a @ b, [(2, 2, 3), (3, 2)]),
    "outer, cross, kron": (lambda xp, a, b: xp.outer(a, xp.cross(a, b)).sum(0)
                           + xp.kron(a, b)[3:6], [(3,), (3,)]),
    "einsum, tensordot": (lambda xp, a, b: xp.einsum("ij,jk->ik", a, a.T) @ xp.tensordot(a, b, 1),
                          [(2, 3), (3,)]),
    "where, select": (lambda xp, a, b: xp.where(a > b, a * b, xp.select([a < -0.5], [a * a], b)),
                      [(4,), (4,)]),
    "clip, maximum, minimum": (lambda xp, a, b: xp.clip(a, -1.0, 1.0) + xp.maximum(a, b) * b
                               - xp.minimum(a, 0.5), [(4,), (4,)]),
    "sort, median": (lambda xp, a: xp.sort(a) * xp.median(a), [(5,)]),
    "percentile": (lambda xp, a: xp.percentile(a, 30.0) + xp.quantile(a, 0.75), [(5,)]),
    "interp": (lambda xp, a: xp.interp(a, xp.array([-1.0, 0.1, 1.0]), xp.array([0.0, 2.0, 1.0])),
               [(4,)]),
    "convolve": (lambda xp, a, b: xp.convolve(a, b, mode="same"), [(4,), (3,)]),
    "gradient": (lambda xp, a: xp.gradient(a), [(5,)]),
    "cov, corrcoef": (lambda xp, a: xp.cov(a) + xp.corrcoef(a), [(2, 4)]),
    "average": (lambda xp, a, b: xp.average(a, axis=0, weights=b * b + 1.0), [(2, 3), (2,)]),
    "softmax": (lambda xp, a: xp.exp(a - xp.max(a)) / xp.sum(xp.exp(a - xp.max(a))), [(4,)]),
    "hypot, arctan2, power": (lambda xp, a, b: xp.hypot(a, b) + xp.arctan2(a, b)
                              + xp.power(a * a + 0.5, b), [(4,), (4,)]),
    "norms": (lambda xp, a: xp.linalg.norm(a) + xp.linalg.norm(a, axis=0)
              + xp.linalg.norm(a, 1), [(2, 3)]),
    "solve": (lambda xp, a, b: xp.linalg.solve(a + 4.0 * xp.eye(3), b), [(3, 3), (3, 2)]),
    "inv, det": (lambda xp, a: xp.linalg.inv(a + 3.0 * xp.eye(3)) * xp.linalg.det(a), [(3, 3)]),
    "slogdet": (lambda xp, a: xp.linalg.slogdet(a + 3.0 * xp.eye(3))[1], [(3, 3)]),
    "cholesky": (lambda xp, a: xp.linalg.cholesky(a @ a.T + 0.5 * xp.eye(3)), [(3, 3)]),
}


def jax_jacobian(program: Program, arrays: list[np.ndarray]) -> np.ndarray:
    """The (outputs, inputs) Jacobian in float64, the operands' columns side by side."""
    def f(*a: Any) -> Any:
        return jnp.asarray(program(jnp, *a), dtype=jnp.float64)

    args = [jnp.asarray(a) for a in arrays]
    m = int(np.prod(f(*args).shape))
    blocks = jax.jacrev(f, argnums=tuple(range(len(args))))(*args)
    return np.concatenate([np.asarray(b).reshape(m, -1) for b in blocks], axis=1)


def copapy_jacobians(program: Program, arrays: list[np.ndarray], packed: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Reverse and forward mode, compiled together and run once."""
    xs = [cp.value(a, F64, packed=packed) for a in arrays]
    y = program(np, *xs)
    rev = cp.jacobian(y, xs, mode="reverse")
    fwd = cp.jacobian(y, xs, mode="forward")
    tg = cp.LocalTarget()
    tg.compile(rev, fwd)
    tg.run()
    return np.asarray(tg.read(rev)), np.asarray(tg.read(fwd))


def operands(data: st.DataObject, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Generic points: elements in ±[0.21, 2.1] and apart from each other (no ties, no kinks)."""
    out = []
    for shape in shapes:
        n = int(np.prod(shape))
        picks = data.draw(st.lists(st.integers(0, 36), min_size=n, max_size=n, unique=True))
        signs = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
        vals = [(0.213 + 0.05 * k) * (-1.0 if s else 1.0) for k, s in zip(picks, signs,
                                                                       strict=True)]
        out.append(np.array(vals).reshape(shape))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_array_jacobians_against_jax(name: str, data: st.DataObject) -> None:
    program, shapes = CASES[name]
    arrays = operands(data, shapes)
    want = jax_jacobian(program, arrays)
    packed = data.draw(st.booleans())
    for got in copapy_jacobians(program, arrays, packed):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)


def run_jacobian(program: Program, arrays: list[np.ndarray], packed: bool,
                 mode: str = "reverse") -> np.ndarray:
    xs = [cp.value(a, F64, packed=packed) for a in arrays]
    jac = cp.jacobian(program(np, *xs), xs, mode=mode)  # type: ignore[arg-type]
    tg = cp.LocalTarget()
    tg.compile(jac)
    tg.run()
    return np.asarray(tg.read(jac))


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("name,program", [
    ("max", lambda xp, a: xp.max(a)), ("min", lambda xp, a: xp.min(-a)),
    ("ptp", lambda xp, a: xp.ptp(a)), ("max axis 0", lambda xp, a: xp.max(a, axis=0)),
    ("amax of 9", lambda xp, a: xp.max(xp.concatenate([a.ravel(), a[0]]))),
])
def test_ties_of_a_reduction_share_the_gradient_equally(name: str, program: Program,
                                                        packed: bool) -> None:
    """JAX's rule (and copapy's packed rmax): every element equal to the extreme gets an
    equal share. An unpacked array's min/max is a lane-order tree of binary max nodes, each
    splitting a tie in half: three equal elements got 1/4, 1/4, 1/2 (a 3-way tie of
    [[0.25, 1.5, 1.5], [-1, 1.5, -0.5]]), four 1/8, 1/8, 1/4, 1/2 and so on."""
    a = np.array([[0.25, 1.5, 1.5], [-1.0, 1.5, -0.5]])
    want = jax_jacobian(program, [a])
    for mode in ("reverse", "forward"):
        np.testing.assert_allclose(run_jacobian(program, [a], packed, mode), want, rtol=1e-15,
                                   atol=0, err_msg=f"{name} {mode}")


@settings(max_examples=10, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.0, 2.0]), min_size=1, max_size=40),
       packed=st.booleans())
def test_tie_shares_of_any_size_against_jax(values: list[float], packed: bool) -> None:
    """Many ties, any size (lane chains past 8 elements, a DAG through concatenate): the
    gradient of min and max, unpacked and packed, is JAX's equal share."""
    a = np.array(values)
    x = cp.value(a, F64, packed=packed)
    half = max(1, len(values) // 2)  # copapy has no empty arrays
    doubled = np.concatenate([x, x[:half]])
    outs = [cp.grad(x.max(), x), cp.grad(x.min(), x), cp.grad(doubled.max(), x)]
    tg = cp.LocalTarget()
    tg.compile(*outs)
    tg.run()
    refs = [jax.grad(jnp.max)(jnp.asarray(a)), jax.grad(jnp.min)(jnp.asarray(a)),
            jax.grad(lambda t: jnp.max(jnp.concatenate([t, t[:half]])))(jnp.asarray(a))]
    for got, want in zip(outs, refs, strict=True):
        np.testing.assert_allclose(tg.read(got), np.asarray(want), rtol=1e-15, atol=0)


def test_nested_binary_maxima_share_a_tie_equally() -> None:
    """max(max(a, b), c) is the maximum of three: a three-way tie gives each a third,
    however it is nested (JAX's binary rule gives 1/4, 1/4, 1/2 here: docs/semantics.md)."""
    a, b, c = cp.value(1.0, F64), cp.value(1.0, F64), cp.value(1.0, F64)
    grads = [*cp.grad(cp.max(cp.max(a, b), c), [a, b, c]),
             *cp.grad(cp.min(a, cp.min(b, c)), [a, b, c]),
             *cp.grad(cp.max(cp.max(a, b), cp.max(a, b)), [a, b])]
    tg = cp.LocalTarget()
    tg.compile(*grads)
    tg.run()
    got = [tg.read(g) for g in grads]
    assert got[:6] == [1 / 3] * 6 and got[6:] == [0.5, 0.5]
    tg.write(c, 2.0)  # no tie at the top: all to c, and a, b share nothing
    tg.run()
    assert [tg.read(g) for g in grads[:3]] == [0.0, 0.0, 1.0]
    tg.write(a, float("nan"))  # a NaN result equals none of its operands: 0, as binary max
    tg.run()
    assert all(np.isfinite(tg.read(g)) for g in grads)


def test_np_diff_of_a_traced_array_is_a_copapy_array() -> None:
    """It was NumPy's object array of values, which compile() and jacobian() refuse."""
    a = np.array([1.0, 2.5, 2.0, 7.0])
    x = cp.value(a, F64)
    d = np.diff(x, 2)
    assert isinstance(d, cp.Array) and d.shape == (2,)
    jac = cp.jacobian(d, x)
    tg = cp.LocalTarget()
    tg.compile(d, jac)
    tg.run()
    assert tg.read(d).tolist() == np.diff(a, 2).tolist()
    np.testing.assert_array_equal(tg.read(jac), jax_jacobian(lambda xp, t: xp.diff(t, 2), [a]))


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("sa,sb", [((2, 2, 3), (3, 2)), ((2, 3), (4, 3, 2)),
                                   ((2, 1, 2, 3), (3, 3, 1)), ((3,), (2, 3, 2)),
                                   ((2, 2, 3), (3,)), ((1, 2, 3), (2, 3, 4))])
def test_matmul_of_stacks_of_matrices(sa: tuple[int, ...], sb: tuple[int, ...],
                                      packed: bool) -> None:
    """NumPy's @ of stacks (leading axes broadcast); it failed with "dot needs two vectors"."""
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    x, y = cp.value(a, F64, packed=packed), cp.value(b, F64, packed=packed)
    r = x @ y
    tg = cp.LocalTarget()
    tg.compile(r)
    tg.run()
    got = tg.read(r)
    assert got.shape == (a @ b).shape
    np.testing.assert_allclose(got, a @ b, rtol=1e-13, atol=1e-15)


def test_matmul_of_stacks_that_do_not_fit_is_named() -> None:
    with pytest.raises(cp.ShapeError, match=r"matmul: shapes \(2, 2, 3\) and \(3, 3, 2\) do "
                                            r"not fit"):
        cp.value(np.ones((2, 2, 3))) @ cp.value(np.ones((3, 3, 2)))
    with pytest.raises(cp.ShapeError, match="do not fit"):
        cp.value(np.ones((2, 2, 3))) @ cp.value(np.ones((2, 2)))


def kink(program: Program, at: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """copapy's and JAX's Jacobian of a program of one (n,) operand at ``at``."""
    a = np.array(at)
    return run_jacobian(program, [a], False), jax_jacobian(program, [a])


def test_conventions_at_kinks_where_copapy_and_jax_differ() -> None:
    """Documented choices (docs/semantics.md, "Gradients"); JAX's own in the comments."""
    # abs'(±0) = 0, the subgradient at the minimum (PyTorch's); JAX's is 1 (x >= 0 ? 1 : -1)
    ours, theirs = kink(lambda xp, a: xp.abs(a), [0.0, -0.0, 2.0])
    assert np.diag(ours).tolist() == [0.0, 0.0, 1.0] and np.diag(theirs).tolist() == [1, 1, 1]
    # so sqrt(|x|) at 0 is 0 * inf = NaN (JAX: inf)
    ours, theirs = kink(lambda xp, a: xp.sqrt(xp.abs(a)), [0.0])
    assert np.isnan(ours[0, 0]) and theirs[0, 0] == np.inf
    # np.fmax/np.fmin split a tie as maximum/minimum do; JAX's fmax gives it to the second
    ours, theirs = kink(lambda xp, a: xp.fmax(a[:2], a[2:]), [1.0, 0.5, 1.0, 0.0])
    assert ours[0].tolist() == [0.5, 0, 0.5, 0] and theirs[0].tolist() == [0, 0, 1, 0]
    # np.interp at the last knot: the flat extension (0); JAX: the last segment's slope
    ours, theirs = kink(lambda xp, a: xp.interp(a, xp.array([-1.0, 0.0, 1.0]),
                                                xp.array([0.0, 2.0, 1.0])), [-1.0, 0.0, 1.0])
    assert np.diag(ours).tolist() == [2.0, -1.0, 0.0]
    assert np.diag(theirs).tolist() == [2.0, -1.0, -1.0]
    # cholesky of a matrix that is not positive definite: the NaN result is a selected
    # constant, so its gradient is 0 (JAX: NaN)
    ours, theirs = kink(lambda xp, a: xp.linalg.cholesky(xp.reshape(a, (2, 2))),
                        [1.0, 2.0, 2.0, 1.0])
    assert (ours == 0).all() and np.isnan(theirs).any()


@pytest.mark.parametrize("name,program,at", [
    ("abs", lambda xp, a: xp.abs(a) * xp.sqrt(a * a + 1.0), [0.0, -0.0, 1.0]),
    ("clip bounds", lambda xp, a: xp.clip(a, -1.0, 1.0), [-1.0, 1.0, 0.0]),
    ("max ties", lambda xp, a: xp.maximum(a, 0.5) + xp.max(a), [0.5, 0.5, -1.0]),
    ("sqrt at 0 under where", lambda xp, a: xp.where(a > 0, a, 0.0), [0.0, -1.0, 1.0]),
    ("norm at 0", lambda xp, a: xp.linalg.norm(a - a), [0.5, 1.0, 2.0]),
    ("solve, pivot tie", lambda xp, a: xp.linalg.solve(xp.reshape(a, (2, 2)), xp.ones(2)),
     [1.0, 2.0, -1.0, 3.0]),
])
def test_no_nan_where_jax_is_finite_at_kinks(name: str, program: Program,
                                             at: list[float]) -> None:
    """At a kink copapy may take another (documented) subgradient than JAX, but it is NaN
    only where JAX's is not finite either; structural zeros are constants."""
    a = np.array(at)
    theirs = jax_jacobian(program, [a])
    xs = cp.value(a, F64)
    jac = cp.jacobian(program(np, xs), xs)
    tg = cp.LocalTarget()
    tg.compile(jac)
    tg.run()
    ours = np.asarray(tg.read(jac))
    assert not (np.isnan(ours) & np.isfinite(theirs)).any(), (ours, theirs)
    constant = np.array([is_const(v.node) for v in jac.items()]).reshape(jac.shape)
    assert (ours[constant] == 0).all()


@pytest.mark.parametrize("at", [(0.0, 0.0), (0.0, -0.0), (1e-200, 0.0), (0.5, 0.5), (3.0, -4.0)])
def test_hessian_of_hypot_cubed(at: tuple[float, float]) -> None:
    """f = h³, h = hypot(x, y): H = 3h·I + 3·v vᵀ/h, 0 at the origin. It was NaN there:
    hypot's gradient rule divided by h on the untaken side of its select, whose own
    derivative is 0 · (1/0). (JAX's Hessian is wrong at |x| = |y|: its hypot orders the
    operands with max/min, so the analytic form is the reference.)"""
    x = cp.value(np.array(at), F64)
    hessian = cp.hessian(np.hypot(x[0], x[1]) ** 3, x)
    tg = cp.LocalTarget()
    tg.compile(hessian)
    tg.run()
    v = np.array(at)
    h = float(np.hypot(*v))
    want = 3 * h * np.eye(2) + (3 * np.outer(v, v) / h if h else 0.0)
    np.testing.assert_allclose(tg.read(hessian), want, rtol=1e-13, atol=1e-150)  # h² underflows


VIEWS: dict[str, Callable[[Any], Any]] = {
    "v[1]": lambda v: v[1], "v[1:]": lambda v: v[1:], "v[::-1]": lambda v: v[::-1],
    "m[1, 2]": lambda m: m[1, 2], "m[1]": lambda m: m[1], "m[:, 1]": lambda m: m[:, 1],
    "m.T": lambda m: m.T, "m.T[0, 1]": lambda m: m.T[0, 1], "m.reshape(3, 2)": lambda m:
    m.reshape(3, 2),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_gradient_with_respect_to_a_view_of_a_packed_input(view: str) -> None:
    """cp.grad(y, v[1]) of a packed v is the gradient of v at that place: y reads v whole,
    not through the view node, and was given 0.0 (and only the view's own path otherwise:
    y = sum(v*v) + 3 v[1] gave 3, not 7)."""
    base = np.arange(6.0).reshape(2, 3) if view.startswith("m") else np.array([1.0, 2.0, 3.0])

    def program(xp: Any, a: Any) -> Any:
        return xp.sum(a * a * a) + 3.0 * a.reshape(-1)[1]

    x = cp.value(base, F64, packed=True)
    g = cp.grad(program(np, x), VIEWS[view](x))
    tg = cp.LocalTarget()
    tg.compile(g)
    tg.run()
    whole = np.asarray(jax.grad(lambda t: program(jnp, t))(jnp.asarray(base)))
    np.testing.assert_array_equal(tg.read(g), VIEWS[view](whole))


def test_an_input_the_output_does_not_depend_on_has_zero_columns() -> None:
    """A packed (3,) input that y does not read: its Jacobian block is (m, 3) zeros (it was
    one column wide) and cp.grad an array of zeros (tg.read gave one 0.0)."""
    v = cp.value(np.array([1.0, 2.0, 3.0]), F64, packed=True)
    s = cp.value(2.0, F64)
    jac = {mode: cp.jacobian([s * 2.0, s], [v, s], mode=mode) for mode in ("reverse", "forward")}
    g = cp.grad(s * 2.0, v)
    tg = cp.LocalTarget()
    tg.compile(g, *jac.values())
    tg.run()
    for j in jac.values():
        assert tg.read(j).tolist() == [[0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 1.0]]
    assert tg.read(g).tolist() == [0.0, 0.0, 0.0]
