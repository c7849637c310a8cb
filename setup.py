"""Builds the C parts: the runner core as ``copapy._runner`` (the same sources every runner
uses) and the deterministic math kernels for the host as ``copapy._kernels``."""
from glob import glob

from setuptools import Extension, setup

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

setup(ext_modules=[runner, kernels])
