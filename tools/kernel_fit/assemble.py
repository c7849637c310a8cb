"""Paste the generated constants (coefs.h from gen_coef.py, tables.h from gen_tab.py) into the
kernel templates (templates/<name>.c.in) and write the kernel sources stencils/math/<name>.c.

    python assemble.py                 # every template -> stencils/math
    python assemble.py trig.c          # one
    python assemble.py --out DIR       # somewhere else
    python assemble.py --check         # compare with stencils/math, exit 1 if one differs

A template is the kernel source with @@NAME ...@@ where constants go: NAME is a #define or a
table of the generated files, NAME* every #define NAME0, NAME1, ... (with the fit's comment
line first). The kernel sources are never edited by hand, only their templates
(tests/test_math_kernels.py checks both agree).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TEMPLATES = HERE / "templates"
KERNELS = ROOT / "stencils" / "math"


def clean(s: str) -> str:
    """Shortest hex spelling: no trailing zero digits of the fraction."""
    s = re.sub(r"(0x1\.[0-9a-f]*?)0+p", r"\1p", s)
    return s.replace("0x1.p", "0x1p")


def blocks(text: str) -> dict[str, str]:
    """name -> its #define line or static const table; '#NAME' -> a fit's comment line."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"#define (\w+) ", line)
        if m:
            out[m.group(1)] = line
            i += 1
            continue
        m = re.match(r"static const \w+ (\w+)\[", line)
        if m:
            j = i
            while not lines[j].startswith("};"):
                j += 1
            out[m.group(1)] = "\n".join(lines[i:j + 1])
            i = j + 1
            continue
        m = re.match(r"/\* (\w+): degree", line)
        if m:
            out["#" + m.group(1)] = line
        i += 1
    return out


def constants(coefs: Path = HERE / "coefs.h", tables: Path = HERE / "tables.h") -> dict[str, str]:
    b = blocks(clean(coefs.read_text()))
    b.update(blocks(clean(tables.read_text())))
    return b


def assemble(template: str, consts: dict[str, str]) -> str:
    def rep(m: re.Match[str]) -> str:
        res = []
        for n in m.group(1).split():
            if n.endswith("*"):
                pre = n[:-1]
                if "#" + pre in consts:
                    res.append(consts["#" + pre])
                ks = sorted((k for k in consts if re.fullmatch(re.escape(pre) + r"\d+", k)),
                            key=lambda k: int(k[len(pre):]))
                res += [consts[k] for k in ks]
            else:
                res.append(consts[n])
        return "\n".join(res)

    return re.sub(r"@@([^@]*)@@", rep, template)


def templates() -> list[str]:
    """The kernel sources that have a template (names like trig.c)."""
    return sorted(p.name[:-3] for p in TEMPLATES.glob("*.c.in"))


def differences(names: list[str] | None = None) -> list[str]:
    """The kernel sources that differ from their assembled template."""
    consts = constants()
    return [n for n in names or templates()
            if assemble((TEMPLATES / f"{n}.in").read_text(), consts) != (KERNELS / n).read_text()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="kernel sources, e.g. trig.c (default: all)")
    ap.add_argument("--out", type=Path, default=KERNELS)
    ap.add_argument("--check", action="store_true", help="compare with stencils/math")
    a = ap.parse_args(argv)
    names = a.names or templates()
    if a.check:
        bad = differences(names)
        for n in bad:
            print(f"stencils/math/{n} differs from tools/kernel_fit/templates/{n}.in "
                  "(edit the template, then run assemble.py)")
        return 1 if bad else 0
    consts = constants()
    for n in names:
        (a.out / n).write_text(assemble((TEMPLATES / f"{n}.in").read_text(), consts))
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
