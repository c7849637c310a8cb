"""The cppyy friction primitives copapy's kits stand on (README.md beside this file):

* :func:`import_cppyy` — cppyy, or a :class:`CppyyMissingError` naming the extra;
* :func:`load_runner` — libcopapy (the runner's C ABI) loaded into cppyy: ``copapy_load``,
  ``copapy_tick`` ... callable from Python and from C++ defined later;
* :func:`build_shared` / :func:`load_kit` — a compile cache: the content hash of the C++
  sources, headers and flags names a compiled shared library that later processes load
  instead of compiling (cppyy parses only the declarations);
* :func:`warm` — run a call once so cppyy's call-wrapper JIT is not paid inside a timed loop;
* :func:`nogil` — release the GIL for a long C++ call.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ..errors import CompilerNotFoundError, CppyyMissingError, KitCompileError
from ..paths import include_dir, library_path

__all__ = ["Built", "build_shared", "cache_dir", "compiler", "import_cppyy", "load_kit",
           "load_runner", "nogil", "warm"]

#: flags every kit library is compiled with (C++17, the project's warnings as errors)
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-pthread")

F = TypeVar("F", bound=Callable[..., Any])


def import_cppyy() -> ModuleType:
    """The cppyy module (installed with ``pip install 'copapy[kits]'``)."""
    try:
        import cppyy
    except ImportError as exc:
        raise CppyyMissingError(
            "copapy.kits needs cppyy: pip install 'copapy[kits]' (builds CPyCppyy, 2-4 min); "
            f"importing it failed: {exc}") from exc
    module: ModuleType = cppyy
    return module


def cache_dir() -> Path:
    """Where compiled kit libraries are kept: $COPAPY_KIT_CACHE, else
    $XDG_CACHE_HOME/copapy/kits, else ~/.cache/copapy/kits."""
    env = os.environ.get("COPAPY_KIT_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "copapy" / "kits"


def compiler() -> list[str]:
    """The C++ compiler command: $CXX (split like a shell would), else the first of c++, g++,
    clang++ on PATH."""
    env = os.environ.get("CXX")
    if env:
        argv = shlex.split(env)
        if not argv or shutil.which(argv[0]) is None:
            raise CompilerNotFoundError(
                f"CXX={env!r} is not an executable C++ compiler: set CXX to one (g++, clang++) "
                f"or unset it to use c++ from PATH")
        return argv
    for name in ("c++", "g++", "clang++"):
        if shutil.which(name):
            return [name]
    raise CompilerNotFoundError(
        "no C++ compiler found (tried $CXX, c++, g++, clang++): the kits compile their C++ "
        "once per content hash; install one (Debian: apt-get install g++) or copy a filled "
        "cache (copapy.kits.cppyy_tools.cache_dir()) from a machine that has one")


@dataclass(frozen=True)
class Built:
    """A compiled kit library: where it is, its content key, whether the cache had it and how
    long compiling took (0 on a hit)."""

    path: Path
    key: str
    hit: bool
    compile_s: float


def _text(source: str | Path) -> str:
    return Path(source).read_text() if isinstance(source, Path) else source


def _headers(dirs: Iterable[Path]) -> list[tuple[str, str]]:
    found = []
    for d in dirs:
        for f in sorted(Path(d).rglob("*")):
            if f.suffix in (".h", ".hpp", ".hh", ".hxx") and f.is_file():
                found.append((str(f.relative_to(d)), f.read_text()))
    return found


def _key(name: str, sources: Sequence[str], include_dirs: Sequence[Path],
         libraries: Sequence[Path], flags: Sequence[str]) -> str:
    h = hashlib.sha256()
    for part in (name, platform.machine(), *CXXFLAGS, *flags, *map(str, libraries)):
        h.update(part.encode() + b"\0")
    for text in sources:
        h.update(b"source\0" + text.encode() + b"\0")
    for rel, text in _headers(include_dirs):
        h.update(b"header\0" + rel.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def build_shared(name: str, sources: Sequence[str | Path], *,
                 include_dirs: Sequence[Path] = (), libraries: Sequence[Path] = (),
                 flags: Sequence[str] = ()) -> Built:
    """Compile C++ ``sources`` (file paths or source text) into ``lib<name>.so`` in the cache,
    keyed by the SHA-256 of the sources, every header under ``include_dirs``, the flags and
    the libraries linked (by path, with an rpath to each). A later call or process with the
    same content loads it without compiling; a compiler is needed only on a miss. Concurrent
    processes wait for each other (a lock file) instead of compiling twice."""
    texts = [_text(s) for s in sources]
    key = _key(name, texts, include_dirs, libraries, flags)
    root = cache_dir()
    out = root / f"{name}-{key[:24]}" / f"lib{name}.so"
    if out.is_file():
        return Built(out, key, True, 0.0)
    argv0 = compiler()
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.is_file():  # another process compiled it meanwhile
            return Built(out, key, True, 0.0)
        t0 = time.perf_counter()
        srcdir = out.parent / "src"
        srcdir.mkdir(exist_ok=True)
        files = []
        for k, text in enumerate(texts):
            f = srcdir / f"{name}_{k}.cpp"
            f.write_text(text)
            files.append(str(f))
        tmp = out.with_suffix(f".so.tmp{os.getpid()}")
        argv = [*argv0, *CXXFLAGS, *flags, *(f"-I{d}" for d in include_dirs), *files,
                "-o", str(tmp)]
        for lib in libraries:
            argv += [str(lib), f"-Wl,-rpath,{Path(lib).resolve().parent}"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True)
        except OSError as exc:
            raise CompilerNotFoundError(f"running the C++ compiler {argv0[0]!r} failed: {exc}"
                                        ) from exc
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise KitCompileError(f"compiling kit {name!r} failed ({shlex.join(argv)}):\n"
                                  f"{proc.stderr.strip() or proc.stdout.strip()}")
        os.replace(tmp, out)
        return Built(out, key, False, time.perf_counter() - t0)


_loaded: set[str] = set()


def load_runner() -> Any:
    """cppyy with libcopapy loaded and copapy/copapy.h parsed; returns ``cppyy.gbl``
    (``gbl.copapy_load(...)``, ``gbl.copapy_tick(p)``, ...)."""
    cppyy = import_cppyy()
    lib = str(library_path())
    if lib not in _loaded:
        cppyy.add_include_path(str(include_dir()))
        # global symbols even if this process loaded it before with RTLD_LOCAL (ctypes'
        # default, e.g. copapy.kits.abi): cling resolves calls only among global symbols
        ctypes.CDLL(lib, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        cppyy.load_library(lib)
        cppyy.include("copapy/copapy.h")
        _loaded.add(lib)
    return cppyy.gbl


def load_kit(name: str, headers: Sequence[str], sources: Sequence[str | Path], *,
             include_dirs: Sequence[Path] = (), libraries: Sequence[Path] = (),
             flags: Sequence[str] = ()) -> Built:
    """:func:`build_shared`, then load the library into cppyy and parse only ``headers``
    (include names found in ``include_dirs``): the definitions come from the compiled library,
    so cppyy JITs no function bodies. The runner library is loaded first and always linked."""
    cppyy = import_cppyy()
    load_runner()
    dirs = [include_dir(), *include_dirs]
    built = build_shared(name, sources, include_dirs=dirs,
                         libraries=[library_path(), *libraries], flags=flags)
    if str(built.path) not in _loaded:
        for d in dirs:
            cppyy.add_include_path(str(d))
        for lib in libraries:
            cppyy.load_library(str(lib))
        cppyy.load_library(str(built.path))
        for h in headers:
            cppyy.include(h)
        _loaded.add(str(built.path))
    return built


def warm(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` once (cppyy JITs a call wrapper at the first call of each overload: 5-50 ms
    here) and return its result; do it before a timed loop."""
    return fn(*args)


def nogil(fn: F) -> F:
    """Mark a cppyy function or method to release the GIL while it runs (cppyy's
    ``__release_gil__``): for calls that block or run long. The function must not call back
    into Python."""
    fn.__release_gil__ = True  # type: ignore[attr-defined]
    return fn
