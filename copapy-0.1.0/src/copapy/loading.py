"""Loading an image in this process, on the native runner or an emulated back end: the one
place that hands the emulators (which carry no stencil table) a format-2 image rebuilt as
format 1 by the Python relink (compiler/code_image.py). Used by LocalTarget, cp.load's
programs, @cp.jit and the sweeps; kept small because @cp.jit's first call imports it."""

from __future__ import annotations

from .compiler.code_image import code_image
from .runtime.errors import ImageLoadError
from .runtime.load import LoadedProgram, is_native, load


def load_program(image: bytes, arch: str, own_code: bool = False,
                 reserve: int = 0) -> LoadedProgram:
    """``runtime.load``; an emulated back end gets a format-2 image as format 1."""
    if not is_native(arch):
        try:
            image = code_image(image)
        except ValueError as exc:
            raise ImageLoadError(str(exc)) from exc
    return load(image, arch, own_code, reserve)
