"""Large arrays under @cp.jit (issue 31, item 2): the arguments a fused loop reads and the
results it writes are never in the image; their homes in the data region are zeros behind
every other slot (the deferred zone), which the runner leaves untouched and the memory cap
does not count; the cap's error names both ways to raise it in full. Sizes stay small here
(the 1e8-element case is benchmarks/bench_slices.py)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest

import copapy as cp
from copapy import image as im
from copapy.compiler import compile_program
from copapy.compiler.layout import DEFERRED, DataLayout
from copapy.jit import _array_input
from copapy.runtime import set_max_memory
from copapy.runtime.errors import MEMORY_OPTION, ImageLoadError

N = 1 << 18  # 1 MiB of float32


@pytest.fixture
def cap() -> Iterator[None]:
    set_max_memory(1 << 20)  # 1 MiB: less than one argument
    try:
        yield
    finally:
        set_max_memory(None)


def args(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


def test_a_fused_expression_runs_under_a_cap_smaller_than_its_arrays(cap: None) -> None:
    x, y = args()
    got = cp.jit(lambda a, b: cp.sqrt(a * a + b * b))(x, y)
    assert got.tobytes() == np.sqrt(x * x + y * y).tobytes()


def test_the_image_holds_no_argument_and_no_result() -> None:
    x, y = args()
    traced = [_array_input(x, "float32"), _array_input(y, "float32")]
    out = cp.sqrt(traced[0] * traced[0] + traced[1] * traced[1])
    compiled = compile_program([out.node()], "x86_64", in_place=True)
    img = im.parse(compiled.image)
    assert len(compiled.image) < 16 << 10  # code, constants, pointer slots: no element data
    assert img.data_size >= 3 * 4 * N  # the homes exist: a direct run() reads only them
    assert len(img.data_init) < 4096  # ... and they are zeros past the initial data
    nodes = {t.node() for t in traced} | {out.node()}
    homes = sorted(compiled.ports[n].offset for n in nodes)
    small = max(len(img.data_init), *(s + 8 for s in compiled.pointers.values()))
    assert homes[0] >= small and set(compiled.pointers) == nodes
    assert all(h < img.data_size for h in homes)


def test_the_deferred_zone_goes_behind_everything_and_re_aims_its_pointers() -> None:
    layout = DataLayout()
    a = layout.alloc(4, b"\1\2\3\4")
    d = layout.alloc_deferred(400, 16)
    slot = layout.pointer(d + 8)
    c = layout.constant(cp.float32, b"\0\0\x80\x3f")
    shift = layout.place_deferred()
    assert d == DEFERRED and a == 0 and slot < c + 4 <= d + shift
    assert (d + shift) % 64 == 0 and layout.size == d + shift + 400
    target = slot + int.from_bytes(layout.init[slot:slot + 8], "little", signed=True)
    assert target == d + shift + 8
    assert len(layout.init_bytes()) <= c + 4  # the zone adds no initial data


def test_the_cap_error_names_both_fixes_in_full(cap: None) -> None:
    x, _ = args()
    # the sum's operand is a temporary of x.nbytes (the cap) and counts once; x does not
    jitted = cp.jit(lambda a: (a[::-1] * 2.0).sum())
    with pytest.raises(ImageLoadError) as info:
        jitted(x)
    msg = str(info.value)
    assert msg.startswith("TOO_LARGE: image needs ")
    assert msg.endswith(f"at most {1 << 20}: shrink the program or raise the limit "
                        f"({MEMORY_OPTION})")
    assert MEMORY_OPTION == ("COPAPY_MAX_MEMORY=<bytes> or "
                             "copapy.runtime.set_max_memory(<bytes>)")
    need = int(msg.split("needs ")[1].split(" bytes")[0])
    assert x.nbytes < need < 2 * x.nbytes  # no reset copy of the temporary


def test_nothing_is_copied_before_the_cap_refuses(cap: None) -> None:
    """The refusal comes before any copy of the argument: the Python side allocates a small
    fraction of one argument on its way to the runner's check."""
    x = np.random.default_rng(1).random(4 * N, dtype=np.float32)  # 4 MiB
    jitted = cp.jit(lambda a: (a[::-1] * 2.0).sum())  # the product is a temporary
    tracemalloc.start()
    try:
        with pytest.raises(ImageLoadError, match="TOO_LARGE"):
            jitted(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes // 8, peak


def test_a_direct_run_reads_only_the_programs_zeros_after_a_call() -> None:
    """The homes in the deferred zone are what the pointer slots designate between calls."""
    x, y = args(1000)
    jitted = cp.jit(lambda a, b: a * b + a)
    assert jitted(x, y).tobytes() == (x * y + x).tobytes()
    compiled = next(iter(jitted._cache.values()))  # type: ignore[attr-defined]
    compiled.run(0)  # the slots designate the homes again: zeros in, zeros out
    again = jitted(x, y)
    assert again.tobytes() == (x * y + x).tobytes()
