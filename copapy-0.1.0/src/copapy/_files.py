"""Data files shipped inside the package (stencil tables, architecture declarations), by path.

copapy is installed as plain files (a wheel or an editable checkout), so its data files are
read next to this module. ``importlib.resources`` would do the same through pathlib, tempfile
and zipfile support: about 12 ms of imports at ``import copapy`` and 1 ms per look-up, for a
zip import that copapy does not support anyway (the native extensions cannot load from one).
"""

from __future__ import annotations

import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def data_path(*parts: str) -> str:
    """The path of a file or folder inside the package."""
    return os.path.join(PACKAGE_DIR, *parts)


def is_data_file(*parts: str) -> bool:
    return os.path.isfile(data_path(*parts))


def read_data(*parts: str) -> bytes:
    with open(data_path(*parts), "rb") as f:
        return f.read()


def list_data(folder: str, suffix: str) -> list[str]:
    """Names of the files in a package folder that end with ``suffix``, sorted."""
    return sorted(name for name in os.listdir(data_path(folder)) if name.endswith(suffix))


def firmware_root(package: str | None = None) -> str | None:
    """Where the runner and firmware sources are: an installed wheel's copy in
    copapy/_firmware (setup.py's FIRMWARE), else the source checkout the package sits in
    (src/copapy); None: neither (`package`: the copapy package directory, default this one)."""
    package = PACKAGE_DIR if package is None else package
    for root in (os.path.join(package, "_firmware"), os.path.dirname(os.path.dirname(package))):
        if os.path.isdir(os.path.join(root, "runner", "src")):
            return root
    return None
