"""The CPython extension modules of setup.py, cross-built with zig cc for Windows x86_64 and
macOS (tools/cross_build.py's platforms), against the headers of the Python that runs this
tool: the modules are for that Python's minor version (cp311 from a 3.11), not the limited
API (they use static types, private dict calls and macros outside it: docs/platforms.md).

* **macOS**: a bundle linked with ``-undefined dynamic_lookup``: the interpreter provides the
  Python symbols when it loads the module; the headers are this machine's (LP64 like macOS),
  with Debian's multiarch pyconfig.h dispatcher (python3-dev) replaced by the header it picks.
* **Windows**: ``python3XX.dll``'s headers need Windows' ``pyconfig.h``; ours is
  ``tools/cross/pyconfig-win_amd64.h``, put in place of this machine's in a copy of the
  header directory. The import library is generated: a ``.def`` file listing exactly the
  ``Py*``/``_Py*`` symbols the objects import (``llvm-nm``'s undefined ``__imp_`` names; data
  marked DATA from the headers' ``PyAPI_DATA`` declarations), made into ``python3XX.lib`` by
  ``zig dlltool``. Nothing is fetched: no Windows Python is needed or used.
"""

from __future__ import annotations

import contextlib
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import setuptools  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[1]
WIN_PYCONFIG = ROOT / "tools" / "cross" / "pyconfig-win_amd64.h"
#: a symbol of the CPython API (every exported name of python3XX.dll starts so)
PY_SYMBOL = re.compile(r"_?Py[A-Za-z0-9_]*")
NM = "llvm-nm-19"


class ExtensionBuildError(RuntimeError):
    """A module does not compile or link, or imports what python3XX.dll does not export."""


@dataclass(frozen=True)
class ExtSpec:
    """One ``Extension`` of setup.py: its dotted name, sources, include dirs and flags."""
    name: str
    sources: tuple[str, ...]
    include_dirs: tuple[str, ...]
    flags: tuple[str, ...]


def setup_extensions() -> list[ExtSpec]:
    """setup.py's ``ext_modules`` (read by running setup.py with ``setup()`` captured, so
    the module list and flags have one home)."""
    captured: dict[str, Any] = {}
    real = setuptools.setup
    setuptools.setup = lambda **kw: captured.update(kw)
    try:
        with contextlib.chdir(ROOT):
            runpy.run_path(str(ROOT / "setup.py"))
    finally:
        setuptools.setup = real
    return [ExtSpec(e.name, tuple(e.sources), tuple(e.include_dirs), tuple(e.extra_compile_args))
            for e in captured["ext_modules"]]


def python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def extension_suffix(windows: bool) -> str:
    """``.cp311-win_amd64.pyd`` or ``.cpython-311-darwin.so`` (what the platform's
    interpreter looks for; both architectures of macOS use the same)."""
    v = f"{sys.version_info.major}{sys.version_info.minor}"
    return f".cp{v}-win_amd64.pyd" if windows else f".cpython-{v}-darwin.so"


def python_include(work: Path, windows: bool) -> Path:
    """This Python's header directory; a copy of it in ``work`` where its pyconfig.h does not
    suit the target (Python.h includes "pyconfig.h" from its own directory first): Windows'
    own for Windows, and for macOS the real header behind a multiarch dispatcher."""
    include = Path(sysconfig.get_paths()["include"])
    pyconfig = WIN_PYCONFIG if windows else multiarch_pyconfig(include)
    if pyconfig is None:
        return include
    copy = work / "python-include"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(include, copy)
    shutil.copy2(pyconfig, copy / "pyconfig.h")
    return copy


def multiarch_pyconfig(include: Path) -> Path | None:
    """The pyconfig.h that Debian's python3-dev dispatches to on this machine, or None where
    the header directory has a plain one: Debian's /usr/include/python3.X/pyconfig.h only
    picks a per-architecture header for Linux targets and stops any other with #error."""
    multiarch = sysconfig.get_config_var("MULTIARCH")
    real = include.parent / str(multiarch) / include.name / "pyconfig.h"
    if not multiarch or not real.is_file():
        return None
    return real


def data_symbols(include: Path) -> set[str]:
    """The names the headers declare ``PyAPI_DATA`` (variables, not functions)."""
    found: set[str] = set()
    for header in include.rglob("*.h"):
        found.update(re.findall(r"PyAPI_DATA\([^;]*?\)\s*\(?\s*\*?\s*(\w+)", header.read_text()))
    return found


def imported_python_symbols(objects: Sequence[Path], data: set[str]) -> list[str]:
    """The CPython names the objects use: imported (``__imp_Name``), or a function's address
    in a static initializer (``Name``: the import library's thunk). A variable used without
    dllimport would need the linker's auto-import (run-time pseudo relocations): an error."""
    if shutil.which(NM) is None:
        raise ExtensionBuildError(f"the Windows import library needs {NM}: apt-get install llvm-19")
    out = subprocess.run([NM, "-u", "--just-symbol-name", *map(str, objects)],
                         capture_output=True, text=True, check=True).stdout.split()
    imported = {s.removeprefix("__imp_") for s in out if s.startswith("__imp_")}
    plain = {s for s in out if PY_SYMBOL.fullmatch(s)}
    if plain & data:
        raise ExtensionBuildError("these CPython variables are used without "
                                  f"__declspec(dllimport): {sorted(plain & data)}")
    return sorted(s for s in imported | plain if PY_SYMBOL.fullmatch(s))


def import_library(zig: list[str], objects: Sequence[Path], include: Path, out: Path) -> Path:
    """``python3XX.lib`` for ``objects``: a .def file of exactly the names they import."""
    dll = f"python{sys.version_info.major}{sys.version_info.minor}.dll"
    data = data_symbols(include)
    names = imported_python_symbols(objects, data)
    deffile = out.with_suffix(".def")
    deffile.write_text(f"LIBRARY {dll}\nEXPORTS\n" + "".join(
        f"    {n}{' DATA' if n in data else ''}\n" for n in names))
    proc = subprocess.run([*zig, "dlltool", "-m", "i386:x86-64", "-d", str(deffile),
                           "-l", str(out)], capture_output=True, text=True)
    if proc.returncode or proc.stderr.strip():
        raise ExtensionBuildError(f"zig dlltool failed on {deffile}:\n{proc.stderr}")
    return out


def build_extensions(zig: list[str], compile_and_link: Callable[[list[str], Path], Path],
                     windows: bool, tables: list[str], system_libs: Sequence[str],
                     out: Path) -> list[Path]:
    """Every module of setup.py as ``out/<package path>/<module><suffix>``.

    ``compile_and_link(args, target)``: the platform's strict zig cc (``-c`` for an object);
    ``tables``: the architecture's stencil tables with -DCP_WITH_TABLE (setup.py's host
    tables are replaced)."""
    work = out / ".ext-build"
    work.mkdir(parents=True, exist_ok=True)
    include = python_include(work, windows)
    made = []
    for ext in setup_extensions():
        sources = [s for s in ext.sources if not s.startswith("runner/tables/")]
        flags = [f for f in ext.flags if f != "-DCP_WITH_TABLE"]
        if len(sources) != len(ext.sources):
            sources += [t for t in tables if t.endswith(".c")]
            flags += [t for t in tables if not t.endswith(".c")]
        incs = [a for d in ext.include_dirs for a in ("-I", str(ROOT / d))]
        objdir = work / ext.name
        objdir.mkdir(exist_ok=True)
        objects = [compile_and_link([*flags, *([] if windows else ["-fPIC"]), "-I", str(include),
                                     *incs, "-c", str(ROOT / src)],
                                    objdir / f"{Path(src).parent.name}_{Path(src).stem}.o")
                   for src in sources]
        target = out / (ext.name.replace(".", "/") + extension_suffix(windows))
        target.parent.mkdir(parents=True, exist_ok=True)
        if windows:
            lib = import_library(zig, objects, include, objdir / "python.lib")
            link = ["-shared", *map(str, objects), str(lib), *system_libs]
        else:
            link = ["-shared", "-Wl,-undefined,dynamic_lookup", *map(str, objects)]
        made.append(compile_and_link(link, target))
    shutil.rmtree(work)
    return made
