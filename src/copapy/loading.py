"""Loading an image in this process, on the native runner or an emulated back end: the one
place that hands the emulators (which carry no stencil table) a format-2 image rebuilt as
format 1 by the Python relink (compiler/code_image.py), after the runner's verifier has
checked it against its architecture's table (runtime/native.py verify_foreign), so every
program an emulator runs passed the rules a runner of that architecture applies. Used by
LocalTarget, cp.load's programs, @cp.jit and the sweeps; kept small because @cp.jit's first
call imports it."""

from __future__ import annotations

from . import image as im
from .compiler.code_image import code_image, pinned_table
from .compiler.runner_table import runner_table
from .runtime.errors import ImageLoadError, named_load_error
from .runtime.load import LoadedProgram, is_native, load
from .runtime.native import verify_foreign


def verify_image(image: bytes) -> bytes | None:
    """The code the runner's verifier builds from a format-2 image of any architecture (None
    for format 1, or without the native extension); ImageLoadError naming the broken rule
    (TABLE if this copapy has no table with the image's pin)."""
    try:
        img = im.parse(image)
    except ValueError as exc:
        verify_foreign(image, b"")  # the runner's parser names the rule (LAYOUT, CRC, ...)
        raise named_load_error("LAYOUT", str(exc)) from None
    if img.format_version == im.FORMAT_VERSION_CODE:
        return None
    try:
        table = runner_table(pinned_table(img)).blob
    except ValueError as exc:
        raise named_load_error("TABLE", str(exc).removeprefix("TABLE: ")) from None
    return verify_foreign(image, table)


def emulator_image(image: bytes) -> bytes:
    """What an emulated back end (unicorn, qemu; no stencil table) runs: a format-2 image
    verified (``verify_image``), then rebuilt as format 1 (unchanged if it is format 1);
    ImageLoadError naming the broken rule."""
    verify_image(image)
    try:
        return code_image(image)
    except ValueError as exc:
        raise ImageLoadError(str(exc)) from exc


def load_program(image: bytes, arch: str, own_code: bool = False,
                 reserve: int = 0) -> LoadedProgram:
    """``runtime.load``; an emulated back end gets a format-2 image verified, then as
    format 1 (``emulator_image``)."""
    if not is_native(arch):
        image = emulator_image(image)
    return load(image, arch, own_code, reserve)
