"""Random NumPy programs built from compositions of operations (tests/support/compose.py:
element-wise ufuncs and operators with NEP 50 scalars, broadcasting, reductions with axis and
keepdims, reshapes and axis moves, basic and advanced indexing, joins, where/clip, products,
sort, item assignment into a copy), run three ways against NumPy on the same inputs: through
``@cp.jit`` with NumPy arguments, traced on ``cp.value`` inputs (packed and unpacked) in a
LocalTarget, and for a sample on aarch64 (unicorn). Shapes and dtypes must be NumPy's (under
the documented types of docs/semantics.md), values bit for bit (the inputs are small whole
numbers and halves, so sums and products are exact in any order; steps whose rounding depends
on the order make a program inexact: then within float32 rounding); a refusal must be one of
the documented ones, named (docs/decisions/2026-12-05-numpy-compositions.md). Also the
regressions the hunt found, each failing on the code before its fix."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp

from .support.checks import examples
from .support.compose import Program, draw_program, normalised

SETTINGS = dict(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

#: what a documented refusal says (an empty array, NumPy's unspecified double write, more than
#: four dimensions); anything else raised is a bug
REFUSALS = ("at least one element", "no empty one", "more than once",
            "copapy arrays have at most 4")


class Drawn:
    """The generator's choices drawn by hypothesis (so failures shrink)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def choice(self, options: Any) -> Any:
        return options[self.data.draw(st.integers(0, len(options) - 1))]


def mismatch(got: Any, want: Any, exact: bool) -> str | None:
    """Why ``got`` is not NumPy's ``want`` (None: it is). A Python number for a 0-d result is
    the jit's documented form of a scalar result."""
    if isinstance(got, bool | int | float) and np.ndim(want) == 0:
        got = np.asarray(want.dtype.type(got))
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        return f"{g.dtype}{list(g.shape)} where NumPy gives {w.dtype}{list(w.shape)}"
    g, w = g.reshape(-1), w.reshape(-1)
    if not exact and g.dtype.kind != "f":
        return None  # ints or bools of values that differ in rounding (an argmax of a var)
    if g.dtype.kind != "f":
        return None if np.array_equal(g, w) else f"{g} where NumPy gives {w}"
    # bit for bit; any NaN equals any NaN, and 0.0 equals -0.0 (x * 0 → 0 and x + 0 → x
    # while tracing, docs/semantics.md "Simplifications")
    same = (g.view(f"u{g.itemsize}") == w.view(f"u{w.itemsize}")) | (np.isnan(g) & np.isnan(w))
    same |= (g == 0) & (w == 0)
    if same.all():
        return None
    scale = max(1.0, float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)))
    if not exact and np.allclose(g, w, rtol=1e-4, atol=1e-4 * scale, equal_nan=True):
        return None
    return f"{g} where NumPy gives {w}"


def refused(prog: Program, run: Any) -> tuple[bool, Any]:
    """(True, None) when ``run(prog)`` raises a documented refusal, else (False, its result);
    any other error fails naming the program."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return False, run(prog)
        except (ValueError, TypeError, IndexError) as error:
            if any(r in str(error) for r in REFUSALS):
                return True, None
            raise AssertionError(f"{prog}: {type(error).__name__}: {error}") from error


def check(prog: Program, run: Any) -> None:
    """``run(prog)`` gives NumPy's result, or raises one of the documented refusals."""
    no, got = refused(prog, run)
    if not no:
        why = mismatch(got, prog.want, prog.exact)
        assert why is None, f"{prog}: {why}"


def local(prog: Program, packed: bool | str, arch: str | None = None) -> Any:
    """The program on cp.value inputs (packed, unpacked, or "mixed": every other one packed)
    compiled by a LocalTarget and run once."""
    out = prog(*[cp.value(a, packed=k % 2 == 0 if packed == "mixed" else bool(packed))
                 for k, a in enumerate(prog.inputs)])
    tg = cp.LocalTarget(arch=arch)
    tg.compile(out)
    tg.run()
    return tg.read(out)


@settings(max_examples=examples(150), **SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_jit_matches_numpy(data: st.DataObject) -> None:
    """Every step's value with elements, returned by one jitted function as a tuple."""
    prog = draw_program(Drawn(data))
    wants = [(w, e) for w, e in prog.wants if np.size(w)]
    if not wants:
        return
    no, got = refused(prog, lambda p: cp.jit(p.nonempty)(*[a.copy() for a in p.inputs]))
    if no:
        return
    got = got if isinstance(got, tuple) else (got,)
    for k, (g, (w, exact)) in enumerate(zip(got, wants, strict=True)):
        why = mismatch(g, w, exact)
        assert why is None, f"{prog}: value {k}: {why}"


@pytest.mark.parametrize("packed", [False, True, "mixed"])
@settings(max_examples=examples(60), **SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_traced_matches_numpy(packed: bool | str, data: st.DataObject) -> None:
    prog = draw_program(Drawn(data))
    check(prog, lambda p: local(p, packed))


@settings(max_examples=examples(25), **SETTINGS)  # type: ignore[arg-type]
@given(data=st.data())
def test_aarch64_matches_numpy(data: st.DataObject) -> None:
    """The same programs on cp.value inputs (every other one packed) compiled for aarch64 and
    run on unicorn (LocalTarget's emulator): every step's value with elements."""
    prog = draw_program(Drawn(data))
    wants = [(w, e) for w, e in prog.wants if np.size(w)]
    if not wants:
        return

    def run(p: Program) -> list[Any]:
        outs = p.nonempty(*[cp.value(a, packed=k % 2 == 0) for k, a in enumerate(p.inputs)])
        traced = [o for o in outs if isinstance(o, cp.Array | cp.Value)]
        tg = cp.LocalTarget(arch="aarch64")
        tg.compile(*traced)
        tg.run()
        return [tg.read(o) if isinstance(o, cp.Array | cp.Value) else o for o in outs]
    no, got = refused(prog, run)
    for k, (g, (w, exact)) in enumerate(zip([] if no else got, wants, strict=not no)):
        why = mismatch(g, w, exact)
        assert why is None, f"{prog}: value {k}: {why}"


# ---- the regressions the hunt found (each failed before its fix) ----

X = np.array([[3, 1, 2], [0, 5, 4]], np.int32)

REGRESSIONS: dict[str, Any] = {
    # a.reshape(()) made a 0-D copapy array: a Value beside it raised "unsupported operand",
    # and packed it compiled to a missing stencil (stack_i32 of shape ())
    "reshape to 0-d": lambda a: a[1, 0] + a[0, 1:2].reshape(()),
    "0-d of a gather": lambda a: np.maximum(a.ravel()[np.arange(1)].reshape(()), 0.5),
    "0-d of a sum": lambda a: a.ravel()[np.arange(2)].sum(keepdims=True).reshape(()) * 2,
    # NumPy's reductions and methods of a reduction's scalar result (a NumPy scalar there)
    "np.any of a scalar": lambda a: np.any(a[0, 0]),
    "np.prod of a scalar, keepdims": lambda a: np.prod(np.dot(a[0], a[1]), keepdims=True),
    "np.mean of a scalar": lambda a: np.mean(a.sum()),
    "scalar.sum()": lambda a: a.max(axis=None).sum() + a[0, 0].min(),
    "scalar.T, .shape, .ndim": lambda a: a.sum().T * a.sum(axis=1).ndim + a[0, 0].size,
    "scalar.reshape": lambda a: a.sum().reshape(1, 1) + a[0],
    "np.cumsum of a scalar": lambda a: np.cumsum(a[1, 1]),
    "np.sort(scalar, axis=None)": lambda a: np.sort(a[1, 1], axis=None),
    # sort and argsort of bools ("sort sorts numbers; cast bools first" before)
    "np.sort of bools": lambda a: np.sort(a > 1, axis=0),
    "np.argsort of bools": lambda a: np.argsort(a > 2, axis=None),
    # NumPy's array methods copapy arrays lacked (AttributeError)
    "a.squeeze()": lambda a: a.reshape(1, 6, 1).squeeze(),
    "a.squeeze(axis)": lambda a: a.reshape(1, 6, 1).squeeze(axis=2) * 2,
    "a.repeat": lambda a: a.repeat(2, axis=0),
    "a.take": lambda a: a.take([[5, 0]]) + a.take([1], axis=1).T,
    "a.sort() in place": lambda a: (lambda y: (y.sort(axis=0), y)[1])(a.copy()),
    # copapy's NumPy reductions of a scalar ("a scalar (0-d) traced value where an array is
    # needed" or "cp.matrix needs a 2-D sequence" before)
    "np.median of a scalar": lambda a: np.median(a[0, 0] * 1.5),
    "np.ptp, np.average of scalars": lambda a: np.ptp(a.sum()) + np.average(a[1, 1] * 0.5),
    "np.quantile of a scalar": lambda a: np.quantile(a[1, 2] * 1.5, 0.3),
    "np.linalg.norm of a scalar": lambda a: np.linalg.norm(a[0, 2] - 7.5),
    "np.count_nonzero of a scalar": lambda a: np.count_nonzero(a[1, 0]),
    "np.nansum(keepdims) of a scalar": lambda a: np.nansum(a[0, 1] * 0.5, keepdims=True),
    # writes through a view made by an int index after a slice, of an unpacked array: the
    # write reached an intermediate array, not y (y came back unchanged)
    "y[:, 0] += of an unpacked copy": lambda a: (lambda y: (y[:, 0].__iadd__(a[:, 1]), y)[1])(
        a.copy().to_unpacked() if isinstance(a, cp.Array) else a.copy()),
    "y[..., 1][...] = of an unpacked copy": lambda a: (lambda y: (y[..., 1].__setitem__(
        Ellipsis, 7), y)[1])(a.copy().to_unpacked() if isinstance(a, cp.Array) else a.copy()),
    "y.T[:, 1] *= of an unpacked copy": lambda a: (lambda y: (y.T[:, 1].__imul__(3), y)[1])(
        a.copy().to_unpacked() if isinstance(a, cp.Array) else a.copy()),
    # a[ints..., None] (one element with new axes) is NumPy's view: the write was lost, in
    # every form
    "y[1, 2, None] += of a copy": lambda a: (lambda y: (y[1, 2, None].__iadd__(5), y)[1])(
        a.copy()),
    "y[0][-1, None] = of a copy": lambda a: (lambda y: (y[0][-1, None].__setitem__(
        Ellipsis, 9), y)[1])(a.copy()),
    # dtype= of sum, prod, mean ("copapy takes axis= and keepdims= only" before)
    "sum(dtype=float32)": lambda a: np.sum(a > 1, axis=0, dtype=np.float32),
    "mean(dtype=float32) of ints": lambda a: a.mean(axis=1, dtype=np.float32),
    "prod(dtype=float32)": lambda a: a[:, :2].prod(axis=1, dtype=np.float32),
}


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions(name: str, packed: bool) -> None:
    """Jitted (packed argument) and traced on a cp.value input of the given form: NumPy's
    shape, dtype and values."""
    f = REGRESSIONS[name]
    want = normalised(np.asarray(f(X.copy())))
    got = cp.jit(f)(X.copy()) if packed else local(Program([X], want=want).with_fn(f), False)
    assert mismatch(got, want, exact=True) is None, (name, got, want)


def _into_copy(write: Any) -> Any:
    """A function writing into a copy of its argument with ``write(y, a)``, returning it."""
    def f(a: Any) -> Any:
        y = a.copy()
        write(y, a)
        return y
    return f


#: np.putmask and np.place on traced arrays ("not supported ... first argument must be an
#: array" before), constant and traced masks, constant and traced values, int32 targets
WRITES: dict[str, Any] = {
    "putmask constant mask, traced values": lambda y, a: np.putmask(y, X > 2, a * 2),
    "putmask traced mask, traced values": lambda y, a: np.putmask(y, a > 2, a[::-1] - 1),
    "putmask traced mask, cycled numbers": lambda y, a: np.putmask(y, a > 1, [1.5, -2, 7]),
    "putmask constant mask, cycled numbers": lambda y, a: np.putmask(y, X < 3, [4, -1]),
    "putmask traced scalar": lambda y, a: np.putmask(y, a != 1, a[0, 0]),
    "place constant mask, numbers": lambda y, a: np.place(y, X > 2, [7.0, 8.0]),
    "place constant mask, traced values": lambda y, a: np.place(y, X > 0, a[0] * 3),
    "place traced mask, one value": lambda y, a: np.place(y, a > 2, [-5]),
    "put_along_axis constant indices": lambda y, a: np.put_along_axis(
        y, np.argsort(X, axis=1)[:, :1], a[:, 2:] + 1, axis=1),
}


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("name", sorted(WRITES))
def test_putmask_and_place(name: str, dtype: str) -> None:
    f = _into_copy(WRITES[name])
    x = X.astype(dtype)
    want = normalised(f(x.copy()))
    for got in (cp.jit(f)(x.copy()), local(Program([x]).with_fn(f), False),
                local(Program([x]).with_fn(f), True)):
        assert mismatch(got, want, exact=True) is None, (name, got, want)


REFUSED: dict[str, tuple[Any, str]] = {
    "take_along_axis of an argsort": (lambda a: np.take_along_axis(
        a, np.argsort(a, axis=1), axis=1), r"np\.take_along_axis with traced indices.*np\.sort"),
    "put_along_axis at an argsort": (_into_copy(lambda y, a: np.put_along_axis(
        y, np.argsort(a, axis=1), 0, axis=1)), r"np\.put_along_axis with traced indices"),
    "place with a traced mask, two values": (_into_copy(lambda y, a: np.place(
        y, a > 2, [1, 2])), r"np\.place with a traced mask and several values.*np\.putmask"),
    "diff to nothing": (lambda a: np.diff(a, n=3, axis=1),
                        r"np\.diff\(n=3\) of shape \(2, 3\) along axis 1 is empty"),
    "take of traced indices": (lambda a: np.take(a, np.argsort(a)),
                               r"take constant indices"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusals_name_the_operation(name: str) -> None:
    """What has no fixed compiled form is refused naming the NumPy function and the fix
    (before: NumPy's "Cannot interpret 'cp.int32' as a data type", "array dimensions must be
    >= 1", "place() argument 1 must be numpy.ndarray")."""
    f, message = REFUSED[name]
    with pytest.raises((TypeError, ValueError, IndexError), match=message):
        cp.jit(f)(X.astype(np.float32))


# ---- compositions written by hand: advanced indices apart and together (NumPy moves their
# axes to the front), einsum and matmul broadcasting, views of views, writes through them ----

_RNG = np.random.default_rng(1)
A = _RNG.integers(-5, 5, (3, 4, 5)).astype(np.float32)
B = _RNG.integers(-5, 5, (4, 5)).astype(np.float32)
v = _RNG.integers(-5, 5, 5).astype(np.float32)
i1 = np.array([0, 2, 1])
i2 = np.array([4, 0, 3])

HAND: dict[str, tuple[Any, list[np.ndarray]]] = {
    "adv sep": (lambda a: a[i1, :, i2], [A]),
    "adv adj": (lambda a: a[:, i1[:2], i2[:2]], [A]),
    "adv bcast": (lambda a: a[i1[:, None], 1:3, i2[None, :2]], [A]),
    "adv+int": (lambda a: a[1, :, i2], [A]),
    "adv+int2": (lambda a: a[i1, 2, :], [A]),
    "int adv int": (lambda a: a[1, i1, 2], [A]),
    "mask+int": (lambda a: a[np.array([True, False, True]), 1], [A]),
    "slice mask": (lambda a: a[1:, np.array([True, False, True, True])], [A]),
    "none adv": (lambda a: a[None, i1, ..., i2[:1]], [A]),
    "einsum ii": (lambda b: np.einsum("ii->i", b[:, :4]), [B]),
    "einsum ij,ij": (lambda b: np.einsum("ij,ij->", b, b), [B]),
    "einsum batch": (lambda a, b: np.einsum("bij,jk->bik", a, b.T), [A, B]),
    "einsum ell": (lambda a, v: np.einsum("...i,...i->...", a, v), [A, v]),
    "einsum trace": (lambda b: np.einsum("ii", b[:, :4]), [B]),
    "matmul 3d@1d": (lambda a, v: a @ v, [A, v]),
    "matmul bcast": (lambda a, b: a[:1] @ b.T, [A, B]),
    "matmul 3d3d": (lambda a: a @ a.transpose(0, 2, 1), [A]),
    "T rev sum": (lambda a: a[::-1, ::-2].T.sum(axis=1), [A]),
    "swap max kd": (lambda a: np.swapaxes(a, 0, 2)[1:, ::-1].max(axis=(0, 2), keepdims=True), [A]),
    "concat T": (lambda a, b: np.concatenate([a[0].T, b.T[::-1]], axis=1), [A, B]),
    "stack views": (lambda a: np.stack([a[0], a[1].T.T, a[2, ::-1]], axis=-1), [A]),
    "cumsum T": (lambda a: np.cumsum(a.T, axis=1), [A]),
    "argmax T": (lambda a: np.argmax(a.transpose(2, 0, 1)[::-1], axis=2), [A]),
    "sort T": (lambda a: np.sort(a.transpose(1, 2, 0), axis=1), [A]),
    "where bcast": (lambda a, v: np.where(a > v, a, v[::-1]), [A, v]),
    "clip arrays": (lambda a, v: np.clip(a, v - 1, v[::-1] + 1), [A, v]),
    "roll 2 axes": (lambda a: np.roll(a, (1, -2), axis=(0, 2)), [A]),
    "tile 3d": (lambda a: np.tile(a[:, :1], (2, 1, 2)), [A]),
    "repeat arr": (lambda a: np.repeat(a, [1, 0, 2], axis=0), [A]),
    "split uneven": (lambda a: np.array_split(a, 3, axis=2)[1] * 2, [A]),
    "flip all": (lambda a: np.flip(a) + np.flip(a, (0, 2)), [A]),
    "moveaxis multi": (lambda a: np.moveaxis(a, [0, 1], [-1, 0]), [A]),
    "mean kd int": (lambda a: a.astype(np.int32).mean(axis=(0, 1), keepdims=True), [A]),
    "any axis T": (lambda a: (a.T > 2).any(axis=0), [A]),
    "prod axis": (lambda a: a[:, :2, :3].prod(axis=1), [A]),
    "int div mod": (lambda a: (a.astype(np.int32) // 3) * 3 + a.astype(np.int32) % 3, [A]),
    "bool ops": (lambda a: ((a > 0) & (a < 3)) ^ ~(a == 1), [A]),
    "setitem T view": (_into_copy(lambda y, a: y.T.__setitem__((0, slice(None)), -1)), [A]),
    "setitem adv sep": (_into_copy(lambda y, a: y.__setitem__((i1, slice(None), i2), 7)), [A]),
    "setitem adv val": (_into_copy(lambda y, a: y.__setitem__((i1, slice(None), i2),
                                                               a[0, :, :3].T)), [A]),
    "iadd rev": (lambda a: (lambda y: (y[::-1].__iadd__(a), y)[1])(a.copy()), [A]),
    "iadd overlap": (lambda a: (lambda y: (y[1:].__iadd__(y[:-1]), y)[1])(a.copy()), [A]),
    "reshape T reshape": (lambda a: a.T.reshape(4, -1).T.reshape(-1)[::7], [A]),
    "ravel T": (lambda a: a.transpose(1, 0, 2).ravel()[5:20:3], [A]),
    "diag": (lambda b: np.diag(b[:, :4]) + np.diag(b[:, :4], 1).sum(), [B]),
    "tril": (lambda b: np.tril(b) - np.triu(b, 1), [B]),
    "outer": (lambda v: np.outer(v, v[::-1]), [v]),
    "kron": (lambda v: np.kron(v[:2], v[:3]), [v]),
    "trace": (lambda b: np.trace(b[:, :4]) + b[:, :4].trace(1), [B]),
    "linalg norm ax": (lambda a: np.linalg.norm(a, axis=1), [A]),
    "vecdot": (lambda a, v: np.vecdot(a, v), [A, v]),
    "pad": (lambda b: np.pad(b, ((1, 0), (0, 2))), [B]),
    "broadcast_arrays": (lambda a, v: np.broadcast_arrays(a[0], v)[1] * 1, [A, v]),
    "atleast_3d": (lambda v: np.atleast_3d(v) + 0, [v]),
    "expand squeeze": (lambda a: np.squeeze(np.expand_dims(a[:, :1], 0), axis=(0, 2)), [A]),
    "column_stack": (lambda v: np.column_stack([v, v * 2]), [v]),
    "dstack": (lambda b: np.dstack([b, b]), [B]),
    "count_nonzero ax": (lambda a: np.count_nonzero(a > 0, axis=1), [A]),
    "isclose": (lambda a, b: np.isclose(a, b), [A, B]),
    "minimum.reduce": (lambda a: np.minimum.reduce(a, axis=2), [A]),
    "add.accumulate ax": (lambda a: np.add.accumulate(a, axis=1), [A]),
    "nanmax": (lambda a: np.nanmax(np.where(a > 3, np.nan, a), axis=0), [A]),
    "round": (lambda a: np.round(a / 3, 2), [A]),
    "int pow": (lambda a: a.astype(np.int32) ** 2, [A]),
    "float pow scalar": (lambda a: a ** 2.0 + 2.0 ** a, [A]),
    "argsort axis0": (lambda a: np.argsort(a, axis=0, kind="stable"), [A]),
    "astype bool sum": (lambda a: a.astype(bool).sum(axis=2), [A]),
    "max of bool": (lambda a: (a > 0).max(axis=1), [A]),
    "mean of bool": (lambda a: (a > 0).mean(axis=1), [A]),
    "cumsum bool": (lambda a: np.cumsum(a > 0, axis=2), [A]),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_compositions(name: str) -> None:
    """Jitted and traced (unpacked) against NumPy: shapes and dtypes exactly, values bit for
    bit but for the rounding of the few inexact ones (norm, round, mean of a sum)."""
    f, args = HAND[name]
    want = normalised(np.asarray(f(*[a.copy() for a in args])))
    out = f(*[cp.value(a, packed=False) for a in args])
    tg = cp.LocalTarget()
    tg.compile(out)
    tg.run()
    for got in (cp.jit(f)(*[a.copy() for a in args]), tg.read(out)):
        assert mismatch(got, want, exact=False) is None, (name, got, want)


# ---- chains of writes through views of long arrays, views kept across them ----

VIEWS: dict[str, Any] = {
    "T": lambda y: y.T, "rev": lambda y: y[::-1], "step": lambda y: y[::2],
    "rows": lambda y: y[1:-1], "cols": lambda y: y[:, 2:9:3], "rcols": lambda y: y[:, ::-2],
    "T rev": lambda y: y.T[::-1], "flat": lambda y: y.reshape(-1)[3:40:4],
    "box": lambda y: y[2:7, 1:6].T, "flip": np.flip, "col": lambda y: y[:, 0],
    "row": lambda y: y[3], "last": lambda y: y[..., 0], "new axis": lambda y: y[None, :, 1],
    "row rev": lambda y: y[1, ::-1], "block": lambda y: y[2:5, 3], "T col": lambda y: y.T[:, 1],
    "swap": lambda y: np.swapaxes(y, 0, 1)[1:3, 0],
    "element": lambda y: y[(1,) * y.ndim + (None,)],
}


def nonempty_view(name: str, shape: tuple[int, ...]) -> bool:
    """Whether NumPy's view ``name`` of an array of ``shape`` exists and has elements."""
    try:
        return bool(np.size(VIEWS[name](np.zeros(shape))))
    except IndexError:
        return False


@settings(max_examples=examples(40), **SETTINGS)  # type: ignore[arg-type]
@given(shape=st.sampled_from([(9, 13), (17, 11), (8, 16), (6, 10, 4), (5, 9, 3)]),
       dtype=st.sampled_from(["float32", "int32"]),
       plan=st.lists(st.tuples(st.sampled_from(sorted(VIEWS)), st.sampled_from(
           ["=", "+=", "*=", "read"]), st.integers(1, 3)), min_size=2, max_size=6),
       kept=st.lists(st.sampled_from(sorted(VIEWS)), min_size=1, max_size=2))
def test_writes_through_views(shape: tuple[int, ...], dtype: str,
                              plan: list[tuple[str, str, int]], kept: list[str]) -> None:
    """Writes (=, +=, *=) through views of a copy of a long array (packed beyond 64 elements
    in the jit; unpacked traced), reads of views between them, and views taken first and read
    last (also a view of a view): NumPy's values. (NumPy's 0-d views are not compared:
    docs/decisions/2026-12-05-numpy-compositions.md, Left.)"""
    x = (np.arange(int(np.prod(shape))) % 23 - 11).astype(dtype).reshape(shape)

    def f(a: Any) -> Any:
        y = a.copy()
        first = [VIEWS[k](y) for k in kept]
        if np.ndim(first[0]) > 1 and nonempty_view(kept[-1], np.shape(first[0])):
            first.append(VIEWS[kept[-1]](first[0]))  # a view of a view
        reads = []
        for name, op, c in plan:
            w = VIEWS[name](y)
            if op == "read":
                reads.append(w.sum(axis=0) if np.ndim(w) > 1 else w * 1)
            elif np.ndim(w) == 0:
                y[...] = y + c
            elif op == "=":
                w[...] = a.ravel()[:w.size].reshape(w.shape) * c
            elif op == "+=":
                w += c
            else:
                w *= c
        return (y, *reads, *[v * 1 for v in first if np.ndim(v)])
    try:
        want = [normalised(w) for w in f(x.copy())]
    except IndexError:  # a view NumPy refuses for this shape
        return
    out = f(cp.value(x, packed=False))
    tg = cp.LocalTarget()
    tg.compile(*out)
    tg.run()
    for got in (cp.jit(f)(x.copy()), tuple(tg.read(o) for o in out)):
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert mismatch(g, w, exact=True) is None, (plan, kept, k)


def test_fmod() -> None:
    """np.fmod (refused by name before): C's remainder with the dividend's sign, bit for bit
    with NumPy's: zeros of either sign, infinities, NaN, tiny and huge floats, int32 with the
    b = 0 and INT_MIN cases, and a traced scalar."""
    fa = np.array([7, -7, 7, -7, 0.0, -0.0, 5.5, -5.5, np.inf, -np.inf, np.nan, 1e-30, -1e-30,
                   3, 1e30, -2.5, 1], np.float32)
    fb = np.array([3, 3, -3, -3, 3, 3, 0, 0, 2, 2, 1, 1, -1, np.inf, 7, -np.inf, np.nan],
                  np.float32)
    ia = np.array([7, -7, 7, -7, 0, -2**31, -2**31, 5, 2**31 - 1, -9], np.int32)
    ib = np.array([3, 3, -3, -3, 3, -1, 3, 0, -2, 4], np.int32)
    with np.errstate(all="ignore"):
        for got, want in [(cp.jit(np.fmod)(fa, fb), np.fmod(fa, fb)),
                          (cp.jit(np.fmod)(ia, ib), np.fmod(ia, ib)),
                          (cp.jit(lambda a: np.fmod(a, 2.5))(fa), np.fmod(fa, np.float32(2.5))),
                          (cp.jit(lambda a: np.fmod(a[1], -2))(ia), np.fmod(ia[1], -2))]:
            assert mismatch(got, normalised(want), exact=True) is None, (got, want)


def test_empty_inputs_are_refused_naming_them() -> None:
    """An empty argument or input says it is the input that is empty (before: "copapy arrays
    have 1 to 4 dimensions and no empty one", which named neither)."""
    for make in (lambda: cp.jit(lambda a: a * 2)(np.zeros((0, 4), np.float32)),
                 lambda: cp.value(np.zeros((3, 0), np.int32))):
        with pytest.raises(cp.ShapeError, match=r"empty input array \(shape .*skip the call"):
            make()
