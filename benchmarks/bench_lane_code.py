"""What bounds the unpacked `@` (issue 13, point 4): register pressure or code bytes?

The unpacked form of the benchmark term sum((v1 + i) @ v2 for i in range(10)) is straight-line
code, about four instructions per element (x86-64, from copapy's stencils):

    movss xmm1, [v1_j]; addss xmm1, [c_i]     add_f32__1_m_m
    mulss xmm1, [v2_j]                        mul_f32__1_m_1
    addss xmm0, xmm1                          add_f32__0_1_0   (lane accumulator in f0)

and the lowering computes one lane after the other (lane j's chain of n/8 elements with its
accumulator in f0, then one store per lane). This script assembles that code and variants of it
with gcc and times them side by side (interleaved rounds, medians), to see what a design with
registers for the eight lane accumulators could gain at best:

  today      the code above, lane by lane (a serial addss chain per lane)
  registers  the same instructions with the 8 accumulators in 8 registers and the elements in
             order (lane i mod 8): no dependence chain, no spill (the best a lane-register
             design can do: no stencil is cheaper than one addss per element)
  lanevec    accumulators as 2 x 4 lanes in two vector registers, the products inserted into a
             staging register by a shuffle and added with one addps per 4 elements
  spilled    elements in order, each lane accumulator loaded and stored per element
  short      today's dependence structure with register operands instead of RIP-relative
             memory operands (the same instructions, 35% fewer code bytes)

    python benchmarks/bench_lane_code.py [--sizes 50,100,200,500] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import textwrap
from pathlib import Path

MAIN = textwrap.dedent(
    """
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>
    void chain(void);
    static double now(void)
    {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec + 1e-9 * t.tv_nsec;
    }
    int main(int argc, char **argv)
    {
        long reps = argc > 1 ? atol(argv[1]) : 1000;
        double best = 1e9;
        for (int k = 0; k < 9; k++) {
            double t0 = now();
            for (long r = 0; r < reps; r++) chain();
            double dt = (now() - t0) / reps;
            if (dt < best) best = dt;
        }
        printf("%.6e\\n", best);
        return 0;
    }
    """
)

ACCUMULATORS = ["xmm0", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8"]
VARIANTS = ["today", "registers", "lanevec", "spilled", "short"]


def assembly(n: int, variant: str) -> str:
    """The chain of the term for ``n`` elements in one of the VARIANTS (Intel syntax)."""
    def v1(j: int) -> str:
        return f"[rip+data+{4 * j}]"

    def v2(j: int) -> str:
        return f"[rip+data+{4 * (n + j)}]"

    def c(i: int) -> str:
        return f"[rip+data+{4 * (2 * n + i)}]"

    def t(k: int) -> str:
        return f"[rip+data+{4 * (2 * n + 10 + k)}]"

    def product(i: int, j: int) -> list[str]:
        if variant == "short":
            return ["movaps xmm1, xmm9", "addss xmm1, xmm10", "mulss xmm1, xmm11"]
        return [f"movss xmm1, {v1(j)}", f"addss xmm1, {c(i)}", f"mulss xmm1, {v2(j)}"]

    out = [".intel_syntax noprefix", ".section .note.GNU-stack,\"\",@progbits", ".text",
           ".globl chain", "chain:"]
    for i in range(10):
        if variant in ("today", "short"):
            for lane in range(min(n, 8)):
                for j in range(lane, n, 8):
                    out += product(i, j)
                    out.append("movss xmm0, xmm1" if j == lane else "addss xmm0, xmm1")
                out.append(f"movss {t(lane)}, xmm0")
        elif variant == "registers":
            for j in range(n):
                acc = ACCUMULATORS[j % 8]
                out += product(i, j)
                out.append(f"movss {acc}, xmm1" if j < 8 else f"addss {acc}, xmm1")
            out += [f"movss {t(lane)}, {ACCUMULATORS[lane]}" for lane in range(min(n, 8))]
        elif variant == "lanevec":
            for j in range(n):
                k = j % 8
                stage, acc = ("xmm6", "xmm4") if k < 4 else ("xmm7", "xmm5")
                out += product(i, j)
                if k % 4 == 0:
                    out.append(f"movaps {stage}, xmm1")
                else:
                    out += [f"shufps {stage}, {stage}, 0x93", f"movss {stage}, xmm1"]
                if k % 4 == 3 or j == n - 1:
                    out.append(f"addps {acc}, {stage}" if j >= 8 else f"movaps {acc}, {stage}")
            out += [f"movups {t(0)}, xmm4", f"movups {t(4)}, xmm5"]
        elif variant == "spilled":
            for j in range(n):
                out += product(i, j)
                if j >= 8:
                    out.append(f"addss xmm1, {t(j % 8)}")
                out.append(f"movss {t(j % 8)}, xmm1")
        # the tree and the sum over i (the same few instructions in every variant)
        out += [f"movss xmm0, {t(0)}", f"addss xmm0, {t(1)}", f"movss {t(8 + i % 4)}, xmm0"]
    out += ["ret", ".bss", ".align 64", "data:", f".zero {4 * (2 * n + 40)}"]
    return "\n".join(out) + "\n"


def build(workdir: Path, n: int, variant: str) -> tuple[Path, int]:
    asm = workdir / f"{variant}_{n}.s"
    asm.write_text(assembly(n, variant))
    exe = workdir / f"{variant}_{n}"
    subprocess.run(["gcc", "-O2", str(workdir / "main.c"), str(asm), "-o", str(exe)], check=True)
    obj = workdir / f"{variant}_{n}.o"
    subprocess.run(["gcc", "-c", str(asm), "-o", str(obj)], check=True)
    size = subprocess.run(["size", "-A", str(obj)], capture_output=True, text=True, check=True)
    text = next(int(line.split()[1]) for line in size.stdout.splitlines()
                if line.startswith(".text"))
    return exe, text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="50,100,200,500")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "main.c").write_text(MAIN)
        built = {(n, v): build(work, n, v) for n in sizes for v in VARIANTS}
        times: dict[tuple[int, str], list[float]] = {key: [] for key in built}
        for _ in range(args.rounds):  # interleaved: every variant once per round
            for (n, v), (exe, _) in built.items():
                reps = str(max(200, 200000 // n))
                out = subprocess.run([str(exe), reps], capture_output=True, text=True, check=True)
                times[(n, v)].append(float(out.stdout))
    print("| v_size | " + " | ".join(f"{v} µs" for v in VARIANTS) + " | "
          + " | ".join(f"{v}/today" for v in VARIANTS[1:]) + " | today code B | short code B |")
    print("|---:|" + "---:|" * (2 * len(VARIANTS) + 1))
    for n in sizes:
        med = {v: statistics.median(times[(n, v)]) for v in VARIANTS}
        print(f"| {n} | " + " | ".join(f"{med[v] * 1e6:.3f}" for v in VARIANTS) + " | "
              + " | ".join(f"{med[v] / med['today']:.2f}" for v in VARIANTS[1:])
              + f" | {built[(n, 'today')][1]} | {built[(n, 'short')][1]} |")
    print(f"\nload average: {os.getloadavg()[0]:.2f}; medians of {args.rounds} interleaved rounds "
          f"(each the best of 9 batches)")


if __name__ == "__main__":
    main()
