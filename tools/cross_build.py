"""Cross-build the runner for Windows and macOS from Linux with zig cc (ziglang, the build
extra): the host runner, libcopapy with its C example, setup.py's CPython modules
(tools/cross_ext.py; build-only), for Windows the runner core's C unit tests (run under wine:
tests/test_windows.py). Every unit is compiled with -std=c11 -Wall -Wextra -Werror (macOS also
-Wunguarded-availability: nothing newer than the platform's minimum macOS) and any compiler
output is an error; docs/platforms.md lists what is tested how. Wheels: tools/cross_wheel.py.

    python tools/cross_build.py windows-x86_64 [--out DIR] [--only tests|runner|lib|ext]
    python tools/cross_build.py macos-x86_64 | macos-aarch64 [--only runner|lib|ext]

Artefacts go to runner/build/<platform>/ (the default) and their sizes are printed. A missing
ziglang is an error naming the install command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cross_ext

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runner"
WARN = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
INCLUDE = ["-I", str(RUNNER / "include"), "-I", str(RUNNER / "src")]
#: the runner core's C unit tests that run on Windows (fuzzers and the ASan builds stay Linux's)
C_TESTS = ("test_runner", "test_sched", "test_proto", "test_server", "test_abi", "test_guard")


@dataclass(frozen=True)
class Platform:
    name: str
    triple: str
    exe: str        # executable suffix
    shared: str     # shared-library file name of libcopapy
    system_libs: tuple[str, ...]
    wheel_tag: str  # the platform tag of its wheels (tools/cross_wheel.py)

    @property
    def windows(self) -> bool:
        return "windows" in self.triple


PLATFORMS = {
    p.name: p for p in (
        Platform("windows-x86_64", "x86_64-windows-gnu", ".exe", "copapy.dll",
                 ("-lws2_32", "-lwinmm", "-lbcrypt", "-ladvapi32"), "win_amd64"),
        # the oldest macOS each binary runs on (LC_BUILD_VERSION's minos, the wheel's tag);
        # -Wunguarded-availability makes a call newer than it an error
        Platform("macos-x86_64", "x86_64-macos.10.12", "", "libcopapy.dylib", (),
                 "macosx_10_12_x86_64"),
        Platform("macos-aarch64", "aarch64-macos.11.0", "", "libcopapy.dylib", (),
                 "macosx_11_0_arm64"),
    )
}


class CrossBuildError(RuntimeError):
    """No zig, or a unit does not compile (warnings are errors); the message has the output."""


def zig() -> list[str]:
    try:
        import ziglang  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as exc:
        raise CrossBuildError("cross builds need ziglang: pip install -e '.[build]'") from exc
    return [sys.executable, "-m", "ziglang"]


def zig_cc(triple: str) -> list[str]:
    return [*zig(), "cc", "-target", triple]


def warnings(p: Platform) -> list[str]:
    return [*WARN, *([] if p.windows else ["-Wunguarded-availability"])]


def core_sources() -> list[Path]:
    return sorted((RUNNER / "src").glob("*.c"))


def lib_sources() -> list[Path]:
    lib = RUNNER / "lib"
    return [lib / "abi.c", lib / "loop.c", *sorted(lib.glob("loop_rt_*.c"))]


def table_sources(p: Platform) -> list[str]:
    """-DCP_WITH_TABLE and the stencil tables of the platform's architecture (runner/tables,
    verified loading: the runner then takes format-2 images); none where there are none."""
    arch = p.triple.split("-")[0]
    base = RUNNER / "tables" / f"{arch}.c"
    if not base.exists():
        return []
    return ["-DCP_WITH_TABLE", str(base), *map(str, sorted(base.parent.glob(f"{arch}-*.c")))]


def host_sources(p: Platform) -> list[Path]:
    if p.windows:
        return [*sorted((RUNNER / "host" / "win32").glob("*.c")), RUNNER / "host" / "preload.c",
                RUNNER / "host" / "runner_common.c"]
    return sorted((RUNNER / "host").glob("*.c"))


def _cc(p: Platform, args: list[str], out: Path) -> Path:
    """Links under the final name in a private directory (a DLL records its own name, which
    the programs linked against it look for), then renames it into place with its import
    library: a parallel build never sees a half-written file."""
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".build") as tmpdir:
        tmp = Path(tmpdir) / out.name
        cmd = [*zig_cc(p.triple), *warnings(p), *INCLUDE, *args, "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmpdir)
        if proc.returncode != 0 or proc.stderr.strip():
            raise CrossBuildError(f"{p.name}: building {out.name} failed (or warned):\n"
                                  + " ".join(cmd) + "\n" + proc.stderr[-6000:])
        for made in Path(tmpdir).iterdir():
            if made.suffix == ".lib" and out.suffix == ".dll":  # a DLL's import library
                os.replace(made, out.with_suffix(".lib"))
        os.replace(tmp, out)
    return out


def build_tests(p: Platform, out: Path) -> list[Path]:
    made = []
    for name in C_TESTS:
        extra = lib_sources() if name == "test_abi" else []
        made.append(_cc(p, ["-O1", "-g", "-pthread", str(RUNNER / "tests" / f"{name}.c"),
                            *map(str, extra), *map(str, core_sources()), *p.system_libs],
                        out / f"{name}{p.exe}"))
    return made


def build_runner(p: Platform, out: Path) -> Path:
    return _cc(p, ["-O2", *([] if p.windows else ["-pthread"]),
                   *map(str, host_sources(p)), *map(str, core_sources()), *table_sources(p),
                   *p.system_libs],
               out / f"copapy-runner{p.exe}")


def build_lib(p: Platform, out: Path) -> list[Path]:
    lib = _cc(p, ["-O2", "-shared", "-fvisibility=hidden",
                  *([] if p.windows else ["-fPIC", "-pthread"]),
                  *map(str, lib_sources()), *map(str, core_sources()), *table_sources(p),
                  *p.system_libs],
              out / p.shared)
    example = _cc(p, ["-O2", str(RUNNER / "lib" / "example.c"), str(lib)],
                  out / f"copapy-example{p.exe}")
    return [lib, example]


def build_extensions(p: Platform, out: Path) -> list[Path]:
    """setup.py's CPython modules for the platform, against this Python's headers (a .pyd
    linked to a generated python3XX.lib for Windows; tools/cross_ext.py), under out/copapy/."""
    return cross_ext.build_extensions(zig(), lambda args, target: _cc(p, ["-O2", *args], target),
                                      p.windows, table_sources(p), p.system_libs, out)


def build(name: str, out: Path | None = None, only: str | None = None) -> list[Path]:
    """Every artefact of platform ``name`` (or only the ``only`` group), their paths."""
    if name not in PLATFORMS:
        raise CrossBuildError(f"unknown platform {name!r}: one of {', '.join(PLATFORMS)}")
    p = PLATFORMS[name]
    out = out or RUNNER / "build" / name
    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    if only in (None, "tests") and p.windows:
        made += build_tests(p, out)
    if only in (None, "runner"):
        made.append(build_runner(p, out))
    if only in (None, "lib"):
        made += build_lib(p, out)
    if only in (None, "ext"):
        made += build_extensions(p, out)
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("platform", choices=sorted(PLATFORMS))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", choices=("tests", "runner", "lib", "ext"))
    args = ap.parse_args(argv)
    try:
        made = build(args.platform, args.out, args.only)
    except (CrossBuildError, cross_ext.ExtensionBuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in made:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{path.stat().st_size:>9} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
