"""The grammar of stencil names, written once: ``<family>_<type>__<dst>_<form>_<form>``.

The lowering (lower.py, fuse.py, lanepack.py) builds names here, _lower.c calls back into it
(through lower.py's configure), and tools/build_stencils.py reads the same shape back from the
object files (its STENCIL_RE)."""

from __future__ import annotations

#: family prefixes of the fused element-wise loops: a loop body element and a whole-array kernel
FUSED, BLOCK = "vr", "vb"
#: the loop frame of fused loops
LOOP = "vloop"


def stencil(family: str, dtype: str, dst: str | int, *forms: str) -> str:
    """A stencil's name: its family, operand type, destination (a register, ``v`` an array
    slot, ``p`` a loop lane) and operand forms (``0``/``1`` registers, ``m`` a slot,
    ``v`` an array, ``p`` a lane)."""
    return f"{family}_{dtype}__{'_'.join((str(dst), *forms))}"
