"""Verified loading (issue 29, docs/image.md format 2) against loading code (format 1): the
in-process loader's time per operation, the upload bytes, and the tables a runner carries.

    PYTHONPATH=src python benchmarks/bench_verified_load.py

Each program of tests/test_verified_loading.py's representative set is compiled once for
x86_64 (format 2) and converted to format 1 (the same code, relinked by
compiler/manifest.py); both are loaded by the Python module's runner core (format 2: checked
and built from the stencil table, format 1: copied and patched, allow_code). Best of 7 runs
of 200 loads each (load + unload), in microseconds per load and nanoseconds per operation.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from copapy import _runner  # noqa: E402
from copapy.compiler.code_image import code_image  # noqa: E402
from copapy.compiler.program import compile_program  # noqa: E402
from copapy.compiler.runner_table import RUNNER_TABLE_ARCHS, runner_table  # noqa: E402
from tests.test_verified_loading import CASES, nodes  # noqa: E402

REPS, ROUNDS = 200, 7


def per_load(image: bytes, allow_code: bool) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(REPS):
            _runner.load(image, allow_code=allow_code).unload()
        best = min(best, (time.perf_counter() - t0) / REPS)
    return best


def main() -> None:
    print("| program | ops | format 1 (code) µs | format 2 (verified) µs | ns/op 1 → 2 | "
          "ratio | upload bytes 1 → 2 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, outs in CASES:
        compiled = compile_program(nodes(outs), "x86_64")
        v2 = compiled.image
        v1 = code_image(v2)
        ops = compiled.stencil_count
        t1, t2 = per_load(v1, True), per_load(v2, False)
        print(f"| {name} | {ops} | {t1 * 1e6:.1f} | {t2 * 1e6:.1f} | "
              f"{t1 / ops * 1e9:.0f} → {t2 / ops * 1e9:.0f} | {t2 / t1:.2f} | "
              f"{len(v1)} → {len(v2)} |")
    print()
    print("| table | blob bytes | runner/tables/<arch>.c bytes |")
    print("|---|---:|---:|")
    for arch in sorted(RUNNER_TABLE_ARCHS):
        source = ROOT / "runner" / "tables" / f"{arch}.c"
        print(f"| {arch} | {len(runner_table(arch).blob)} | {source.stat().st_size} |")


if __name__ == "__main__":
    main()
