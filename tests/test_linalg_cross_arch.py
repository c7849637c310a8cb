"""cp.linalg and cp.jacobian give the same bits on every CPU: one program (solve, inv, det,
cholesky, solve(assume_a="pos") of 4x4 and 12x12 matrices, a Jacobian, and the step of
examples/ekf_attitude.py)
compiled for native x86_64 (the baseline) and for 64-bit and 32-bit targets on their emulators
(tests/support/archs.py), written the same input bytes, every output compared bit for bit
(NaN equals NaN)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import copapy as cp
from copapy import linalg
from copapy.compiler import compile_program
from copapy.dtypes import DType
from copapy.graph.node import Node

from .support.archs import NATIVE, Batch, Config, execute, first_difference, has_float64

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import ekf_attitude

#: 64-bit ARM, x86 (32-bit), 32-bit ARM (A and M profiles, the M7 on qemu's real model), RV32
CONFIGS = [Config("aarch64", "unicorn"), Config("x86", "unicorn"), Config("armv7a", "unicorn"),
           Config("cortex-m7", "qemu"), Config("rv32", "unicorn")]


def matrices(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n)) + np.eye(n)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    s = q @ np.diag(rng.uniform(0.5, 2.0, n)) @ q.T
    return a, rng.normal(size=n), s


def program(dtype: DType) -> tuple[list[Node], list[Node], list[list[bytes]]]:
    """Outputs, input nodes and per run the raw bytes of every input."""
    inputs: list[cp.Array] = []
    outputs: list[Node] = []
    for n in (4, 12):
        a, b, s = (cp.value(m, dtype, packed=False) for m in (np.eye(n), np.ones(n), np.eye(n)))
        inputs += [a, b, s]
        results = [linalg.solve(a, b), linalg.inv(a), linalg.det(a), linalg.cholesky(s),
                   linalg.solve(s, b, assume_a="pos")]
        for r in results:
            outputs += [v.node for v in r.items()] if isinstance(r, cp.Array) else [r.node]
    q = cp.value([0.9, 0.1, -0.3, 0.2], dtype, packed=False)
    inputs.append(q)
    quat = cp.quaternion(*q.items())
    jac = cp.jacobian(quat.conjugate().rotate([0.0, 0.0, -9.81]), q)
    outputs += [v.node for v in jac.items()]
    ekf = [cp.value(np.zeros(shape), dtype, packed=False) for shape in ((4,), (4, 4), (3,), (3,))]
    dt = cp.value(1e-3, dtype)
    inputs += ekf
    q_new, p_new = ekf_attitude.ekf_step(*ekf, dt)
    outputs += [v.node for v in q_new.items() + p_new.items()]
    nodes = [v.node for arr in inputs for v in arr.items()] + [dt.node]
    runs = []
    for seed in range(3):
        values: list[float] = []
        for n in (4, 12):
            for m in matrices(seed, n):
                values += m.reshape(-1).tolist()
        values += [0.9, 0.1 * seed, -0.3, 0.2]
        rng = np.random.default_rng(seed + 10)
        q = rng.normal(size=4)
        root = rng.normal(size=(4, 4)) * 0.1
        values += (q / np.linalg.norm(q)).tolist() + (root @ root.T).reshape(-1).tolist()
        gravity = np.array([0.0, 0.0, 9.81])
        values += rng.normal(size=3).tolist() + (rng.normal(size=3) + gravity).tolist()
        values.append(1e-3)
        runs.append([struct.pack(dtype.fmt, v) for v in values])
    singular = list(runs[0])  # a singular 4x4 (two equal rows) and a non-SPD 4x4
    for c in range(4):
        singular[4 + c] = singular[c]
    singular[20] = struct.pack(dtype.fmt, -1.0)  # s[0, 0] of the 4x4
    runs.append(singular)
    return outputs, nodes, runs


#: float64 where the target's stencil table has it (test_cross_arch checks the refusal)
CASES = [(c, d) for c in CONFIGS for d in (cp.float32, cp.float64)
         if d is cp.float32 or has_float64(c.arch)]


@pytest.mark.parametrize(("config", "dtype"), CASES,
                         ids=[f"{c.id}-{d.name}" for c, d in CASES])
def test_linalg_and_jacobian_bit_identical(config: Config, dtype: DType) -> None:
    outputs, nodes, runs = program(dtype)
    batches = []
    for arch in (NATIVE.arch, config.arch):
        compiled = compile_program(outputs, arch)
        ports = compiled.ports
        sets = [[(ports[n].offset, raw) for n, raw in zip(nodes, run, strict=True)
                 if n in ports] for run in runs]
        batches.append(Batch(compiled.image, sets, [(ports[o].offset, o.nbytes)
                                                    for o in outputs]))
    execute(NATIVE, [batches[0]])
    execute(config, [batches[1]])
    want, got = batches[0].results, batches[1].results
    assert len(got) == len(want) == len(runs)
    for k, (w_run, g_run) in enumerate(zip(want, got, strict=True)):
        for j, (w, g) in enumerate(zip(w_run, g_run, strict=True)):
            assert first_difference(g, w, dtype) < 0, (
                f"{config.id} {dtype.name} run {k} output {j}: {g.hex()} != {w.hex()}")
    # the singular run is NaN (solve) and zero (det) on both: the rule, not an accident
    det4 = struct.unpack(dtype.fmt, want[3][4 + 16])[0]
    assert det4 == 0.0 and struct.unpack(dtype.fmt, want[3][0])[0] != struct.unpack(
        dtype.fmt, want[3][0])[0]
