"""What the verifier allows against what the stencils touch (docs/image.md, verified loading):
every block stencil of a runner table (x86_64, aarch64 and the firmware's Cortex-M7) runs
alone on unicorn, its slots laid out apart with random lengths (0 included) and random
scalars (steps, starts and levels too), and every memory access to the data region must lie
inside an extent the verifier's role descriptors give it: reads inside some slot's extent,
writes inside a written role's. An access past them is a read or write outside what a
verified image may touch (an empty array's element 0 was:
docs/decisions/2026-12-05-verifier-red-team.md).

The extents are the verifier's (runner/src/blocks.c check_slots): a scalar its element, an
array or a pointer slot's target elements x the product of its length roles (a length of 0
counts as 1), a loop pointer the enclosing fused loop's count."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from copapy.compiler.manifest import Block
from copapy.compiler.runner_table import (
    ACCESS_ARRAY,
    ACCESS_COUNTER,
    ACCESS_LENGTH,
    ACCESS_LOOP_POINTER,
    ACCESS_POINTER,
    DIM_J,
    DIM_K,
    DIM_N,
    FN_BLOCK,
    FN_FORI_BEGIN,
    FN_FORI_END,
    FN_LOOP_BODY,
    FN_LOOP_END,
    WRITTEN,
    function_flags,
    role_descriptor,
    slot_roles,
)
from copapy.compiler.table import StencilTable, load_table

from .support.emulate_chains import run_chains

GAP = 64  # bytes between two slots: an access past a slot lands in a gap


@dataclass
class Layout:
    """One block's chain, initial data and the extents (offset, bytes) it may read and write."""

    chain: list[Block] = field(default_factory=list)
    init: bytearray = field(default_factory=bytearray)
    reads: list[tuple[int, int]] = field(default_factory=list)
    writes: list[tuple[int, int]] = field(default_factory=list)
    cursor: int = GAP

    def alloc(self, size: int, content: bytes = b"") -> int:
        at = -(-self.cursor // 16) * 16
        self.cursor = at + size + GAP
        self.init += bytes(self.cursor - len(self.init))
        self.init[at:at + len(content)] = content
        return at


def count(flags: int, lens: dict[str, int]) -> int:
    """The verifier's element count: the product of the length roles, 0 counted as 1."""
    n = 1
    for bit, role in ((DIM_N, "n"), (DIM_K, "k"), (DIM_J, "j")):
        if flags & bit:
            n *= max(lens.get(role, 0), 1)
    return n


def layout(table: StencilTable, ids: dict[str, int], name: str, rng: Any) -> Layout | None:
    flags = function_flags(table, name)
    if flags & FN_LOOP_END or flags & FN_FORI_BEGIN:
        return None  # run around the bodies (the loop ends) or by their end (the begin)
    roles = slot_roles(table, name)
    big = rng.random() < 0.2
    lens = {r: int(rng.integers(0, 40 if big else 7)) for r in roles if r in ("n", "k", "j")}
    if flags & FN_FORI_END and lens["n"] == 0:
        lens["n"] = 1  # the verifier refuses a counted loop of 0
    loop_n = int(rng.integers(0, 40 if big else 12))
    out = Layout()
    offs = []
    for role in roles:
        d = role_descriptor(name, role, roles)
        if d.access == ACCESS_LENGTH:
            at = out.alloc(4, lens[role].to_bytes(4, "little"))
            out.reads.append((at, 4))
        elif d.access == ACCESS_COUNTER:
            at = out.alloc(4)
            out.reads.append((at, 4))
            out.writes.append((at, 4))
        elif d.access in (ACCESS_POINTER, ACCESS_LOOP_POINTER):
            size = d.elem * (max(loop_n, 1) if d.access == ACCESS_LOOP_POINTER
                             else count(d.flags, lens))
            at = out.alloc(8)
            target = out.alloc(size, rng.bytes(size))
            out.init[at:at + 8] = (target - at).to_bytes(8, "little", signed=True)
            out.reads += [(at, 8), (target, size)]
            if d.flags & WRITTEN:
                out.writes.append((target, size))
        else:
            size = d.elem * (count(d.flags, lens) if d.access == ACCESS_ARRAY else 1)
            raw = rng.bytes(size) if d.access == ACCESS_ARRAY or rng.random() < 0.5 else \
                b"".join(int(v).to_bytes(4, "little", signed=True)  # steps, starts that fit
                         for v in rng.integers(-3, 8, size // 4))
            at = out.alloc(size, raw)
            out.reads.append((at, size))
            if d.flags & WRITTEN:
                out.writes.append((at, size))
        offs.append(at)
    block = (ids[name], tuple(offs))
    if flags & FN_LOOP_BODY:
        n_at = out.alloc(4, loop_n.to_bytes(4, "little"))
        out.reads.append((n_at, 4))
        dtype = name.split("__")[0].rsplit("_", 1)[1]
        end = ids.get(f"vloop_{dtype}__end", ids["vloop_f32__end"])
        out.chain = [(ids["vloop_i32__begin"], (n_at,)), block, (end, ())]
    elif flags & FN_FORI_END:
        out.chain = [(ids["floop_i32__begin"], (offs[roles.index("out")],)), block]
    else:
        out.chain = [block]
    out.init += bytes(GAP)
    return out


def violations(arch: str, table: StencilTable, lay: Layout) -> list[str]:
    """The accesses of one run outside the layout's extents (and any fault)."""
    def inside(write: bool, at: int, n: int) -> bool:
        return any(lo <= at and at + n <= lo + size
                   for lo, size in (lay.writes if write else lay.reads))

    return run_chains(arch, table, [lay.chain], bytes(lay.init), inside)[0]


#: set in the child process that runs the check itself (below)
CHILD = "COPAPY_FOOTPRINT_CHILD"


@pytest.mark.parametrize("arch", ["x86_64", "aarch64", "cortex-m7"])
def test_every_block_stencil_touches_only_what_the_verifier_allows(arch: str) -> None:
    """Run in a fresh process: its 1,000+ unicorn engines, run inside a test worker that had
    run the rest of the suite, grew the worker to 22 GB (two fresh-clone CI runs, the OOM
    killer stopped it; alone the check peaks at 0.2 GB), so the check gets a process of its
    own and the worker's state cannot change what it costs."""
    if os.environ.get(CHILD) != arch:
        here = f"{__file__}::test_every_block_stencil_touches_only_what_the_verifier_allows"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
             f"{here}[{arch}]"], env={**os.environ, CHILD: arch}, capture_output=True,
            text=True, timeout=1200, check=False)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        return
    table = load_table(arch)
    names = table.names()
    ids = {n: i for i, n in enumerate(names)}
    rng = np.random.default_rng(2026_12_05)
    found = {}
    blocks = [n for n in names if function_flags(table, n) & FN_BLOCK]
    assert len(blocks) > 1000
    for name in blocks:
        lay = layout(table, ids, name, rng)
        if lay is not None:
            bad = violations(arch, table, lay)
            if bad:
                found[name] = bad[0]
    assert not found, "\n".join(f"{n}: {why}" for n, why in list(found.items())[:20])


def test_the_check_sees_an_access_past_a_slot() -> None:
    """The harness itself: a reduction over n elements whose declared extent is cut by one
    element is reported (the hooks see the stencil's reads)."""
    table = load_table("x86_64")
    ids = {n: i for i, n in enumerate(table.names())}
    lay = Layout()
    a = lay.alloc(4 * 9, bytes(36))
    n = lay.alloc(4, (9).to_bytes(4, "little"))
    lay.reads = [(a, 32), (n, 4)]
    lay.chain = [(ids["rsum_f32__0_v"], (a, n))]
    lay.init += bytes(GAP)
    assert any("read" in v for v in violations("x86_64", table, lay))
    lay.reads = [(a, 36), (n, 4)]
    assert violations("x86_64", table, lay) == []
