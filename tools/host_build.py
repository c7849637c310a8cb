"""Build C sources into a shared library for this machine (loaded with ctypes by the harnesses
of tools/array_harness/harness.py and tools/measure_ulp.py).

The compiler: the command in the caller's environment variable if it names one and it is set
(split like a shell would), else ziglang's clang (``build_stencils.clang_command()``, the
compiler of the stencil build) for the host triple, else clang-19, clang, gcc or cc from PATH.
No compiler at all is a ``HostBuildError`` naming the install command (ziglang is a dev
dependency), never a silent skip.

A library is cached in the temp directory under a hash of its sources, the headers they depend
on, the compiler and every flag. Objects and the library are written under names private to the
process, the library is renamed into place: parallel test workers may build at the same time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_stencils

INSTALL = "pip install -e '.[dev]' (ziglang, the stencil build's clang) or apt-get install clang-19"
FALLBACK = ("clang-19", "clang", "gcc", "cc")


class HostBuildError(RuntimeError):
    """No C compiler, or the sources do not compile or link; the message says which."""


def host_compiler(env: str | None = None) -> tuple[list[str], str]:
    """(command, description) of the C compiler for the host build."""
    override = os.environ.get(env) if env else None
    if override:
        return shlex.split(override), override
    try:
        clang = build_stencils.clang_command()
    except build_stencils.ZiglangMissing:
        pass
    else:
        triple = [f"--target={os.uname().machine}-linux-gnu"] if sys.platform == "linux" else []
        return [*clang, *triple], "ziglang clang"
    for cc in FALLBACK:
        if shutil.which(cc):
            print(f"note: ziglang is not installed, building for the host with {cc}",
                  file=sys.stderr)
            return [cc], cc
    raise HostBuildError("no C compiler for the host build: " + INSTALL
                         + (f", or set {env}" if env else ""))


def build_shared(name: str, units: Sequence[tuple[Path, Sequence[str]]], *,
                 depends: Iterable[Path] = (), link_flags: Sequence[str] = (),
                 env: str | None = None, verbose: bool = False) -> Path:
    """Compile every (source, flags) unit and link them into ``lib<name>.so``; return its path.

    ``depends``: further files (headers) whose contents the cache key covers; ``env``: the
    environment variable that may name the compiler."""
    cc, desc = host_compiler(env)
    key = hashlib.sha256()
    for path in [*(src for src, _ in units), *depends]:
        key.update(f"{path.parent.name}/{path.name}".encode() + b"\0" + path.read_bytes())
    key.update(json.dumps([cc, [list(f) for _, f in units], list(link_flags)]).encode())
    outdir = Path(tempfile.gettempdir()) / f"cp_{name}_{key.hexdigest()[:16]}"
    lib = outdir / f"lib{name}.so"
    if lib.exists():
        return lib
    outdir.mkdir(parents=True, exist_ok=True)
    objs: list[Path] = []
    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
    try:
        for src, flags in units:
            obj = outdir / f"{src.parent.name}_{src.stem}.{os.getpid()}.o"
            objs.append(obj)
            _run([*cc, *flags, "-c", str(src), "-o", str(obj)], f"{desc}: compiling {src.name}",
                 verbose)
        # the system compiler driver links against the system's C library
        system_cc = shutil.which("gcc") or shutil.which("cc")
        linker = [system_cc] if system_cc else cc
        _run([*linker, "-shared", "-o", str(tmp), *map(str, objs), *link_flags],
             f"linking lib{name}.so", verbose)
        os.replace(tmp, lib)
    finally:
        for path in [*objs, tmp]:
            path.unlink(missing_ok=True)
    return lib


def _run(cmd: list[str], what: str, verbose: bool) -> None:
    if verbose:
        print(shlex.join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise HostBuildError(f"{what} failed:\n{proc.stderr}")
