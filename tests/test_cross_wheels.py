"""The Windows and macOS wheels built on Linux (tools/cross_wheel.py): the Linux wheel's files
with the platform's own in place of Linux's, tagged for the platform, with modules that are
PE32+ DLLs exporting their PyInit_ and importing only python3XX.dll and system DLLs, or
Mach-O bundles of the right CPU and minimum macOS whose undefined symbols come from libSystem
or the interpreter. Build-only: nothing here imports them (docs/platforms.md); the Windows
runner inside is the one tests/test_windows.py runs under wine."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from .test_wheel import _run, _tracked_tree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import cross_build  # noqa: E402
import cross_ext  # noqa: E402

PY = f"{sys.version_info.major}{sys.version_info.minor}"
TAGS = ("win_amd64", "macosx_10_12_x86_64", "macosx_11_0_arm64")
#: what the Windows binaries may import besides python3XX.dll (Windows' own DLLs; the CRT is
#: the Universal CRT through its api-ms-win-crt-* sets, as python.org's CPython uses)
WINDOWS_DLLS = re.compile(r"(KERNEL32|WINMM|WS2_32|ADVAPI32|bcrypt|api-ms-win-crt-[a-z]+-l1-1-0)"
                          r"\.dll", re.IGNORECASE)
MACHO = {"macosx_10_12_x86_64": (0x01000007, "10.12"), "macosx_11_0_arm64": (0x0100000C, "11.0")}


def tool(name: str) -> str:
    """An LLVM 19 tool the checks read binaries with (required: Debian's llvm-19)."""
    path = shutil.which(name)
    assert path, f"{name} is needed to inspect the cross-built binaries: apt-get install llvm-19"
    return path


@pytest.fixture(scope="module")
def linux_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The Linux wheel (pip wheel of the tracked files, as tests/test_wheel.py builds it)."""
    work = tmp_path_factory.mktemp("linux")
    _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
          "-w", str(work / "dist"), str(_tracked_tree(work / "tree"))])
    (whl,) = (work / "dist").glob("*.whl")
    return zipfile.ZipFile(whl)


@pytest.fixture(scope="module")
def cross_wheel(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The wheel of a platform tag, built once per module by tools/cross_wheel.py."""
    made: dict[str, Path] = {}

    def get(tag: str) -> Path:
        if tag not in made:
            out = tmp_path_factory.mktemp(tag)
            proc = _run([sys.executable, str(ROOT / "tools" / "cross_wheel.py"), tag,
                         "--out", str(out)], timeout=1800)
            (made[tag],) = out.glob("*.whl")
            assert f"{made[tag].stat().st_size:>9} " in proc.stdout
        return made[tag]
    return get


def linux_to_platform(name: str, tag: str) -> set[str]:
    """The files of the ``tag`` wheel that stand where the Linux wheel has ``name``."""
    windows = tag.startswith("win")
    module = re.fullmatch(r"(copapy/.+)\.cpython-\d+-x86_64-linux-gnu\.so", name)
    if module:
        return {module.group(1) + cross_ext.extension_suffix(windows)}
    if name == "copapy/_bin/copapy-runner":
        return {name + ".exe"} if windows else {name}
    if name == "copapy/_lib/libcopapy.so":
        return {"copapy/_lib/copapy.dll", "copapy/_lib/copapy.lib"} if windows \
            else {"copapy/_lib/libcopapy.dylib"}
    return {name}


@pytest.mark.parametrize("tag", TAGS)
def test_the_files_are_the_linux_wheels_with_platform_files(
        tag: str, cross_wheel: Callable[[str], Path], linux_wheel: zipfile.ZipFile) -> None:
    """Every file of the Linux wheel, the platform's modules, runner and libcopapy in place
    of Linux's (8 modules, as setup.py builds), the same METADATA."""
    linux = set(linux_wheel.namelist())
    expected = set().union(*(linux_to_platform(n, tag) for n in linux))
    zf = zipfile.ZipFile(cross_wheel(tag))
    names = set(zf.namelist())
    assert names == expected, (f"only in the {tag} wheel: {sorted(names - expected)}; only "
                               f"expected from the Linux wheel: {sorted(expected - names)}")
    assert sum(n.endswith((".pyd", "-darwin.so")) for n in names) == \
        sum(n.endswith("-linux-gnu.so") for n in linux) == 8
    meta = "copapy-0.1.0.dist-info/METADATA"
    assert zf.read(meta) == linux_wheel.read(meta)


@pytest.mark.parametrize("tag", TAGS)
def test_the_tags_and_record(tag: str, cross_wheel: Callable[[str], Path]) -> None:
    """The file name's and WHEEL's tag agree (cp3XX-cp3XX-<platform>); RECORD lists every
    file with its sha256 and size; the runner is executable."""
    whl = cross_wheel(tag)
    assert whl.name == f"copapy-0.1.0-cp{PY}-cp{PY}-{tag}.whl"
    zf = zipfile.ZipFile(whl)
    text = zf.read("copapy-0.1.0.dist-info/WHEEL").decode()
    assert f"Tag: cp{PY}-cp{PY}-{tag}\n" in text and "Root-Is-Purelib: false" in text
    rows = list(csv.reader(io.StringIO(zf.read("copapy-0.1.0.dist-info/RECORD").decode())))
    assert any("," in r[0] for r in rows)  # a name with a comma, quoted
    assert sorted(r[0] for r in rows) == sorted(zf.namelist())
    for name, digest, size in rows:
        if name.endswith("RECORD"):
            assert digest == size == ""
            continue
        data = zf.read(name)
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, int(size)) == (f"sha256={want}", len(data)), name
    runner = "copapy/_bin/copapy-runner" + (".exe" if tag == "win_amd64" else "")
    assert (zf.getinfo(runner).external_attr >> 16) & 0o111


def platform_binaries(whl: Path, where: Path) -> dict[str, Path]:
    """The wheel's modules, runner and library, extracted."""
    zf = zipfile.ZipFile(whl)
    return {name: Path(zf.extract(name, where)) for name in zf.namelist()
            if name.endswith((".pyd", ".so", ".exe", ".dll", ".dylib", "/copapy-runner"))}


def pe_info(path: Path) -> tuple[str, dict[str, list[str]], list[str]]:
    """(llvm-objdump -p's text, {imported DLL: its names}, exported names) of a PE file."""
    text = subprocess.run([tool("llvm-objdump-19"), "-p", str(path)], capture_output=True,
                          text=True, check=True).stdout
    imports = {dll: re.findall(r"^\s+\d+\s+(\w+)$", names, re.MULTILINE) for dll, names in
               re.findall(r"DLL Name: (\S+)\n\s+Hint/Ord\s+Name\n((?:\s+\d+\s+\w+\n)*)", text)}
    exports = re.findall(r"^\s+\d+\s+0x[0-9a-f]+\s+(\w+)$", text.split("Export Table:")[1],
                         re.MULTILINE) if "Export Table:" in text else []
    return text, imports, exports


def python_api() -> set[str]:
    """Every name CPython's headers declare PyAPI_FUNC or PyAPI_DATA: what python3XX.dll
    exports (a Windows build of CPython marks them __declspec(dllexport)); a name a macro
    renames (``#define PyArg_ParseTuple _PyArg_ParseTuple_SizeT``) under its new name."""
    include = Path(sysconfig.get_paths()["include"])
    names = set(cross_ext.data_symbols(include))
    renamed: dict[str, str] = {}
    for header in include.rglob("*.h"):
        text = header.read_text()
        names.update(re.findall(r"PyAPI_FUNC\([^;{]*?\)\s*(\w+)\s*\(", text))
        renamed.update(re.findall(r"^#\s*define\s+(_?Py\w+)\s+(_?Py\w+)\s*$", text, re.MULTILINE))
    return names | {new for old, new in renamed.items() if old in names}


def test_windows_binaries_are_pe32_plus_importing_python_and_system_dlls(
        cross_wheel: Callable[[str], Path], tmp_path: Path) -> None:
    """Each .pyd: a PE32+ x86_64 DLL exporting exactly PyInit_<module>, importing from
    python3XX.dll only names its headers declare PyAPI, and else only Windows' DLLs; the
    runner an x86_64 executable, copapy.dll a DLL exporting the C ABI, neither importing
    Python."""
    files = platform_binaries(cross_wheel("win_amd64"), tmp_path)
    api = python_api()
    assert sum(n.endswith(".pyd") for n in files) == 8, sorted(files)
    for name, path in files.items():
        data = path.read_bytes()
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        machine, characteristics = struct.unpack_from("<H16xH", data, pe + 4)
        assert data[pe:pe + 4] == b"PE\0\0" and machine == 0x8664, name
        text, imports, exports = pe_info(path)
        assert re.search(r"^Magic\s+020b\s+\(PE32\+\)", text, re.MULTILINE), name
        assert bool(characteristics & 0x2000) == (not name.endswith(".exe")), name  # a DLL
        python = imports.pop(f"python{PY}.dll", [])
        foreign = [d for d in imports if not WINDOWS_DLLS.fullmatch(d)]
        assert not foreign, (name, foreign)
        if name.endswith(".pyd"):
            module = name.rsplit("/", 1)[-1].split(".")[0]
            assert exports == [f"PyInit_{module}"], (name, exports)
            assert python and set(python) <= api, (name, sorted(set(python) - api))
        else:
            assert not python, name
    assert "copapy_load" in pe_info(files["copapy/_lib/copapy.dll"])[2]


def macho_info(path: Path) -> tuple[int, str, list[str], list[str]]:
    """(CPU type, minimum macOS, linked dylibs, undefined symbols as llvm-nm -m shows them)."""
    magic, cpu = struct.unpack_from("<II", path.read_bytes())
    assert magic == 0xFEEDFACF, path  # MH_MAGIC_64
    text = subprocess.run([tool("llvm-objdump-19"), "--macho", "--private-headers", str(path)],
                          capture_output=True, text=True, check=True).stdout
    found = re.search(r"LC_BUILD_VERSION\n(?:.*\n){3}\s+minos (\S+)", text) or \
        re.search(r"LC_VERSION_MIN_MACOSX\n.*\n\s+version (\S+)", text)
    assert found, text[:2000]
    dylibs = re.findall(r"cmd LC_LOAD_DYLIB\n.*\n\s+name (\S+)", text)
    undefined = subprocess.run([tool("llvm-nm-19"), "-m", "-u", str(path)], capture_output=True,
                               text=True, check=True).stdout.strip().splitlines()
    return cpu, found.group(1), dylibs, undefined


@pytest.mark.parametrize("tag", sorted(MACHO))
def test_macos_binaries_are_macho_for_the_cpu_and_macos_of_the_tag(
        tag: str, cross_wheel: Callable[[str], Path], tmp_path: Path) -> None:
    """The modules, runner and libcopapy: Mach-O of the tag's CPU, built for the tag's
    minimum macOS, linking libSystem only; undefined symbols are libSystem's, or in a module
    the interpreter's (Py*, looked up when Python loads it)."""
    files = platform_binaries(cross_wheel(tag), tmp_path)
    assert sum(n.endswith("-darwin.so") for n in files) == 8, sorted(files)
    cpu_type, minos = MACHO[tag]
    for name, path in files.items():
        cpu, version, dylibs, undefined = macho_info(path)
        assert (cpu, version) == (cpu_type, minos), (name, hex(cpu), version)
        assert dylibs == ["/usr/lib/libSystem.B.dylib"], (name, dylibs)
        assert undefined, name
        for line in undefined:
            if not line.endswith("(from libSystem)"):
                assert name.endswith(".so") and re.fullmatch(r".* external __?Py\w+", line), \
                    (name, line)


def zig_windows(tmp_path: Path, source: str, *flags: str) -> Path:
    """``source`` compiled for x86_64 Windows (tools/cross_build.py's strict zig cc)."""
    (tmp_path / "t.c").write_text(source)
    obj = tmp_path / "t.o"
    _run([*cross_build.zig_cc("x86_64-windows-gnu"), *cross_build.WARN, *flags, "-c",
          str(tmp_path / "t.c"), "-o", str(obj)])
    return obj


def test_the_windows_pyconfig_matches_the_compilers_abi(tmp_path: Path) -> None:
    """The sizes tools/cross/pyconfig-win_amd64.h states are those of the x86_64 Windows
    target (a wrong SIZEOF_LONG would misplace struct fields), and the headers make
    PyMODINIT_FUNC an export and the API an import."""
    include = cross_ext.python_include(tmp_path, windows=True)
    checks = "".join(f"_Static_assert(sizeof({t}) == {m}, \"{m}\");\n" for t, m in (
        ("short", "SIZEOF_SHORT"), ("int", "SIZEOF_INT"), ("long", "SIZEOF_LONG"),
        ("long long", "SIZEOF_LONG_LONG"), ("void *", "SIZEOF_VOID_P"),
        ("size_t", "SIZEOF_SIZE_T"), ("uintptr_t", "SIZEOF_UINTPTR_T"),
        ("time_t", "SIZEOF_TIME_T"), ("wchar_t", "SIZEOF_WCHAR_T"), ("float", "SIZEOF_FLOAT"),
        ("double", "SIZEOF_DOUBLE"), ("_Bool", "SIZEOF__BOOL"), ("Py_ssize_t", "8")))
    source = ("#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n#include <stdint.h>\n"
              "#include <time.h>\n"
              + checks + "PyMODINIT_FUNC PyInit_t(void) { Py_RETURN_NONE; }\n")
    obj = zig_windows(tmp_path, source, "-I", str(include))
    assert cross_ext.imported_python_symbols([obj], cross_ext.data_symbols(include)) == \
        ["_Py_NoneStruct"]
    lib = cross_ext.import_library(cross_build.zig(), [obj], include, tmp_path / "py.lib")
    assert lib.with_suffix(".def").read_text() == \
        f"LIBRARY python{PY}.dll\nEXPORTS\n    _Py_NoneStruct DATA\n"
    assert f"python{PY}.dll".encode() in lib.read_bytes()


def test_macos_headers_take_the_real_pyconfig_behind_debians_dispatcher(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's python3-dev has a /usr/include/python3.X/pyconfig.h that only includes a
    per-architecture header for Linux targets and stops any other with #error: the macOS
    modules failed to build on a fresh Debian (a Python with a plain pyconfig.h built them).
    The copy of the headers holds the header the dispatcher picks on this machine."""
    include = tmp_path / "include" / "python3.11"
    include.mkdir(parents=True)
    (include / "pyconfig.h").write_text("#error unknown multiarch location for pyconfig.h\n")
    (include / "Python.h").write_text("#include \"pyconfig.h\"\n")
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(include)})
    monkeypatch.setattr(sysconfig, "get_config_var",
                        lambda name: "x86_64-linux-gnu" if name == "MULTIARCH" else None)
    assert cross_ext.python_include(tmp_path / "w1", windows=False) == include  # no real one
    real = tmp_path / "include" / "x86_64-linux-gnu" / "python3.11" / "pyconfig.h"
    real.parent.mkdir(parents=True)
    real.write_text("#define SIZEOF_LONG 8\n")
    copy = cross_ext.python_include(tmp_path / "w2", windows=False)
    assert copy != include and (copy / "pyconfig.h").read_text() == real.read_text()
    assert (copy / "Python.h").read_text() == (include / "Python.h").read_text()
    windows = cross_ext.python_include(tmp_path / "w3", windows=True)
    assert (windows / "pyconfig.h").read_bytes() == cross_ext.WIN_PYCONFIG.read_bytes()


def test_a_python_variable_used_without_dllimport_is_an_error(tmp_path: Path) -> None:
    """A CPython variable declared without __declspec(dllimport) would need the linker's
    run-time pseudo relocations: the import library refuses it, naming it; a function's
    address (the import library's thunk) is fine."""
    include = cross_ext.python_include(tmp_path, windows=True)
    obj = zig_windows(tmp_path, "extern int PyExc_TypeError; int PyLong_FromLong(long);\n"
                      "int *f(void) { return &PyExc_TypeError; }\n"
                      "int (*g(void))(long) { return PyLong_FromLong; }\n")
    with pytest.raises(cross_ext.ExtensionBuildError,
                       match=r"variables are used without __declspec\(dllimport\): "
                             r"\['PyExc_TypeError'\]"):
        cross_ext.imported_python_symbols([obj], cross_ext.data_symbols(include))
    assert cross_ext.imported_python_symbols([obj], set()) == ["PyExc_TypeError",
                                                                "PyLong_FromLong"]


def test_cibuildwheel_reads_the_configuration() -> None:
    """pyproject.toml's [tool.cibuildwheel] is valid for cibuildwheel (it refuses unknown
    options) and builds CPython 3.11+ for Linux, macOS (both CPUs) and Windows x86_64; its test
    command is the wheel smoke test with options the smoke test has; macOS builds for the
    minimum macOS of tools/cross_build.py's macos-x86_64."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    wants = {"linux": {"cp311-manylinux_x86_64", "cp311-manylinux_aarch64"},
             "macos": {"cp311-macosx_x86_64", "cp311-macosx_arm64"},
             "windows": {"cp311-win_amd64"}}
    for platform, identifiers in wants.items():
        assert platform in config, platform
        proc = _run([sys.executable, "-m", "cibuildwheel", "--print-build-identifiers",
                     "--platform", platform], cwd=ROOT)
        assert identifiers <= set(proc.stdout.split()), (platform, proc.stdout)
    python, script, *options = shlex.split(config["test-command"])
    assert (python, script) == ("python", "{project}/tools/wheel_smoke.py")
    usage = _run([sys.executable, str(ROOT / "tools" / "wheel_smoke.py"), "--help"]).stdout
    assert options and all(o in usage for o in options), (options, usage)
    minos = cross_build.PLATFORMS["macos-x86_64"].triple.rsplit(".", 2)
    assert config["macos"]["environment"]["MACOSX_DEPLOYMENT_TARGET"] == ".".join(minos[1:])


def test_the_wheel_smoke_test_reaches_the_runner_over_tcp(tmp_path: Path) -> None:
    """tools/wheel_smoke.py's TCP path (the one Windows takes: no pty there) with this
    checkout's runner: a key file of mode 600, the runner's ``TCP 127.0.0.1:PORT`` line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = _run([sys.executable, str(ROOT / "tools" / "wheel_smoke.py"), "--transport", "tcp",
                 "--allow-compiler"], cwd=tmp_path, env=env, timeout=600)
    out = json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("SMOKE "))
    assert out["transport"] == "tcp" and out["serial"] == 42.0 and out["image_doubled"] == 2.0
    assert (tmp_path / "runner.key").stat().st_mode & 0o777 == 0o600
