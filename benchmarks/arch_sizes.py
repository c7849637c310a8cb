"""Program image size of the benchmark term on every architecture.

The term is the one of benchmarks/bench_term.py: ``sum((v1 + i) @ v2 for i in range(10))``
built by ``bench_term.scalar_term`` from scalar ``cp.value`` inputs (v_size 100, the dot
product a Python loop over scalars, ``s = a[0]*b[0]; s = s + a[j]*b[j]``) and by
``bench_term.packed_term`` from packed input vectors. For each architecture that has a
stencil table (``available_architectures()``, in the order of the image ids) it compiles the
term and reports the stencil table's size, the program's operations and stencils, code, data
and image bytes and the patches the runner applies at load time. Each image is also executed
(natively, on unicorn, or on qemu-system-arm for Cortex-M55) and must give the exact result
(``bench_term.expected``). An architecture whose table cannot compile a form (TriCore has no
array stencils) is listed below the table with the compiler's message.

    PYTHONPATH=src python benchmarks/arch_sizes.py            # print the markdown table
    PYTHONPATH=src python benchmarks/arch_sizes.py --write    # also update benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from pathlib import Path

from bench_term import expected, packed_term, scalar_term

import copapy as cp
from copapy.arch.targets import arch_names
from copapy.compiler import CompileError, compile_program
from copapy.compiler.table import available_architectures, load_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Per-architecture image size"
ARCHS = [a for a in arch_names() if a in available_architectures()]
V_SIZE = 100
COMMAND = "PYTHONPATH=src python benchmarks/arch_sizes.py --write"


def measure(arch: str, n: int, run: bool, packed: bool = False) -> dict[str, object] | str:
    """The row of one architecture and form, or why the architecture cannot compile it."""
    value = packed_term(n) if packed else scalar_term(n)
    name = arch + (" (packed)" if packed else "")
    t0 = time.perf_counter()
    try:
        info = compile_program([value.node], arch)
    except CompileError as exc:
        return f"{name}: not compiled ({exc})"
    compile_ms = (time.perf_counter() - t0) * 1e3
    if run:
        tg = cp.LocalTarget(arch)
        tg.compile(value)
        tg.run()
        got = tg.read(value)
        if got != expected(n):
            raise AssertionError(f"{arch}: the image computed {got!r}, expected {expected(n)!r}")
    return {
        "arch": name,
        "table": len(load_table(arch).names()),
        "ops": info.op_count,
        "stencils": info.stencil_count,
        "code": info.code_bytes,
        "per_op": info.code_bytes / info.op_count,
        "data": info.data_bytes,
        "image": len(info.image),
        "patches": info.runtime_patches,
        "compile_ms": compile_ms,
    }


def markdown(rows: list[dict[str, object]]) -> str:
    head = ("| arch | table stencils | ops | stencils in program | code B | code B / op | data B "
            "| image B | runtime patches |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['arch']} | {r['table']} | {r['ops']} | {r['stencils']} | {r['code']} "
                     f"| {r['per_op']:.1f} | {r['data']} | {r['image']} | {r['patches']} |")
    return "\n".join(lines)


def revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--",
                                "src", "stencils"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"
    return f"{rev}{' + uncommitted changes' if dirty else ''}"


def section(table: str, n: int, ran: bool) -> str:
    checked = ("Every image was also run (natively, on unicorn, or on qemu-system-arm for "
               "Cortex-M55) and gave the exact result. " if ran else "")
    return (f"{SECTION}\n\n"
            f"The benchmark term `sum((v1 + i) @ v2 for i in range(10))`, v_size {n}, built from "
            f"scalar `cp.value`s (dot product as a Python loop over scalars, as in "
            f"`benchmarks/bench_term.py`), and *(packed)* with v1, v2 as packed input vectors "
            f"(array stencils: a fused dot per i), compiled for every target. *table stencils*: "
            f"functions in the architecture's stencil table (`load_table(arch).names()`, "
            f"stencils plus helper functions such as the math kernels); *ops*: operations "
            f"after simplification; *stencils in program*: stencil instances in the chain "
            f"(operations plus stores); *code B*: the code region (stencils, helpers, "
            f"read-only constants); *data B*: the data region; *image B*: the whole program "
            f"image; *runtime patches*: relocations the runner applies at load time (all "
            f"others are resolved by the compiler).\n\n"
            f"{table}\n\n"
            f"{checked}"
            f"copapy {revision()}. Reproduce with:\n\n"
            f"```sh\n{COMMAND}\n```\n")


def write_results(text: str) -> None:
    """Replace (or append) the section in benchmarks/RESULTS.md; other sections stay."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _m: text + "\n", old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(new.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--no-run", action="store_true", help="compile only, do not execute")
    parser.add_argument("--size", type=int, default=V_SIZE)
    args = parser.parse_args()
    results = [measure(arch, args.size, not args.no_run, packed)
               for packed in (False, True) for arch in ARCHS]
    table = markdown([r for r in results if isinstance(r, dict)])
    notes = [r for r in results if isinstance(r, str)]
    if notes:
        table += "\n\n" + "\n".join(f"- {note}" for note in notes)
    print(table)
    if args.write:
        write_results(section(table, args.size, not args.no_run))
        print(f"\nwritten to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
