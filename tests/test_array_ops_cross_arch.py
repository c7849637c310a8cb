"""Sort, argsort, convolve, conv2d, pooling and axis reductions give the same bits on every
architecture: one program of all of them, compiled for native x86_64 (the baseline) and for
each configuration of tests/support/archs.py (unicorn and qemu emulators), the same input
bytes written, every output compared raw (any NaN equals any NaN)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.compiler import CompiledProgram, compile_program
from copapy.graph.node import Node

from .support.archs import CONFIG_IDS, CONFIGS, NATIVE, Batch, Config, execute, same_raw


@functools.cache
def operations() -> tuple[list[list[Node]], list[Node], list[list[bytes]]]:
    """Output nodes per operation, input nodes, and three input sets (raw bytes per input)."""
    rng = np.random.default_rng(7)
    x = cp.value(np.zeros(13, np.float32), packed=True)
    img = cp.value(np.zeros((6, 7), np.float32), packed=True)
    kernel = cp.value(np.zeros(4, np.float32), packed=True)
    cube = cp.value(np.zeros((2, 3, 4, 5), np.float32), packed=True)
    outs: list[Any] = [
        cp.sort(x), cp.argsort(x),
        cp.convolve(x, kernel, "full"), cp.convolve(x, kernel, "same"),
        cp.conv2d(img, np.array([[0.5, -1.25], [2.0, 0.75]], np.float32), "same"),
        cp.max_pool2d(img, 2), cp.avg_pool2d(img, 3, 2),
        img.sum(axis=0), img.mean(axis=1, keepdims=True), img.argmax(axis=1),
        cp.grad((cp.sort(x) * np.arange(13, dtype=np.float32)).sum(), x),
        cp.grad(cp.max_pool2d(img, 2).sum() + cp.conv2d(img, np.ones((2, 2)), "valid").sum(),
                img),
        # axis permutations (level gathers): sorting along the first axis, N-D reductions,
        # a 4-D transpose and its gradient (the inverse gathers)
        cp.sort(img, axis=0), cube.sum(axis=(0, 2)), cube.max(axis=1, keepdims=True),
        cube.transpose(3, 2, 1, 0),
        cp.grad((cube.transpose(3, 1, 2, 0) * np.arange(120, dtype=np.float32).reshape(
            5, 3, 4, 2)).sum() + (np.swapaxes(cube, 1, 3) ** 2).sum(), cube),
        # broadcasts (level gathers with steps of 0) and their gradients (sums of the copies)
        cube * x[:5], cube + cube[:, :1, :, 2:3],
        cp.grad((cube * cube[:1, :, :1] * x[:5]).sum(), x),
    ]
    groups = [list(o.to_packed().nodes()) for o in outs]
    inputs = [x.node(), img.node(), kernel.node(), cube.node()]
    sets = []
    for run in range(3):
        values = [rng.standard_normal(13), rng.standard_normal((6, 7)),
                  rng.standard_normal(4), rng.standard_normal((2, 3, 4, 5))]
        if run == 2:  # ties, signed zeros and a NaN
            values[0][:4] = [1.0, 1.0, -0.0, 0.0]
            values[0][7] = np.nan
            values[1][2, 2:5] = 3.0
        sets.append([v.astype(np.float32).tobytes() for v in values])
    return groups, inputs, sets


def program(arch: str) -> list[Node]:
    """The outputs of every operation (every architecture compiles them all)."""
    groups, _, _ = operations()
    return [n for group in groups for n in group]


def batch(compiled: CompiledProgram, outputs: list[Node]) -> Batch:
    _, inputs, sets = operations()
    ports = compiled.ports
    return Batch(compiled.image,
                 [[(ports[n].offset, raw) for n, raw in zip(inputs, values, strict=True)]
                  for values in sets],
                 [(ports[o].offset, o.nbytes) for o in outputs])


@functools.cache
def baseline() -> dict[Node, list[bytes]]:
    """Each output's raw bytes per input set, natively."""
    groups, _, _ = operations()
    outputs = [n for group in groups for n in group]
    b = batch(compile_program(outputs, NATIVE.arch), outputs)
    execute(NATIVE, [b])
    return {o: [run[k] for run in b.results] for k, o in enumerate(outputs)}


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_same_bits_on_every_architecture(config: Config) -> None:
    outputs = program(config.arch)
    assert len(outputs) == sum(map(len, operations()[0]))
    b = batch(compile_program(outputs, config.arch), outputs)
    execute(config, [b])
    want = baseline()
    for run, got_run in enumerate(b.results):
        for k, got in enumerate(got_run):
            assert same_raw(got, want[outputs[k]][run], outputs[k].dtype), (
                f"{config.id}: output {k} ({outputs[k].op}) differs in input set {run}")
