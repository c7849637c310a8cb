"""Host build of the array stencils, callable from Python (tests/test_array_stencils.py).

stencils/array.c, the math kernels (stencils/math/*.c) and harness.c (the data slots as real
objects, a cp_next that records the registers) are compiled for the host into one shared
library, loaded with ctypes. A stencil is then an ordinary C function
``void f(float f0, float f1, double d0, double d1, int32_t i0, int32_t i1)``: ``Harness.call``
runs one and returns the six registers it passed on to cp_next.

The build is tools/host_build.py's: the C compiler is $CP_ARRAY_HARNESS_CC if set (a command,
split like a shell would), else ziglang's clang (the compiler of the real stencil build), else
clang-19, clang, gcc or cc. No compiler is an error (``HarnessError``), never a skip. The library
is cached in the temp directory under a hash of the sources, the compiler and the flags.

    python tools/array_harness/harness.py    # build, print the library path and stencil count
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from host_build import HostBuildError, build_shared  # noqa: E402

HERE = Path(__file__).resolve().parent
INCLUDE = ROOT / "stencils" / "include"
ARRAY_SRC = ROOT / "stencils" / "array.c"
HARNESS_SRC = HERE / "harness.c"
CAP = 65536  # elements per array slot (CP_HARNESS_CAP)

# The stencil build's semantics-relevant flags (tools/build_stencils.py COMMON_FLAGS), for the host.
CFLAGS = ["-std=c11", "-O2", "-fPIC", "-ffreestanding", "-fno-builtin", "-fno-math-errno",
          "-ffp-contract=off", "-fno-jump-tables", "-Wall", "-Wextra", "-Wno-unused-parameter",
          f"-DCP_HARNESS_CAP={CAP}", f"-I{INCLUDE}"]
# the harness itself calls strcmp: a hosted translation unit
HARNESS_CFLAGS = ["-std=c11", "-O1", "-fPIC", "-Wall", "-Wextra", f"-DCP_HARNESS_CAP={CAP}",
                  f"-I{INCLUDE}"]

REGS = ("f0", "f1", "d0", "d1", "i0", "i1")
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}


# a missing compiler or a failed build (tools/host_build.py)
HarnessError = HostBuildError


def sources() -> list[Path]:
    return [ARRAY_SRC, *sorted((ROOT / "stencils" / "math").glob("*.c")), HARNESS_SRC]


def build(verbose: bool = False, alias_out: str | None = None,
          lane_vectors: bool = False) -> Path:
    """Compile (or reuse) the harness library; return its path. alias_out "a", "b" or "c" makes
    the out arrays the same memory as that role's arrays (in-place operation). lane_vectors
    builds the reductions in vector registers, as the tables of targets with an IEEE-exact
    vector unit have them (cp_array.h, CP_LANE_VECTORS; needs clang, the default compiler)."""
    alias = [f"-DCP_HARNESS_ALIAS_OUT={alias_out}"] if alias_out else []
    vectors = ["-DCP_LANE_VECTORS=1"] if lane_vectors else []
    units = [(src, [*HARNESS_CFLAGS, *alias, *vectors] if src == HARNESS_SRC
              else [*CFLAGS, *vectors]) for src in sources()]
    return build_shared("cparray", units, depends=sorted(INCLUDE.glob("*.h")),
                        env="CP_ARRAY_HARNESS_CC", verbose=verbose)


class _State(ctypes.Structure):
    _fields_ = [("f0", ctypes.c_float), ("f1", ctypes.c_float), ("d0", ctypes.c_double),
                ("d1", ctypes.c_double), ("i0", ctypes.c_int32), ("i1", ctypes.c_int32),
                ("calls", ctypes.c_int32)]


@dataclass(frozen=True)
class Regs:
    """The six virtual registers (as NumPy scalars, so float32 bits are kept)."""

    f0: np.float32
    f1: np.float32
    d0: np.float64
    d1: np.float64
    i0: np.int32
    i1: np.int32

    def bits(self) -> tuple[int, ...]:
        return tuple(int(np.asarray(getattr(self, r)).view(
            {4: np.uint32, 8: np.uint64}[np.asarray(getattr(self, r)).itemsize]))
            for r in REGS)


class Harness:
    """The loaded library: slots as NumPy views, stencils as callables."""

    def __init__(self, path: Path | None = None, alias_out: str | None = None,
                 lane_vectors: bool = False) -> None:
        self.path = path or build(alias_out=alias_out, lane_vectors=lane_vectors)
        self.lib = ctypes.CDLL(str(self.path))
        #: the reductions keep their lanes in vector registers (build(lane_vectors=True))
        self.lane_vectors = bool(self.lib.cp_harness_lane_vectors())
        self.lib.cp_harness_slot.restype = ctypes.c_void_p
        self.lib.cp_harness_slot.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t)]
        self.lib.cp_harness_regs.restype = ctypes.POINTER(_State)
        self.lib.cp_harness_regs.argtypes = []
        self._state = self.lib.cp_harness_regs().contents
        self._slots: dict[str, np.ndarray[Any, Any]] = {}
        self._funcs: dict[str, Any] = {}

    def slot(self, name: str) -> np.ndarray[Any, Any]:
        """Writable NumPy view of the slot ``name`` (an array slot, or a 1-element view)."""
        view = self._slots.get(name)
        if view is None:
            size = ctypes.c_size_t()
            addr = self.lib.cp_harness_slot(name.encode(), ctypes.byref(size))
            if not addr:
                raise KeyError(name)
            dtype = np.dtype(DTYPES[name.rsplit("_", 1)[1]])
            buf = (ctypes.c_char * size.value).from_address(addr)
            view = np.frombuffer(memoryview(buf).cast("B"), dtype=dtype)
            self._slots[name] = view
        return view

    def stencil(self, name: str) -> Any:
        func = self._funcs.get(name)
        if func is None:
            func = getattr(self.lib, name)
            func.restype = None
            func.argtypes = [ctypes.c_float, ctypes.c_float, ctypes.c_double, ctypes.c_double,
                             ctypes.c_int32, ctypes.c_int32]
            self._funcs[name] = func
        return func

    def call(self, name: str, regs: Regs) -> Regs:
        """Run one stencil with the given registers; return what it passed to cp_next."""
        before = self._state.calls
        self.stencil(name)(float(regs.f0), float(regs.f1), float(regs.d0), float(regs.d1),
                           int(regs.i0), int(regs.i1))
        if self._state.calls != before + 1:
            raise AssertionError(f"{name} reached cp_next {self._state.calls - before} times")
        s = self._state
        # ctypes reads float fields as Python floats (exact for float32 values, NaN payloads
        # of float32 kept by the double they widen to); read raw bits for exactness instead
        raw = ctypes.string_at(ctypes.addressof(s), ctypes.sizeof(_State))
        f = np.frombuffer(raw, dtype=np.float32, count=2, offset=_State.f0.offset)
        d = np.frombuffer(raw, dtype=np.float64, count=2, offset=_State.d0.offset)
        i = np.frombuffer(raw, dtype=np.int32, count=2, offset=_State.i0.offset)
        return Regs(f[0], f[1], d[0], d[1], i[0], i[1])

    def stencil_names(self) -> list[str]:
        """Every stencil the library defines (the exported <op>_<type>__... functions)."""
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection

        names = []
        with open(self.path, "rb") as f:
            for sec in ELFFile(f).iter_sections():
                if isinstance(sec, SymbolTableSection) and sec.name == ".dynsym":
                    for sym in sec.iter_symbols():
                        if (sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] != "SHN_UNDEF"
                                and "__" in sym.name and not sym.name.startswith("_")):
                            names.append(sym.name)
        return sorted(set(names))


def main() -> int:
    h = Harness(build(verbose=True))
    print(h.path)
    print(len(h.stencil_names()), "stencils")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
