"""The block forms of the math kernels (cp_math.h CP_VKERNELS) against the per-element scalar
kernel calls they replace in the packed loops, in C, for each x86_64 instruction set level.

    python benchmarks/bench_blocks.py      # ns per element, 1e6 float32/float64 elements

The kernel sources are compiled with the stencil flags (tools/build_stencils.py COMMON_FLAGS'
semantics: -O2 -ffp-contract=off -fno-math-errno -fno-builtin) by ziglang's clang, once per
level (x86_64 SSE2, x86_64_v3 AVX2, x86_64_v4 AVX-512 with 512-bit vectors, as the tables);
levels the CPU lacks are skipped. Inputs uniform in [-10, 10) (log, sqrt: |x|); best of 7.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from copapy.arch.cpu import host_flags
from copapy.arch.targets import by_name

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ["sqrt", "sin", "cos", "exp", "log", "tanh"]
LEVELS = {"x86_64": ("x86_64", []), "x86_64-v3": ("x86_64_v3", []),
          "x86_64-v4": ("x86_64_v4", ["-mprefer-vector-width=512"])}
DRIVER = textwrap.dedent("""
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>
    #include "cp_math.h"
    #define N 1000000
    static float a[N], o[N]; static double ad[N], od[N];
    static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                              return t.tv_sec + t.tv_nsec * 1e-9; }
    #define T(label, call) { double best = 1e9; for (int r = 0; r < 7; r++) { \\
        double t0 = now(); call; double t = now() - t0; if (t < best) best = t; } \\
        printf("%s %.2f\\n", label, best * 1e9 / N); }
    #define K(name) \\
        T(#name " f32 scalar", for (int i = 0; i < N; i++) o[i] = cp_##name##f(a[i])) \\
        T(#name " f32 block", cp_v##name##_f32(o, a, N)) \\
        T(#name " f64 scalar", for (int i = 0; i < N; i++) od[i] = cp_##name(ad[i])) \\
        T(#name " f64 block", cp_v##name##_f64(od, ad, N))
    int main(int argc, char **argv) {
        int pos = argc > 1;
        for (int i = 0; i < N; i++) {
            double x = (rand() / (double)RAND_MAX) * 20 - 10;
            a[i] = (float)x; ad[i] = x;
        }
        K(sin) K(cos) K(exp) K(tanh)
        for (int i = 0; i < N; i++) { a[i] = a[i] < 0 ? -a[i] : a[i]; ad[i] = a[i]; }
        K(sqrt) K(log)
        (void)pos; return 0;
    }
""")


def run(level: str, mcpu: str, extra: list[str], tmp: Path) -> dict[str, float]:
    cc = [sys.executable, "-m", "ziglang", "cc", f"-mcpu={mcpu}", *extra]
    flags = ["-O2", "-ffp-contract=off", "-fno-math-errno", "-fno-builtin",
             f"-I{ROOT / 'stencils' / 'include'}"]
    objs = []
    for src in sorted((ROOT / "stencils" / "math").glob("*.c")):
        obj = tmp / f"{level}_{src.stem}.o"
        subprocess.run([*cc, *flags, "-c", str(src), "-o", str(obj)], check=True)
        objs.append(str(obj))
    driver = tmp / "driver.c"
    driver.write_text(DRIVER)
    exe = tmp / f"bench_{level}"
    subprocess.run([*cc, *flags, str(driver), *objs, "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {" ".join(line.split()[:-1]): float(line.split()[-1]) for line in out.splitlines()}


def main() -> None:
    flags = host_flags()
    levels = [lv for lv in LEVELS if set(by_name(lv).cpu_features) <= flags]
    with tempfile.TemporaryDirectory() as tmp:
        res = {lv: run(lv, *LEVELS[lv], Path(tmp)) for lv in levels}
    print("| kernel | type | scalar calls (x86_64) | " +
          " | ".join(f"block {lv}" for lv in levels) + " |")
    print("|---|---|---:|" + "---:|" * len(levels))
    for k in KERNELS:
        for t in ("f32", "f64"):
            cols = [f"{res[lv][f'{k} {t} block']:.2f}" for lv in levels]
            print(f"| {k} | {t} | {res['x86_64'][f'{k} {t} scalar']:.2f} | " +
                  " | ".join(cols) + " |")
    print("\nns per element, best of 7, 1e6 elements")


if __name__ == "__main__":
    main()
