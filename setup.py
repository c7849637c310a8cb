"""Builds the C parts: the runner core as ``copapy._runner`` (the same sources every runner
uses), the deterministic math kernels for the host as ``copapy._kernels``, and the runner as a
shared library with its C ABI, ``copapy/_lib/libcopapy.so`` + ``copapy/_lib/include/copapy``
(copapy.kits, C/C++ programs)."""
import shutil
from glob import glob
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

STRICT = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]

runner = Extension(
    "copapy._runner",
    sources=sorted(glob("runner/src/*.c")) + ["runner/python/module.c"],
    include_dirs=["runner/include"],
    extra_compile_args=STRICT,
)

# -ffp-contract=off: no FMA contraction, so the host computes exactly what the stencils do
kernels = Extension(
    "copapy._kernels",
    sources=sorted(glob("stencils/math/*.c")) + ["stencils/host/kernels_module.c"],
    include_dirs=["stencils/include"],
    depends=sorted(glob("stencils/include/*.h")),
    extra_compile_args=[*STRICT, "-ffp-contract=off", "-fno-math-errno", "-fno-builtin"],
)



class BuildWithLibrary(build_ext):
    """The extension modules, then libcopapy.so beside them (runner/Makefile's `lib` flags)."""

    def run(self) -> None:
        super().run()
        lib_dir = Path(self.get_ext_fullpath("copapy._runner")).parent / "_lib"
        sources = ["runner/lib/abi.c", "runner/lib/loop.c", *sorted(glob("runner/src/*.c"))]
        objects = self.compiler.compile(
            sources, output_dir=str(Path(self.build_temp) / "libcopapy"),
            include_dirs=["runner/include", "runner/src"],
            extra_preargs=["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra",
                           "-Werror", "-pthread"])
        self.compiler.link_shared_object(objects, str(lib_dir / "libcopapy.so"),
                                         extra_preargs=["-pthread",
                                                        "-Wl,-soname,libcopapy.so"])
        include = lib_dir / "include" / "copapy"
        include.mkdir(parents=True, exist_ok=True)
        for header in ("copapy.h", "runner.h"):
            shutil.copy2(Path("runner/include/copapy") / header, include / header)


setup(ext_modules=[runner, kernels], cmdclass={"build_ext": BuildWithLibrary})
