"""The float32 ``%`` of the stencils (cp_ops.h: the common case inline in float64, the rest
by cp_fmodf's long division) against NumPy's ``remainder`` (fmodf and the sign rule of
``divmod``), bit for bit where the result is a number: quotients around the inline path's
bounds (1 and 2^29), remainders the float64 quotient rounds up (corrected by one |b|),
subnormals, zeros, infinities and NaN, packed (a jit call) and in a scalar chain."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp


@cp.jit
def rem(a: Any, b: Any) -> Any:
    return a % b


def assert_remainder(a: np.ndarray, b: np.ndarray, got: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        want = np.remainder(a, b)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all()
    assert got[~nan].view(np.uint32).tolist() == want[~nan].view(np.uint32).tolist()


def operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs whose quotients span 2^-2 .. 2^40 (both sides of 1 and of 2^29), of both signs,
    with the specials mixed in."""
    with np.errstate(all="ignore"):
        return _operands(rng, n)


def _operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    b = (rng.uniform(1.0, 2.0, n) * 2.0 ** rng.integers(-140, 100, n)).astype(np.float32)
    b *= rng.choice([-1, 1], n).astype(np.float32)
    q = rng.uniform(1.0, 2.0, n) * 2.0 ** rng.integers(-2, 40, n)
    a = (q * b.astype(np.float64)).astype(np.float32)
    near = rng.random(n) < 0.25  # a just below a multiple of b: the quotient rounds up
    a[near] = np.nextafter(np.float32(np.round(q[near])) * b[near], np.float32(0))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38],
                       np.float32)
    a[:: 7] = rng.choice(special, a[:: 7].size)
    b[3:: 11] = rng.choice(special, b[3:: 11].size)
    return np.nan_to_num(a, nan=np.nan), b


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_packed_float32_remainder_is_numpys(seed: int) -> None:
    a, b = operands(np.random.default_rng(seed), 4096)
    assert_remainder(a, b, np.asarray(rem(a, b)))


def test_scalar_float32_remainder_is_numpys() -> None:
    a, b = operands(np.random.default_rng(29), 64)
    x, y = cp.value(0.0, name="x"), cp.value(1.0, name="y")
    tg = cp.LocalTarget(tick=1e-3, measure=False)
    r = x % y
    tg.deploy(cp.Task(r, period=1e-3))
    got = []
    for u, v in zip(a, b, strict=True):
        tg.write(x, float(u))
        tg.write(y, float(v))
        tg.step(1e-3)
        got.append(tg.read(r))
    assert_remainder(a, b, np.asarray(got, np.float32))
