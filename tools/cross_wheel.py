"""Wheels for Windows x86_64 and macOS (x86_64, arm64), built on Linux with zig cc: the files
of the Linux wheel with the platform's own in place of Linux's (docs/platforms.md).

    python tools/cross_wheel.py win_amd64 | macosx_10_12_x86_64 | macosx_11_0_arm64 [--out DIR]

* the pure part (Python package, package data, firmware sources, the .dist-info metadata)
  is what setup.py's build_py and dist_info make, run in a copy of the files git tracks
  (setuptools writes an egg-info into the tree it runs in);
* the platform part is tools/cross_build.py's: setup.py's extension modules for this Python's
  minor version (``cp311`` from a 3.11), the host runner as ``copapy/_bin/copapy-runner[.exe]``,
  libcopapy as ``copapy/_lib/copapy.dll`` (+ its import library ``copapy.lib``) or
  ``libcopapy.dylib`` with the headers of ``copapy/_lib/include``.

The wheel is ``copapy-<version>-cp3XX-cp3XX-<tag>.whl`` in ``--out`` (default ``dist/``). Its
size is printed. Nothing in it was run here: the Windows runner is the one tested under wine
(tests/test_windows.py), the modules and macOS binaries are build-only
(tests/test_cross_wheels.py checks their format, exports and imports).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cross_build
import cross_ext

ROOT = Path(__file__).resolve().parents[1]
#: the headers of copapy/_lib/include/copapy (as setup.py's BuildWithRunner.build_library)
LIB_HEADERS = ("copapy.h", "runner.h", "contract.h")
TAGS = {p.wheel_tag: p for p in cross_build.PLATFORMS.values()}


def tracked_tree(where: Path) -> Path:
    """The files git tracks (with their working-tree contents), copied to ``where``."""
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                          text=True)
    if proc.returncode:
        raise cross_build.CrossBuildError("a cross-built wheel is made from a git checkout "
                                          f"(git ls-files failed: {proc.stderr.strip()})")
    for name in filter(None, proc.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    return where


def pure_part(tree: Path, stage: Path) -> Path:
    """build_py's package (into ``stage``) and dist_info's metadata; the .dist-info path."""
    for args in (["build_py", "--build-lib", str(stage)], ["dist_info", "--output-dir",
                                                             str(stage)]):
        proc = subprocess.run([sys.executable, "setup.py", "-q", *args], cwd=tree,
                              capture_output=True, text=True)
        if proc.returncode:
            raise cross_build.CrossBuildError(f"setup.py {args[0]} failed:\n{proc.stderr}")
    (info,) = stage.glob("*.dist-info")
    return info


def platform_part(p: cross_build.Platform, build: Path, stage: Path) -> None:
    """The platform's modules, runner, libcopapy and its headers into ``stage/copapy``."""
    made = cross_build.build(p.name, build, only="runner")
    made += cross_build.build(p.name, build, only="lib")
    made += cross_build.build(p.name, build, only="ext")
    package = stage / "copapy"
    for path in made:
        if path.is_relative_to(build / "copapy"):  # an extension module
            shutil.copy2(path, stage / path.relative_to(build))
    runner = build / f"copapy-runner{p.exe}"
    (package / "_bin").mkdir(exist_ok=True)
    shutil.copy2(runner, package / "_bin" / runner.name)
    (package / "_bin" / runner.name).chmod(0o755)
    include = package / "_lib" / "include" / "copapy"
    include.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build / p.shared, package / "_lib" / p.shared)
    if p.windows:
        shutil.copy2((build / p.shared).with_suffix(".lib"), package / "_lib" / "copapy.lib")
    for header in LIB_HEADERS:
        shutil.copy2(ROOT / "runner" / "include" / "copapy" / header, include / header)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def write_wheel(stage: Path, info: Path, tag: str, out: Path) -> Path:
    """``stage`` as a wheel (WHEEL and RECORD written into ``info``), in ``out``."""
    python = cross_ext.python_tag()
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: copapy tools/cross_wheel.py\n"
                                f"Root-Is-Purelib: false\nTag: {python}-{python}-{tag}\n")
    name, version = info.name.removesuffix(".dist-info").split("-")
    files = sorted(f for f in stage.rglob("*") if f.is_file()
                   and "__pycache__" not in f.parts and info not in f.parents)
    files += sorted(f for f in info.rglob("*") if f.is_file())
    record = info / "RECORD"
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{name}-{version}-{python}-{python}-{tag}.whl"
    tmp = wheel.with_suffix(".tmp")
    lines = io.StringIO()
    rows = csv.writer(lines, lineterminator="\n")  # RECORD is CSV: a name may hold a comma
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as whl:
        for f in files:
            arc = f.relative_to(stage).as_posix()
            data = f.read_bytes()
            entry = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
            entry.external_attr = ((0o755 if f.stat().st_mode & 0o111 else 0o644)
                                   | 0o100000) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(entry, data)
            rows.writerow([arc, _record_hash(data), len(data)])
        rows.writerow([record.relative_to(stage).as_posix(), "", ""])
        whl.writestr(zipfile.ZipInfo(record.relative_to(stage).as_posix(),
                                     date_time=(2020, 1, 1, 0, 0, 0)), lines.getvalue())
    tmp.replace(wheel)
    return wheel


def build_wheel(tag: str, out: Path) -> Path:
    if tag not in TAGS:
        raise cross_build.CrossBuildError(f"unknown platform tag {tag!r}: one of "
                                          f"{', '.join(sorted(TAGS))}")
    with tempfile.TemporaryDirectory(prefix="cross-wheel-") as tmpdir:
        work = Path(tmpdir)
        stage = work / "stage"
        info = pure_part(tracked_tree(work / "tree"), stage)
        platform_part(TAGS[tag], work / "build", stage)
        return write_wheel(stage, info, tag, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tag", choices=sorted(TAGS))
    ap.add_argument("--out", type=Path, default=ROOT / "dist")
    args = ap.parse_args(argv)
    try:
        wheel = build_wheel(args.tag, args.out)
    except (cross_build.CrossBuildError, cross_ext.ExtensionBuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with contextlib.suppress(ValueError):
        wheel = wheel.relative_to(Path.cwd())
    print(f"{Path(wheel).stat().st_size:>9} {wheel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
