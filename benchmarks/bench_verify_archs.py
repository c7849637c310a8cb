"""Verified loading of the emulated architectures (issue 29; docs/image.md, format 2): what
the in-process verifier (``_runner.verify`` against the architecture's table blob from Python)
adds to the emulated back ends' load path, per operation, against the Python relink that
rebuilds the image as format 1 for the emulator (compiler/code_image.py).

    PYTHONPATH=src python benchmarks/bench_verify_archs.py [ARCH ...]   # default: aarch64

Each program of tests/support/image_corpus.py's representative set is compiled once; best
of 5 rounds of 50 calls each, in microseconds per image and nanoseconds per operation (the
manifest's blocks). "table" is the one-off cost per process of building the table blob from
the .cpst file (runner_table, cached).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from copapy import _runner  # noqa: E402
from copapy.compiler.code_image import code_image  # noqa: E402
from copapy.compiler.lower import CompileError  # noqa: E402
from copapy.compiler.program import compile_program  # noqa: E402
from copapy.compiler.runner_table import runner_table  # noqa: E402
from tests.support.image_corpus import nodes, programs  # noqa: E402

REPS, ROUNDS = 50, 5


def best(fn: Callable[[], object]) -> float:
    result = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(REPS):
            fn()
        result = min(result, (time.perf_counter() - t0) / REPS)
    return result


def main(archs: list[str]) -> None:
    for arch in archs:
        t0 = time.perf_counter()
        blob = runner_table(arch).blob
        built = time.perf_counter() - t0
        print(f"### {arch} (table: {len(blob)} bytes, built in {built * 1e3:.0f} ms once per "
              "process)\n")
        print("| program | ops | verify µs | ns/op | relink µs | verify / (verify + relink) |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, outs in programs():
            try:
                compiled = compile_program(nodes(outs), arch)
            except CompileError:
                continue  # no float64 unit
            image = compiled.image
            ops = compiled.stencil_count
            tv = best(partial(_runner.verify, image, blob))
            tr = best(partial(code_image, image))
            print(f"| {name} | {ops} | {tv * 1e6:.1f} | {tv / ops * 1e9:.0f} | "
                  f"{tr * 1e6:.0f} | {tv / (tv + tr):.3f} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:] or ["aarch64"])
