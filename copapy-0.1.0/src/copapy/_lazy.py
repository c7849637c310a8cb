"""Modules imported on first use, so ``import copapy`` stays fast (NumPy alone takes ~70 ms
and a scalar program never needs it)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """``name`` as a module object that loads when an attribute is first read (the real
    module if it is already imported)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"copapy needs {name}: pip install {name}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


numpy = lazy_import("numpy")
