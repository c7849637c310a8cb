"""The native runner: the C runner core built as the extension module ``copapy._runner``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ImageLoadError

if TYPE_CHECKING:
    from .._runner import Program


def load_native(image: bytes) -> Program:
    """Validate and load an image for this machine; raises ImageLoadError naming the problem."""
    from .. import _runner

    try:
        return _runner.load(image)
    except _runner.ImageError as exc:
        err = ImageLoadError(f"{exc.name}: {exc}")
        err.code = exc.code  # type: ignore[attr-defined]
        err.name = exc.name  # type: ignore[attr-defined]
        raise err from None
