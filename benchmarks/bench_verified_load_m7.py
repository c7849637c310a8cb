"""Load-time cost of verified loading on the Cortex-M7 (issue 29): guest instructions that
the bare-metal harness (runner/baremetal, qemu mps2-an500) executes to load one program as a
format-2 image (parse, verify every block, copy and patch from the flash table) against the
same program as format 1 (parse, copy the image's code, apply its patches), and against an
empty job (boot, semihosting, result). Counted exactly from qemu's execution log
(``-d in_asm,exec,nochain``: every translation block run, times its instruction count).

    PYTHONPATH=src python benchmarks/bench_verified_load_m7.py

Prints instructions per load and per op, and the ratio; qemu counts instructions, not
cycles (an M7 at 600 MHz retires up to 2 per cycle; flash wait states add to it)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import copapy as cp
from copapy import image as im
from copapy.arrays import array_input
from copapy.compiler.code_image import code_image
from copapy.compiler.program import compile_program
from copapy.runtime.qemu_backend import Job, encode_jobs, harness_path
from tests.support.image_corpus import nodes

ARCH = "cortex-m7"
IN_LINE = re.compile(r"^0x([0-9a-f]+):")
EXEC_LINE = re.compile(r"Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")


def programs() -> list[tuple[str, list[Any]]]:
    xs = [cp.value(float(i) + 0.5) for i in range(8)]
    y = xs[0]
    for k in range(60):
        y = y * xs[k % 8] + xs[(k * 3) % 8] - cp.sin(y) / (xs[(k + 1) % 8] + 2.0)
    rng = np.random.default_rng(1)
    q = cp.matrix([[xs[i] + xs[j] for j in range(4)] for i in range(4)])
    a = array_input(rng.random(200).astype(np.float32), packed=True)
    return [("scalar chain", [y]), ("4x4 matvec", [q @ cp.vector(xs[:4])]),
            ("packed 200: sum, sqrt", [(a * 2.0 + 1.0).sum(), cp.sqrt(a * a + 1.0)])]


def instructions(job: bytes) -> int:
    """Guest instructions of one harness boot running ``job``."""
    elf = harness_path(ARCH)
    with tempfile.TemporaryDirectory(prefix="copapy-icount-") as tmp:
        Path(tmp, "job.bin").write_bytes(job)
        log = Path(tmp, "qemu.log")
        subprocess.run(["qemu-system-arm", "-M", "mps2-an500", "-cpu", "cortex-m7",
                        "-nographic", "-d", "in_asm,exec,nochain", "-D", str(log),
                        "-semihosting-config",
                        "enable=on,target=native,arg=harness,arg=job.bin,arg=result.bin",
                        "-kernel", str(elf)], cwd=tmp, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=600, check=True)
        sizes: dict[int, int] = {}
        runs: Counter[int] = Counter()
        block = -1
        with log.open() as f:
            for line in f:
                if line.startswith("IN:"):
                    block = -1
                    continue
                m = IN_LINE.match(line)
                if m:
                    pc = int(m.group(1), 16)
                    if block < 0:
                        block = pc
                        sizes[block] = 0
                    sizes[block] += 1
                    continue
                m = EXEC_LINE.search(line)
                if m:
                    runs[int(m.group(1), 16)] += 1
    return sum(sizes.get(pc, 0) * n for pc, n in runs.items())


def main() -> None:
    empty = instructions(encode_jobs([]))
    print(f"empty job (boot, semihosting, result): {empty:,} instructions")
    print("(each load below also dumps the data region once; the same for both formats)")
    print("| program | ops | format-2 load (verified) | format-1 load | ratio | "
          "verification, per op |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, outs in programs():
        compiled = compile_program(nodes(outs), ARCH)
        blob = compiled.image
        assert im.parse(blob).format_version == 2
        v2 = instructions(encode_jobs([Job(blob)])) - empty
        v1 = instructions(encode_jobs([Job(code_image(blob))])) - empty
        print(f"| {name} | {compiled.op_count} | {v2:,} | {v1:,} | {v2 / v1:.2f}x | "
              f"{(v2 - v1) / compiled.op_count:+.0f} |")


if __name__ == "__main__":
    main()
