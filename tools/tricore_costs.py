"""Code size and executed instructions per TriCore stencil: the committed table against another.

For every stencil family (``add_f32``, ``lt_i32``, ...) that both tables have: the mean code bytes
of its register forms (without the trailing jump the linker drops) and the mean number of
instructions unicorn executes for one run of the stencil (kernel calls included), over a few
operand sets. Used to compare the C stencils with the hand-written assembly they replaced
(docs/tricore.md):

    git show 4374602:src/copapy/_tables/tricore.cpst > /tmp/tricore-asm.cpst
    PYTHONPATH=src python tools/tricore_costs.py /tmp/tricore-asm.cpst
    PYTHONPATH=src python tools/tricore_costs.py          # every scalar family of this table

Needs unicorn (``pip install 'copapy[emu]'``).
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))

from build_stencils import read_content, write_table  # noqa: E402

from copapy.arch.targets import by_name  # noqa: E402
from copapy.compiler.link import link  # noqa: E402
from copapy.compiler.lower import Instr  # noqa: E402
from copapy.compiler.table import StencilTable, load_table  # noqa: E402
from copapy.image import Image, ImagePatch, ImageTask, kinds_table  # noqa: E402
from copapy.runtime.unicorn_backend import UnicornProgram  # noqa: E402

ARCH = "tricore"
#: operand sets: (float a, float b, int a, int b, condition)
SETS = [(1.5, -2.25, 7, -3, 1), (3.0e9, 0.5, 123456789, 5, 0), (-0.0, 100.0, -1, 2, 1),
        (0.7, 1e-3, 46341, -7, 0)]
F0, F1, I0, I1, A_F, B_F, A_I, B_I, C_I, OUT = range(0, 40, 4)


def read_table(path: Path) -> StencilTable:
    """A table file of this or an earlier format (an old table from the history)."""
    return StencilTable(write_table(read_content(path.read_bytes())))


def _image(table: StencilTable, stencil: str | None, values: tuple[float, float, int, int, int]
           ) -> bytes:
    fa, fb, ia, ib, c = values
    data = struct.pack("<2f2i2f3i", fa, fb, ia, ib, fa, fb, ia, ib, c) + bytes(8)
    instrs = [Instr("mov_f32__0_m", (("a", F0),)), Instr("mov_f32__1_m", (("a", F1),)),
              Instr("mov_i32__0_m", (("a", I0),)), Instr("mov_i32__1_m", (("a", I1),))]
    if stencil is not None:
        kind = stencil.split("__")[0].split("_")[-1]
        slots = {"a": A_F if kind == "f32" else A_I, "b": B_F if kind == "f32" else B_I,
                 "c": C_I, "out": OUT}
        roles = {"store": ("a", "out"), "where": ("c", "a", "b")}.get(
            stencil.split("_")[0], ("a", "b"))
        instrs.append(Instr(stencil, tuple((r, slots[r]) for r in roles)))
    instrs += [Instr("store_f32__m_0", (("out", OUT),)), Instr("store_i32__m_0", (("out", OUT),))]
    linked = link([instrs], table)
    kinds, index = kinds_table([p.kind for p in linked.patches])
    return Image(arch=by_name(ARCH).id, code=linked.code, data_offset=linked.data_offset,
                 data_size=len(data), base_align=table.base_align, data_init=data, kinds=kinds,
                 patches=[ImagePatch(p.site, index[p.kind], p.addend) for p in linked.patches],
                 tasks=[ImageTask(linked.entries[0])]).to_bytes()


def executed(image: bytes) -> int:
    """Instructions unicorn executes for one run of the image."""
    from unicorn import UC_HOOK_CODE

    prog = UnicornProgram(image, ARCH)
    count = [0]

    def hook(*_args: object) -> None:
        count[0] += 1

    prog._emu.hook_add(UC_HOOK_CODE, hook)
    prog.run()
    return count[0]


def costs(table: StencilTable, names: list[str]) -> dict[str, tuple[float, float]]:
    """family -> (mean bytes, mean executed instructions) over its forms in ``names``."""
    base = [executed(_image(table, None, v)) for v in SETS]
    size: dict[str, list[int]] = defaultdict(list)
    steps: dict[str, list[int]] = defaultdict(list)
    for name in names:
        func = table.function(name)
        family = name.split("__")[0]
        size[family].append(len(func.code) - func.strip)
        for v, b in zip(SETS, base, strict=True):
            steps[family].append(executed(_image(table, name, v)) - b)
    return {f: (statistics.mean(size[f]), statistics.mean(steps[f])) for f in size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, nargs="?",
                        help="the other tricore.cpst (e.g. the assembly one)")
    args = parser.parse_args()
    ours = load_table(ARCH)
    if args.other is None:
        names = sorted(n for n in ours.names() if "__" in n and "v" not in n.split("__")[1]
                       and not n.startswith("floop_"))  # a loop's begin/end: not alone
        forms_of: dict[str, int] = defaultdict(int)
        for n in names:
            forms_of[n.split("__")[0]] += 1
        print("| family | forms | bytes | instructions |")
        print("|---|---:|---:|---:|")
        for f, (size, steps) in sorted(costs(ours, names).items()):
            print(f"| {f} | {forms_of[f]} | {size:.1f} | {steps:.1f} |")
        return 0
    other = read_table(args.other)
    names = sorted(n for n in other.names() if "__" in n and n in ours and "v" not in
                   n.split("__")[1])
    a, b = costs(other, names), costs(ours, names)
    print("| family | forms | bytes (other) | bytes (this) | instructions (other) | "
          "instructions (this) |")
    print("|---|---:|---:|---:|---:|---:|")
    forms = defaultdict(int)
    for n in names:
        forms[n.split("__")[0]] += 1
    for f in sorted(a):
        print(f"| {f} | {forms[f]} | {a[f][0]:.1f} | {b[f][0]:.1f} | {a[f][1]:.1f} | "
              f"{b[f][1]:.1f} |")
    total = {k: sum(v[i] * forms[f] for f, v in t.items()) / len(names)
             for k, t, i in (("ab", a, 0), ("bb", b, 0), ("ai", a, 1), ("bi", b, 1))}
    print(f"| **all {len(names)} stencils** | | {total['ab']:.1f} | {total['bb']:.1f} | "
          f"{total['ai']:.1f} | {total['bi']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
