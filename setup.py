"""Builds the C parts: the runner core as ``copapy._runner`` (the same sources every runner
uses), the deterministic math kernels for the host as ``copapy._kernels``, the C call slot of
jitted functions as ``copapy._dispatch``, the compiler's and the graph's per-node loops as
``copapy.compiler._lower``/``_link`` and ``copapy.graph._walk``/``_sweep``, the host runner
process ``copapy/_bin/copapy-runner`` (``copapy runner`` starts it) and the runner as a shared
library with its C ABI, ``copapy/_lib/libcopapy.so`` + ``copapy/_lib/include/copapy``
(copapy.kits, C/C++ programs); a wheel also carries the firmware sources as
``copapy/_firmware`` (``copapy firmware export DIR`` writes them out)."""
import os
import platform
import shutil
import struct
import sys
from glob import glob
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

STRICT = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]
HERE = Path(__file__).resolve().parent


def _host_table() -> list[str]:
    """The stencil tables the host's runners carry (runner/tables/<arch>.c, which lists them,
    and its variants <arch>-*.c; verified loading); none where the architecture has no table
    yet (format-1 images only)."""
    wide = struct.calcsize("P") == 8
    arch = ({"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
             "riscv64": "rv64"} if wide else
            {"i386": "x86", "i486": "x86", "i586": "x86", "i686": "x86", "x86": "x86",
             "armv7l": "armv7a"}).get(platform.machine().lower())
    path = f"runner/tables/{arch}.c"
    variants = sorted(glob(f"runner/tables/{arch}-*.c"))
    return [path, *variants] if arch and Path(path).exists() else []


TABLE = _host_table()
TABLE_FLAGS = ["-DCP_WITH_TABLE"] if TABLE else []

runner = Extension(
    "copapy._runner",
    sources=sorted(glob("runner/src/*.c")) + TABLE + ["runner/python/module.c",
                                                      "runner/python/scheduler.c",
                                                      "runner/python/batch.c"],
    include_dirs=["runner/include"],
    extra_compile_args=STRICT + TABLE_FLAGS,
)

# -ffp-contract=off: no FMA contraction, so the host computes exactly what the stencils do;
# 32-bit x86 computes in SSE2 registers (x87's extended precision would round differently).
X87 = struct.calcsize("P") == 4 and platform.machine() in ("i386", "i486", "i586", "i686", "x86")
kernels = Extension(
    "copapy._kernels",
    sources=sorted(glob("stencils/math/*.c")) + ["stencils/host/kernels_module.c"],
    include_dirs=["stencils/include"],
    depends=sorted(glob("stencils/include/*.h")),
    extra_compile_args=[*STRICT, "-ffp-contract=off", "-fno-math-errno", "-fno-builtin",
                        *(["-msse2", "-mfpmath=sse"] if X87 else [])],
)


def strict_module(name: str, source: str) -> Extension:
    """A one-file extension module of the CPython API alone, with the strict flags."""
    return Extension(name, sources=[source], extra_compile_args=STRICT)


# the C call slot of @cp.jit functions (no runner code: jitted calls on emulators use it too)
dispatch = strict_module("copapy._dispatch", "runner/python/dispatch.c")
# the scalar lowering loop of the compiler (compiler/lower.py; docs/design.md, "Compile,
# gradient and start-up speed"), placing stencils (compiler/link.py), the post-order walk of
# the graph (graph/traverse.py)
lowering = strict_module("copapy.compiler._lower", "src/copapy/compiler/_lower.c")
linking = strict_module("copapy.compiler._link", "src/copapy/compiler/_link.c")
walk = strict_module("copapy.graph._walk", "src/copapy/graph/_walk.c")
# the gradient sweep's loops (graph/grad.py)
sweep = strict_module("copapy.graph._sweep", "src/copapy/graph/_sweep.c")
# hash-consing of nodes and make's common case (graph/node.py, graph/build.py)
interning = strict_module("copapy.graph._intern", "src/copapy/graph/_intern.c")

#: what a user needs to build a runner for a board (copied into the wheel; globbed, so
#: directories that do not exist in this checkout are simply left out)
# runner/tables: the stencil tables runner/Makefile links into the host runner (format 2)
FIRMWARE = ["runner/src", "runner/include", "runner/tables", "runner/baremetal",
            "runner/cortexm", "runner/host", "zephyr_app",
            "runner/Makefile", "docs/protocol.md", "docs/image.md"]
FIRMWARE_SKIP = shutil.ignore_patterns("build", "build-*", "*.o", "*.elf", "*.bin", "__pycache__")


WINDOWS = sys.platform == "win32"
#: libcopapy's file in copapy/_lib (src/copapy/kits/paths.py looks for the same name)
LIBRARY = {"win32": "copapy.dll", "darwin": "libcopapy.dylib"}.get(sys.platform, "libcopapy.so")
#: the Windows host runner (runner/host/win32) and its system libraries (tools/cross_build.py)
WIN32_HOST = [*sorted(glob("runner/host/win32/*.c")), "runner/host/preload.c",
              "runner/host/runner_common.c"]
WIN32_LIBS = ["ws2_32", "winmm", "bcrypt", "advapi32"]
PTHREAD = [] if WINDOWS else ["-pthread"]


class BuildWithRunner(build_ext):
    """The extension modules, then beside them the host runner executable (same compiler,
    same strict flags as runner/Makefile's `host` target) and libcopapy (its `lib` flags).
    On Windows the compiler is MinGW's gcc (the flags and the platform layer are GCC's):
    untested, the Windows wheel is built on Linux by tools/cross_wheel.py (docs/platforms.md)."""

    def initialize_options(self) -> None:
        super().initialize_options()
        if WINDOWS:
            self.compiler = "mingw32"

    def run(self) -> None:
        super().run()
        self.build_runner()
        self.build_library()

    def build_runner(self) -> None:
        exe = "copapy-runner.exe" if WINDOWS else "copapy-runner"
        out = Path(self.get_ext_fullpath("copapy._runner")).parent / "_bin" / exe
        host = WIN32_HOST if WINDOWS else sorted(glob("runner/host/*.c"))
        sources = host + sorted(glob("runner/src/*.c")) + TABLE
        tmp = Path(self.build_temp) / "copapy-runner"
        objects = self.compiler.compile(
            sources, output_dir=str(tmp), include_dirs=["runner/include", "runner/src"],
            extra_preargs=["-std=c11", "-O2", "-g0", "-Wall", "-Wextra", "-Werror", *PTHREAD,
                           *TABLE_FLAGS])
        out.parent.mkdir(parents=True, exist_ok=True)
        self.compiler.link_executable(objects, "copapy-runner", output_dir=str(tmp),
                                      extra_preargs=PTHREAD,
                                      libraries=WIN32_LIBS if WINDOWS else None)
        shutil.copy2(tmp / exe, out)
        os.chmod(out, 0o755)

    def build_library(self) -> None:
        lib_dir = Path(self.get_ext_fullpath("copapy._runner")).parent / "_lib"
        sources = ["runner/lib/abi.c", "runner/lib/loop.c", *sorted(glob("runner/lib/loop_rt_*.c")),
                   *sorted(glob("runner/src/*.c")), *TABLE]
        objects = self.compiler.compile(
            sources, output_dir=str(Path(self.build_temp) / "libcopapy"),
            include_dirs=["runner/include", "runner/src"],
            extra_preargs=["-std=c11", "-O2", *([] if WINDOWS else ["-fPIC"]),
                           "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", *PTHREAD,
                           *TABLE_FLAGS])
        name = {"darwin": ["-Wl,-install_name,@rpath/libcopapy.dylib"],
                "win32": []}.get(sys.platform, ["-Wl,-soname,libcopapy.so"])
        self.compiler.link_shared_object(objects, str(lib_dir / LIBRARY),
                                         extra_preargs=[*PTHREAD, *name],
                                         libraries=WIN32_LIBS if WINDOWS else None)
        include = lib_dir / "include" / "copapy"
        include.mkdir(parents=True, exist_ok=True)
        for header in ("copapy.h", "runner.h", "contract.h"):
            shutil.copy2(Path("runner/include/copapy") / header, include / header)


class BuildWithFirmware(build_py):
    """The Python package, plus the firmware sources under copapy/_firmware."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # a checkout: `copapy firmware export` reads the sources there
            return
        dest = Path(self.build_lib) / "copapy" / "_firmware"
        shutil.rmtree(dest, ignore_errors=True)
        for item in FIRMWARE:
            src = HERE / item
            if src.is_dir():
                shutil.copytree(src, dest / item, ignore=FIRMWARE_SKIP)
            elif src.is_file():
                (dest / item).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / item)


setup(license="MIT",  # pyproject.toml marks it dynamic (why: there)
      ext_modules=[runner, kernels, dispatch, lowering, linking, walk, sweep, interning],
      cmdclass={"build_ext": BuildWithRunner, "build_py": BuildWithFirmware})
