"""Whatever the verifier accepts runs safely (docs/image.md, verified loading;
docs/decisions/2026-12-05-verifier-red-team.md): whole programs of random blocks (plain
stencils, fused loops, counted loops) with slots drawn from shared pools of lengths, pointer
slots and counters, so that blocks share and overlap slots the way an attacker would; each
image the in-process runner accepts runs every chain twice on unicorn and must stay inside
its data region, never write its code, leave every frozen slot but the counters as the
verifier read it, and finish. A counter on a length was accepted and let a loop store past
the data before the verifier compared counters with every length and pointer slot."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy import _runner
from copapy import image as im
from copapy.compiler.manifest import Block, encode, materialise
from copapy.compiler.program import compile_program
from copapy.compiler.runner_table import (
    ACCESS_COUNTER,
    ACCESS_LENGTH,
    ACCESS_LOOP_POINTER,
    ACCESS_POINTER,
    FN_BLOCK,
    FN_FORI_BEGIN,
    FN_FORI_END,
    FN_LOOP_BEGIN,
    FN_LOOP_BODY,
    FN_LOOP_END,
    function_flags,
    role_descriptor,
    slot_roles,
)
from copapy.compiler.table import load_table

from .support.emulate_chains import run_chains

ARCH = "x86_64"
DATA = 512  # bytes of data: slots of random blocks collide often
pytestmark = pytest.mark.skipif(_runner.ARCH != 1, reason="the verifying runner here is x86_64")

TABLE = load_table(ARCH)
NAMES = TABLE.names()
IDS = {n: i for i, n in enumerate(NAMES)}
FLAGS = {n: function_flags(TABLE, n) for n in NAMES}
PLAIN = [n for n in NAMES if FLAGS[n] & FN_BLOCK and not FLAGS[n] & (
    FN_LOOP_BODY | FN_LOOP_BEGIN | FN_LOOP_END | FN_FORI_BEGIN | FN_FORI_END)]
BODIES = [n for n in NAMES if FLAGS[n] & FN_LOOP_BODY and not FLAGS[n] & FN_LOOP_END]
ENDS = [n for n in NAMES if n.startswith("vloop_") and n.endswith("__end")]


class Pools:
    """The slots blocks draw from: lengths, pointer slots (aimed inside the data), counters."""

    def __init__(self, rng: Any) -> None:
        self.rng = rng
        self.lengths = [int(x) * 4 for x in rng.choice(DATA // 4 - 2, 3, replace=False)]
        self.pointers = [int(x) * 8 for x in rng.choice(DATA // 8 - 1, 3, replace=False)]
        self.counters = [int(x) * 4 for x in rng.choice(DATA // 4 - 1, 2, replace=False)]
        if rng.random() < 0.3:  # a counter on a length or a pointer slot: refused
            self.counters[0] = int(rng.choice(self.lengths + self.pointers))
        init = bytearray(rng.bytes(DATA) if rng.random() < 0.5 else bytes(DATA))
        for at in self.lengths:
            init[at:at + 4] = struct.pack("<I", int(rng.integers(0, 9)))
        for at in self.pointers:
            init[at:at + 8] = struct.pack("<q", int(rng.integers(0, DATA // 4)) * 4 - at)
        self.init = bytes(init)
        spans = sorted({(a, 4) for a in self.lengths + self.counters} |
                       {(a, 8) for a in self.pointers})
        self.frozen: list[tuple[int, int]] = []
        for at, size in spans:  # merged: FROZEN entries are sorted and disjoint
            if self.frozen and at < sum(self.frozen[-1]):
                last = self.frozen[-1]
                self.frozen[-1] = (last[0], max(sum(last), at + size) - last[0])
            else:
                self.frozen.append((at, size))

    def slots(self, name: str) -> tuple[int, ...]:
        roles = slot_roles(TABLE, name)
        out = []
        for role in roles:
            access = role_descriptor(name, role, roles).access
            pool = (self.lengths if access == ACCESS_LENGTH else
                    self.pointers if access in (ACCESS_POINTER, ACCESS_LOOP_POINTER) else
                    self.counters if access == ACCESS_COUNTER else None)
            out.append(int(self.rng.choice(pool)) if pool is not None
                       else int(self.rng.integers(0, DATA // 4)) * 4)
        return tuple(out)

    def block(self, name: str) -> Block:
        return IDS[name], self.slots(name)


def chains_of(pools: Pools) -> list[list[Block]]:
    rng = pools.rng
    chains = []
    for _ in range(int(rng.integers(1, 3))):
        chain: list[Block] = []
        for _ in range(int(rng.integers(1, 6))):
            kind = rng.random()
            if kind < 0.25:
                chain.append(pools.block("vloop_i32__begin"))
                chain += [pools.block(str(rng.choice(BODIES)))
                          for _ in range(int(rng.integers(1, 4)))]
                chain.append((IDS[str(rng.choice(ENDS))], ()))
            elif kind < 0.45:
                counter = int(rng.choice(pools.counters))
                chain.append((IDS["floop_i32__begin"], (counter,)))
                chain += [pools.block(str(rng.choice(PLAIN)))
                          for _ in range(int(rng.integers(1, 3)))]
                chain.append((IDS["floop_i32__end"], (counter, int(rng.choice(pools.lengths)))))
            else:
                chain.append(pools.block(str(rng.choice(PLAIN))))
        chains.append(chain)
    return chains


BASE_IMAGE = compile_program([(cp.value(1.0) * 2.0).node], ARCH).image


def image_of(chains: list[list[Block]], pools: Pools) -> bytes:
    img = im.parse(BASE_IMAGE)
    code, _ = materialise(TABLE, chains, 0)
    img.blocks = encode(chains)
    img.code_size = len(code)
    img.data_offset = -(-len(code) // img.base_align) * img.base_align
    img.data_size = DATA
    img.data_init = pools.init
    img.frozen = pools.frozen
    img.ports = []
    img.tasks = [im.ImageTask(c) for c in range(len(chains))]
    return img.to_bytes()


COUNTS = {"accepted": 0, "tried": 0}


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**63))
def test_an_accepted_program_stays_in_its_data(seed: int) -> None:
    pools = Pools(np.random.default_rng(seed))
    chains = chains_of(pools)
    COUNTS["tried"] += 1
    try:
        _runner.load(image_of(chains, pools))
    except _runner.ImageError:
        return
    COUNTS["accepted"] += 1
    counters = {offs[0] for chain in chains for sid, offs in chain
                if NAMES[sid].startswith("floop_")}
    bad, data = run_chains(ARCH, TABLE, chains, pools.init,
                           lambda write, at, n: at + n <= DATA, repeats=2)
    counts = [struct.unpack_from("<I", pools.init, at)[0] for at in pools.lengths]
    if max(counts) > 64:  # a loop may count to 2^32 - 1 (a length on a pointer's high half):
        # verified as memory-safe, not as short; the runner's time budget stops the job
        bad = [b for b in bad if not b.startswith("still running")]
    for at, size in pools.frozen:
        if not any(at <= c < at + size for c in counters):
            if data[at:at + size] != pools.init[at:at + size]:
                bad.append(f"the frozen slot [{at}, +{size}) changed")
    assert not bad, (bad[:3], [[(NAMES[s], o) for s, o in c] for c in chains])


def test_the_random_programs_are_often_accepted() -> None:
    """The property above means something only if many programs pass the verifier."""
    accepted = 0
    for seed in range(60):
        pools = Pools(np.random.default_rng(seed))
        try:
            _runner.load(image_of(chains_of(pools), pools))
            accepted += 1
        except _runner.ImageError:
            pass
    assert accepted >= 15, accepted
