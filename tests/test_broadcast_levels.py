"""NumPy broadcasting of packed arrays as one level gather (issue 31): the repeated axes are
levels of step 0, so an image times a per-channel gain is one gather whatever the image's
size (it was a concatenation of one view per run: 65,536 parts and 3.9 s at 256 x 256 x 3).
The gradient sums each element's copies (graph/levels._sum_repeats). Against NumPy bit for bit
and central differences; hypothesis over shapes up to 4-D: tests/test_numpy_semantics.py;
every architecture: tests/test_array_ops_cross_arch.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.arrays import array_input
from copapy.compiler import compile_program

from .support.checks import central_difference
from .test_strided import build_closure, cp_load, read, same_bits

#: (shape of a, shape of b) pairs whose broadcast repeats b over fewer and over more copies
#: than it has elements (the gradient's two forms), 1-D to 4-D
PAIRS = [((6, 7, 3), (3,)), ((3, 6, 7), (3, 1, 1)), ((5, 4), (5, 1)), ((2, 3, 4, 5), (3, 1, 5)),
         ((2, 3, 4, 5), (1, 4, 1)), ((4, 1, 6), (5, 1)), ((40,), (1,))]


@pytest.mark.parametrize(("sa", "sb"), PAIRS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_broadcasts_equal_numpy(sa: tuple[int, ...], sb: tuple[int, ...], dtype: str) -> None:
    rng = np.random.default_rng(len(sa) + len(sb))
    a = (rng.standard_normal(sa) * 8).astype(dtype)
    b = (rng.standard_normal(sb) * 8).astype(dtype)
    assert same_bits(cp.jit(lambda x, y: x * y)(a, b), a * b)
    assert same_bits(cp.jit(lambda x, y: y - x)(a, b), b - a)


@pytest.mark.parametrize(("sa", "sb"), PAIRS)
def test_gradients_sum_the_copies(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    rng = np.random.default_rng(7)
    a0, b0 = rng.uniform(0.5, 2.0, sa), rng.uniform(0.5, 2.0, sb)
    w = rng.standard_normal(np.broadcast_shapes(sa, sb))

    def f(a: Any, b: Any, sin: Any) -> Any:
        return (sin(a * b) * w).sum() + (b * b * a).sum()

    ga, gb = cp.jit(lambda x, y: tuple(cp.grad(f(x, y, cp.sin), [x, y])))(a0, b0)
    np.testing.assert_allclose(ga, central_difference(lambda z: float(f(z, b0, np.sin)), a0),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gb, central_difference(lambda z: float(f(a0, z, np.sin)), b0),
                               rtol=1e-6, atol=1e-6)


def test_node_count_and_code_size_do_not_grow_with_the_size() -> None:
    """An image of any size times a per-channel gain (channels last and first), and a row
    broadcast over a matrix: the same nodes, stencils and code bytes."""
    seen = set()
    for side in (8, 64, 512):
        img = array_input(np.zeros((side, side, 3), np.float32), packed=True)
        planes = array_input(np.zeros((3, side, side), np.float32), packed=True)
        gain = array_input(np.zeros(3, np.float32), packed=True)
        row = array_input(np.zeros(side, np.float32), packed=True)
        cases = [img * gain, planes * gain.reshape(3, 1, 1), img[:, :, 0] + row,
                 img[:, :, 1] * row.reshape(side, 1)]
        nodes = tuple(len(build_closure([c.node()])) for c in cases)
        assert max(nodes) <= 8, nodes
        compiled = compile_program([c.node() for c in cases], "x86_64")
        seen.add((nodes, compiled.op_count, compiled.stencil_count, compiled.code_bytes))
    assert len(seen) == 1, seen


def test_the_gradient_of_a_broadcast_is_bounded_by_the_smaller_side() -> None:
    """Summing the copies takes whole-row adds when there are fewer copies than elements and
    one row sum per element otherwise: nodes grow with the smaller of the two, not with the
    broadcast's size."""
    for side in (16, 256):
        img = array_input(np.zeros((side, side, 3), np.float32), packed=True)
        gain = array_input(np.zeros(3, np.float32), packed=True)
        g = cp.grad((img * gain).sum(), gain)
        ops = [n.op for n in build_closure([g.node()])]
        assert ops.count("rsum") == 3 and "concat" not in ops, ops


def test_broadcasts_through_the_verifying_loader() -> None:
    """Levels of step 0 pass the C verifier's checks (the span counts (count - 1)·|step|) and
    give NumPy's result, with the gradient's row sums and row adds in the same program."""
    rng = np.random.default_rng(3)
    img, gain = rng.standard_normal((9, 8, 3)).astype(np.float32), np.float32([0.5, 1, 2])
    row = rng.standard_normal(8).astype(np.float32)
    x, g, r = (array_input(v, packed=True) for v in (img, gain, row))
    out = x * g + r.reshape(1, 8, 1)
    grads = cp.grad(out.sum(), [g, r])
    nodes = [out.node(), *(v.node() for v in grads)]
    compiled = compile_program(nodes, "x86_64")
    prog = cp_load(compiled)
    prog.run(0)
    got = [read(prog, compiled.ports[n]) for n in nodes]
    assert same_bits(got[0], np.ravel(img * gain + row.reshape(1, 8, 1)))
    np.testing.assert_allclose(got[1], img.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(got[2], np.full(8, 27.0, np.float32))


#: keys with None (np.newaxis) and what NumPy makes of them
NEW_AXES: list[Any] = [(slice(None), None, slice(None)), (None,), None, (slice(None), None, 1),
                       (1, None, slice(None, None, 2), None), (None, 2, slice(1, 3)),
                       (1, 2, 3, None), (slice(None, None, -1), None)]


@pytest.mark.parametrize("key", NEW_AXES, ids=str)
@pytest.mark.parametrize("packed", [True, False])
def test_new_axes_index_as_numpy(key: Any, packed: bool) -> None:
    """``a[:, None]`` and kin: NumPy's shape and elements, packed and unpacked, and as the
    broadcast operand NumPy users write (``img * gain[:, None, None]``)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    gain = np.float32([0.5, 1.0, 2.0])
    a = cp.value(x, packed=packed)
    got = a[key]
    assert got.shape == x[key].shape
    assert same_bits(cp.jit(lambda v: v[key] * 1.0)(x), x[key])
    assert same_bits(cp.jit(lambda v, g: v * g[:, None, None])(x, gain), x * gain[:, None, None])


def test_new_axes_errors_name_the_problem() -> None:
    a = cp.value(np.zeros((3, 4, 5), np.float32), packed=True)
    with pytest.raises(IndexError, match="at most 4"):
        a[None, :, None, :]
    # Ellipsis is NumPy's (it was refused before npfuzz): a[..., None] is a[:, :, :, None]
    assert a[..., None].shape == (3, 4, 5, 1)
    with pytest.raises(IndexError, match="4 indices for an array of 3 dimensions"):
        a[0, 0, 0, 0, None]
