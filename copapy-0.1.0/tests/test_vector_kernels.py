"""The block forms of the math kernels (cp_math.h CP_VKERNELS, the packed loops of kind vec)
against the scalar kernels, bit for bit.

A block form evaluates 16 elements at a time with a branch-free copy of the scalar kernel's
operation sequence and falls back to the scalar kernel for a block with an element outside the
copy's path. Checked here, through the packed stencils (stencils/array.c):

* on the host (tools/array_harness), for every kernel and type: whole blocks of the fast path,
  values around every threshold of the kernel (tiny arguments, pi/4, the reduction limits, the
  overflow and underflow limits, the polynomial switch points), special values and random bit
  patterns, with one slow element placed in an otherwise fast block, against the host build of
  the scalar kernels (copapy._kernels), NaN bits included;
* on an emulated AArch64 (unicorn, tools/array_harness/cross_check.py), the same arrays against
  the host: the Advanced SIMD build computes the same bits;
* the block forms are vectorised on x86_64 and aarch64 (tools/array_harness/check_vectorisation.py).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from . import test_array_stencils as tas

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "array_harness"))

import harness as hx  # noqa: E402

KERNELS = ["sqrt", "sin", "cos", "exp", "log", "tanh"]
Array = np.ndarray[Any, Any]

# the arguments where each kernel changes path (scalar kernel's branches), per type
EDGES: dict[str, dict[str, list[float]]] = {
    "f32": {
        "sqrt": [0.0, 1e-45, 1.0, 4.0],
        "sin": [2.0**-12, np.pi / 4, 100.0, 1e4, np.pi / 2, np.pi, 3 * np.pi / 2, 50 * np.pi],
        "cos": [2.0**-12, np.pi / 4, 100.0, 1e4, np.pi / 2, np.pi, 3 * np.pi / 2, 50 * np.pi],
        "exp": [89.0, -104.0, 88.72, -87.33, -103.0, 0.0, 1e-8],
        "log": [1.0, 1.1754944e-38, 1e-45, 0.75, 1.5, 3.4028235e38, 2.0],
        "tanh": [2.0**-12, 0.55, 9.5, 5.0],
    },
    "f64": {
        "sqrt": [0.0, 5e-324, 1.0, 4.0],
        "sin": [2.0**-26, 2.0**-27, np.pi / 4, 2.0**30, 1e10, np.pi / 2, np.pi, 1e6 * np.pi],
        "cos": [2.0**-26, 2.0**-27, np.pi / 4, 2.0**30, 1e10, np.pi / 2, np.pi, 1e6 * np.pi],
        "exp": [710.0, -746.0, 709.78, -708.4, -745.0, 0.0, 1e-17],
        "log": [1.0, 2.2250738585072014e-308, 5e-324, 0.75, 1.5, 1.7976931348623157e308],
        "tanh": [2.0**-27, 0.55, 20.0, 10.0],
    },
}
# a range whose blocks take the fast path throughout
FAST = {"sqrt": (0.0, 1e6), "sin": (-90.0, 90.0), "cos": (-90.0, 90.0), "exp": (-80.0, 80.0),
        "log": (1e-30, 1e30), "tanh": (-12.0, 12.0)}


def neighbours(t: str, values: list[float]) -> Array:
    """Every value, its sign flip and the 4 floats either side of each."""
    dt, ut = tas.DT[t], tas.UINT[t]
    base = np.array(values, dtype=dt)
    base = np.concatenate([base, -base])
    bits = base.view(ut).astype(np.int64)
    steps = np.arange(-4, 5)
    near = (bits[:, None] + steps[None, :]).ravel()
    near = near[(near >= 0) & (near < 2 ** (8 * np.dtype(dt).itemsize))]
    return near.astype(ut).view(dt)


def cases(t: str, op: str) -> list[tuple[str, Array]]:
    rng = np.random.default_rng(sum(f"{t}{op}".encode()))
    dt = tas.DT[t]
    lo, hi = FAST[op]
    if op == "log":
        fast = np.exp(rng.uniform(np.log(lo), np.log(hi), 4096)).astype(dt)
    else:
        fast = rng.uniform(lo, hi, 4096).astype(dt)
    mixed = fast.copy()
    mixed[16 * 7 + 3] = dt(1e30)  # one element of one block leaves the fast path
    mixed[16 * 9 + 15] = np.array([0x7FC12345], np.uint32).view(np.float32)[0] \
        if t == "f32" else dt(np.nan)
    edges = neighbours(t, EDGES[t][op])
    specials = tas.SPECIALS[t]
    return [
        ("fast", fast),
        ("fast+tail", fast[:16 * 20 + 11]),
        ("one slow element", mixed),
        ("edges", np.tile(edges, 3)),
        ("specials", np.tile(specials, 5)),
        ("bits", tas.random_values(rng, t, 4096, "bits")),
        ("mixed", tas.random_values(rng, t, 4096, "mixed")),
    ]


@pytest.fixture(scope="module")
def h() -> hx.Harness:
    return hx.Harness()


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("op", KERNELS)
def test_block_form_equals_scalar_kernel(h: hx.Harness, kernels: Any, op: str, t: str) -> None:
    name = f"{op}_{t}__v_v"
    scalar = tas.kernel1(op, t)
    for what, a in cases(t, op):
        got, _ = tas.run(h, name, t, len(a), {f"cp_va_{t}": a}, {}, {"n": len(a)})
        tas.assert_same(got, scalar(a), True, f"{name} ({what})")


@pytest.mark.parametrize("op", KERNELS)
def test_block_form_in_place(kernels: Any, op: str) -> None:
    """out bound to a (the compiler may do so): each block is read before it is written."""
    h = tas.aliased("a")
    for t in ("f32", "f64"):
        _, a = cases(t, op)[2]
        got, _ = tas.run(h, f"{op}_{t}__v_v", t, len(a), {f"cp_va_{t}": a}, {}, {"n": len(a)})
        tas.assert_same(got, tas.kernel1(op, t)(a), True, f"{op}_{t} in place")


@pytest.fixture(scope="module")
def kernels() -> Any:
    if tas._kernels is None:
        pytest.fail("copapy._kernels is not built: pip install -e .")
    return tas._kernels


def test_aarch64_block_forms_match_host(h: hx.Harness) -> None:
    """Advanced SIMD gives the host's bits (unicorn; a missing emulator fails)."""
    from .support.archs import missing_tools

    problem = missing_tools("unicorn")
    if problem:
        pytest.fail(problem)
    import cross_check

    with tempfile.TemporaryDirectory() as tmp:
        m = cross_check.load("aarch64", cross_check.build_elf("aarch64", Path(tmp)))
    bad = []
    for t in ("f32", "f64"):
        for op in KERNELS:
            name = f"{op}_{t}__v_v"
            for what, a in cases(t, op):
                a = a[:1024]
                m.write(f"cp_va_{t}", a)
                m.write("cp_n_i32", np.array([len(a)], dtype=np.int32))
                cross_check.call(m, name, tas.REGS_IN)
                want, _ = tas.run(h, name, t, len(a), {f"cp_va_{t}": a}, {}, {"n": len(a)})
                try:
                    tas.assert_same(m.read(f"cp_vout_{t}", tas.DT[t], len(a)), want, True,
                                    f"aarch64 {name} ({what})")
                except AssertionError as exc:
                    bad.append(str(exc))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("target", ["x86_64", "x86_64-v3", "x86_64-v4", "aarch64"])
def test_block_forms_are_vectorised(target: str) -> None:
    import check_vectorisation as cv

    if cv.OBJDUMP is None:
        pytest.fail(f"llvm-objdump is not installed: {cv.OBJDUMP_INSTALL}")
    vectorised = cv.analyse_blocks(target)
    want = {f"cp_v{op}_{t}" for op in KERNELS for t in ("f32", "f64")}
    assert set(vectorised) == want
    scalar = sorted(f for f, v in vectorised.items() if not v)
    assert not scalar, f"{target}: not vectorised: {scalar}"
