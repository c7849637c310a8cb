"""The fused loops' vector lane form of the float32 ``%`` (stencils/include/cp_fused_lanes.h:
a whole register of lanes in float64 at once, a block with a lane outside the common case by
the scalar kernel) against the scalar kernel (copapy._kernels, the host build of the same
cp_mod_f32) and NumPy's ``remainder``, bit for bit, on every x86_64 table this CPU runs
(16-, 32- and 64-byte registers), in the register forms the compiler reaches: array % array,
array % scalar, scalar % array, and with both operands computed in the loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import _kernels
from copapy.compiler.table import load_table
from copapy.runtime.load import host_architecture, is_native

from .test_fmod_inline import assert_remainder, operands

TABLES = [a for a in ("x86_64", "x86_64-v3", "x86_64-v4", "aarch64")
          if a.split("-")[0] == host_architecture() and is_native(a)]


def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The scalar cp_mod_f32 of each pair."""
    out = np.empty_like(a)
    _kernels.apply("mod", False, out, np.ascontiguousarray(a), np.ascontiguousarray(b))
    return out


def common(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs in the lane form's common case (quotients in [1, 2^29)), whole blocks of them:
    signs mixed, remainders of zero (a multiple of b) and just below a multiple."""
    b = (rng.uniform(1.0, 2.0, n) * 2.0 ** rng.integers(-100, 60, n)).astype(np.float32)
    b *= rng.choice([-1, 1], n).astype(np.float32)
    q = rng.uniform(1.0, 2.0, n) * 2.0 ** rng.integers(0, 29, n)
    a = (q * b.astype(np.float64)).astype(np.float32)
    a *= rng.choice([-1, 1], n).astype(np.float32)
    exact = rng.random(n) < 0.1
    a[exact] = np.float32(np.floor(q[exact])) * b[exact]
    return a, b


def check(arch: str, a: np.ndarray, b: np.ndarray) -> None:
    """-(x % y) (the negation, exact, makes a two-operation loop) for array % array, array %
    scalar and scalar % array (one jit function, a program per signature), and (x * 1) % (y *
    1) with both operands computed in the loop."""
    neg = cp.jit(lambda x, y: -(x % y), arch=arch)
    both = cp.jit(lambda x, y: (x * 1.0) % (y * 1.0), arch=arch)
    assert_remainder(a, b, kernel(a, b))  # the scalar kernel is NumPy's remainder
    assert_remainder(a, b, -np.asarray(neg(a, b)))
    assert_remainder(a, b, np.asarray(both(a, b)))
    assert_remainder(a, np.full_like(b, b[0]), -np.asarray(neg(a, float(b[0]))))
    assert_remainder(np.full_like(a, a[-1]), b, -np.asarray(neg(float(a[-1]), b)))


def test_tables_present() -> None:
    assert "x86_64" in TABLES or host_architecture() != "x86_64"


@pytest.mark.parametrize("arch", TABLES)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300))
def test_lane_form_common_case(arch: str, seed: int, n: int) -> None:
    check(arch, *common(np.random.default_rng(seed), n))


@pytest.mark.parametrize("arch", TABLES)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_lane_form_with_edges(arch: str, seed: int) -> None:
    """Specials, |a| < |b|, huge quotients mixed into blocks of common lanes: those blocks
    take the scalar kernel, the others the lane form."""
    rng = np.random.default_rng(seed)
    a, b = common(rng, 2048)
    ea, eb = operands(rng, 2048)
    pick = rng.random(2048) < 0.02
    a[pick], b[pick] = ea[pick], eb[pick]
    check(arch, a, b)


FORMS = [f"{d}_{a}_{b}" for d in "01" for a, b in (
    (d, "p"), ("p", d), (d, "m"), ("m", d), ("p", "p"), ("p", "m"), ("m", "p"))] + [
    "0_0_1", "0_1_0"]


@pytest.mark.parametrize("arch", ["x86_64", "x86_64-v3", "x86_64-v4"])
def test_lane_form_stencils_call_the_scalar_kernel_only_off_their_common_path(arch: str
                                                                             ) -> None:
    """Every register form of the float32 % is the lane form: its one call is to
    cp_flmod_f32_w (the scalar kernel over a block, which saves every register), after the
    jump to the next stencil (the rare path), and it does not realign the stack."""
    import capstone

    table = load_table(arch)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    for form in FORMS:
        fn = table.function(f"vrmod_f32__{form}")
        calls = [r for r in fn.relocs if r.target_type == "func"]
        assert calls and all(r.target == "cp_flmod_f32_w" for r in calls), (fn.name, calls)
        end = min(r.offset for r in fn.relocs if r.target_type == "next")
        code = [(i.address, f"{i.mnemonic} {i.op_str}") for i in md.disasm(fn.code, 0)]
        assert not [c for _, c in code if c.startswith("and rsp")], fn.name
        assert not [c for a, c in code if a < end and c.startswith("call")], fn.name
