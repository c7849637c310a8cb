"""The architectures, read from their one declaration: ``copapy/targets/<name>.toml``.

Each file holds an architecture's identity (name, image id, pointer size, endianness), how its
stencils are built (the top-level keys, read by tools/build_stencils.py and hashed into the
stencil table) and how code for it runs without the hardware (the ``[unicorn]`` and ``[qemu]``
tables, read by the emulator back ends, LocalTarget and the tests; ``[tests]`` for extra test
runs; ``[linux]`` and ``[simd]`` for dev tools). The files are parsed on first use, never at
``import copapy``; an unknown key is an error, so nothing unread can accumulate.
"""

from __future__ import annotations

import functools
import itertools
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from .._files import is_data_file, list_data, read_data
from .._lazy import lazy_import
from .cpu import host_flags, masked

if TYPE_CHECKING:
    import tomllib
else:  # the runtime loader imports this module at `import copapy`; tomllib loads on first use
    tomllib = lazy_import("tomllib")

#: top-level keys: the build description, hashed into the stencil table (a change means a rebuild)
_TOP = {"name", "id", "builder", "triple", "cflags", "compiler", "elf_machine", "reloc_table",
        "pointer_bits", "endianness", "base_align", "code_align", "section_align", "nop",
        "float64", "emulator", "variant_of", "cpu_features", "fuse_vector_bytes",
        "fuse_register_bytes"}
_REQUIRED = {"name", "id", "elf_machine", "reloc_table", "pointer_bits", "endianness",
             "base_align", "code_align", "nop", "float64", "emulator"}
_TABLES = {"unicorn", "qemu", "tests", "linux", "simd", "image_features"}
_UNICORN = {"arch", "mode", "cpu", "sp", "pc", "return_address", "fpu"}
_QEMU = {"system", "machine", "cpu", "harness", "firmware"}
_TESTS = {"extra_emulators", "flushes_subnormals"}
_LINUX = {"triple", "cflags", "qemu_user"}
_SIMD = {"disassembly", "flushes_subnormals"}


class UnknownArchitectureError(ValueError):
    """No architecture of that name or id exists; the message lists the valid ones."""


class TargetFileError(ValueError):
    """A targets/<name>.toml is malformed; the message names the file and the key."""


class RegisterInit(NamedTuple):
    """One register write of an emulated CPU's set-up (e.g. switching the FPU on)."""

    reg: str  # unicorn register name without its prefix, e.g. "FPEXC" for UC_ARM_REG_FPEXC
    value: int
    keep: bool  # OR ``value`` into the register's reset value instead of replacing it


class UnicornSetup(NamedTuple):
    """How unicorn runs the code: names of unicorn constants without their prefixes."""

    arch: str  # unicorn.UC_ARCH_<arch>; registers and CPU models in unicorn.<arch>_const
    mode: str  # unicorn.UC_MODE_<mode>
    cpu: str  # UC_CPU_<cpu>, or "" for unicorn's default model
    sp: str  # stack pointer register
    pc: str  # program counter register (fault reports)
    return_address: str  # link register, "stack" (pushed, x86) or "" (TriCore: CSA call)
    fpu: tuple[RegisterInit, ...]  # written in order after the CPU is created

    @property
    def thumb(self) -> bool:
        return self.mode == "THUMB"


class QemuSetup(NamedTuple):
    """How qemu-system runs the code: the board and the bare-metal harness (runner/baremetal)."""

    system: str  # the qemu binary
    machine: str
    cpu: str  # "" for the board's default CPU
    harness: str  # file name of the harness firmware in runner/baremetal/build
    firmware: str  # file name of the protocol runner firmware there, "" if none is built

    @property
    def args(self) -> tuple[str, ...]:
        return ("-M", self.machine, *(("-cpu", self.cpu) if self.cpu else ()))


class LinuxSetup(NamedTuple):
    """A hosted (linux-musl) build of the math kernels, for the determinism cross run."""

    triple: str
    cflags: tuple[str, ...]
    qemu_user: str  # runs the program when this is not the host's architecture


@dataclass(frozen=True)
class Target:
    """One architecture as its toml declares it."""

    name: str
    id: int  # the image header's architecture id (docs/image.md)
    pointer_bits: int
    endianness: str
    float64: bool
    builder: str  # "clang" (ziglang's) or "gcc" (the pinned `compiler`): tools/build_stencils.py
    reloc_table: str  # key of copapy.arch.relocs.TABLES
    emulator: str  # what runs the code when it is not the host's: "unicorn" or "qemu"
    unicorn: UnicornSetup | None
    qemu: QemuSetup | None
    test_emulators: tuple[str, ...]  # the emulator, then [tests] extra_emulators
    linux: LinuxSetup | None
    simd: str  # disassembly family of its vector unit for the vectorisation check, or ""
    simd_flushes_subnormals: bool
    #: the scalar FPU flushes float32 subnormals to zero ([tests]; the cross-architecture
    #: tests compare under their subnormal rule, docs/tricore.md)
    flushes_subnormals: bool
    #: a variant: the same images (its id is the base's), runner and ABI, another stencil table
    #: (wider vector instructions); "" for a base architecture
    variant_of: str
    #: the CPU flags (/proc/cpuinfo names) a variant's code needs
    cpu_features: tuple[str, ...]
    #: a base architecture's optional CPU features, in the order of their bits in an image's
    #: CPU_FEATURES section ([image_features] bits; docs/image.md); () for none
    feature_bits: tuple[str, ...]
    #: the top-level keys as written: what the stencil build reads and hashes
    build: Mapping[str, Any] = field(compare=False, repr=False)


def _keys(origin: str, table: Mapping[str, Any], allowed: set[str],
          required: set[str] | None = None) -> None:
    """TargetFileError for a key the schema does not know, or a required one left out."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise TargetFileError(f"{origin}: unknown key {unknown[0]!r} (known: "
                              f"{', '.join(sorted(allowed))})")
    missing = sorted((required or set()) - set(table))
    if missing:
        raise TargetFileError(f"{origin}: missing key {missing[0]!r}")


def _unicorn(origin: str, raw: Mapping[str, Any]) -> UnicornSetup:
    _keys(origin, raw, _UNICORN, {"arch", "mode", "sp", "pc"})
    fpu = []
    for write in raw.get("fpu", []):
        _keys(f"{origin}.fpu", write, {"reg", "value", "set_bits"}, {"reg"})
        if ("value" in write) == ("set_bits" in write):
            raise TargetFileError(f"{origin}.fpu: {write['reg']}: give value or set_bits")
        fpu.append(RegisterInit(write["reg"], int(write.get("value", write.get("set_bits", 0))),
                                "set_bits" in write))
    return UnicornSetup(raw["arch"], raw["mode"], raw.get("cpu", ""), raw["sp"], raw["pc"],
                        raw.get("return_address", ""), tuple(fpu))


def _qemu(origin: str, raw: Mapping[str, Any]) -> QemuSetup:
    _keys(origin, raw, _QEMU, {"system", "machine", "harness"})
    return QemuSetup(raw["system"], raw["machine"], raw.get("cpu", ""), raw["harness"],
                     raw.get("firmware", ""))


def _emulator(origin: str, value: str, unicorn: UnicornSetup | None,
              qemu: QemuSetup | None) -> str:
    """The back end named by ``emulator = "<unicorn | qemu binary | native>:<summary>"``
    (native: a variant that runs only on a host CPU with its features)."""
    backend, _, summary = value.partition(":")
    if backend == "native":
        return "native"
    if backend == "unicorn" and unicorn is not None:
        return "unicorn"
    if qemu is not None and backend == qemu.system:
        if summary != qemu.machine:
            raise TargetFileError(f"{origin}: emulator {value!r} names another board than "
                                  f"[qemu] machine {qemu.machine!r}")
        return "qemu"
    raise TargetFileError(f"{origin}: emulator {value!r} has no matching [unicorn] or [qemu] "
                          f"table")


def _fuse_widths(origin: str, top: dict[str, Any]) -> None:
    """A fused loop's block is one vector register or two (stencils/include/cp_fused.h): the
    register width, if given, must be half the block width and one of 16, 32, 64 bytes."""
    reg = top.get("fuse_register_bytes")
    if reg is None:
        return
    block = top.get("fuse_vector_bytes")
    if block is None or reg not in (16, 32, 64) or 2 * reg != block:
        raise TargetFileError(f"{origin}: fuse_register_bytes {reg!r} must be half of "
                              f"fuse_vector_bytes ({block!r}) and 16, 32 or 64: a fused block "
                              "is two registers (docs/decisions/2026-12-05-two-register-"
                              "blocks.md)")


def parse_target(origin: str, raw: Mapping[str, Any]) -> Target:
    """A Target from the parsed toml of ``origin`` (checked: no unknown or missing key)."""
    top = {k: v for k, v in raw.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in raw.items() if isinstance(v, dict)}
    _keys(origin, top, _TOP, _REQUIRED)
    _keys(origin, tables, _TABLES)
    builder = top.get("builder", "clang")
    if builder == "clang" and not {"triple", "cflags"} <= set(top):
        raise TargetFileError(f"{origin}: a clang-built target needs triple and cflags")
    if builder == "gcc" and not {"compiler", "cflags"} <= set(top):
        raise TargetFileError(f"{origin}: a gcc-built target needs compiler and cflags")
    if builder not in ("clang", "gcc"):
        raise TargetFileError(f"{origin}: builder {builder!r} is neither clang nor gcc")
    if top["endianness"] != "little":
        raise TargetFileError(f"{origin}: images and patches are little-endian (docs/image.md)")
    _fuse_widths(origin, top)
    unicorn = _unicorn(f"{origin} [unicorn]", tables["unicorn"]) if "unicorn" in tables else None
    qemu = _qemu(f"{origin} [qemu]", tables["qemu"]) if "qemu" in tables else None
    emulator = _emulator(origin, top["emulator"], unicorn, qemu)
    tests = tables.get("tests", {})
    _keys(f"{origin} [tests]", tests, _TESTS)
    extra = tuple(tests.get("extra_emulators", ()))
    runs = {"unicorn": unicorn, "qemu": qemu}
    for name in extra:
        if runs.get(name) is None:
            raise TargetFileError(f"{origin} [tests]: extra emulator {name!r} has no [{name}] "
                                  f"table")
    linux = None
    if "linux" in tables:
        _keys(f"{origin} [linux]", tables["linux"], _LINUX, _LINUX)
        raw_linux = tables["linux"]
        linux = LinuxSetup(raw_linux["triple"], tuple(raw_linux["cflags"]), raw_linux["qemu_user"])
    variant_of = str(top.get("variant_of", ""))
    if (emulator == "native") != bool(variant_of):
        raise TargetFileError(f"{origin}: emulator 'native' is for variants (variant_of) only")
    simd = tables.get("simd", {})
    _keys(f"{origin} [simd]", simd, _SIMD, {"disassembly"} if simd else set())
    features = tables.get("image_features", {})
    _keys(f"{origin} [image_features]", features, {"bits"}, {"bits"} if features else set())
    bits = tuple(features.get("bits", ()))
    if variant_of and bits:
        raise TargetFileError(f"{origin}: [image_features] belongs to the base architecture")
    if len(set(bits)) != len(bits) or len(bits) > 64:
        raise TargetFileError(f"{origin} [image_features]: bits must be at most 64 distinct "
                              f"names")
    return Target(
        name=top["name"], id=top["id"], pointer_bits=top["pointer_bits"],
        endianness=top["endianness"], float64=top["float64"], builder=builder,
        reloc_table=top["reloc_table"], emulator=emulator, unicorn=unicorn, qemu=qemu,
        test_emulators=tuple(dict.fromkeys((emulator, *extra))), linux=linux,
        simd=simd.get("disassembly", ""),
        simd_flushes_subnormals=bool(simd.get("flushes_subnormals", False)),
        flushes_subnormals=bool(tests.get("flushes_subnormals", False)),
        variant_of=variant_of, cpu_features=tuple(top.get("cpu_features", ())),
        feature_bits=bits, build=MappingProxyType(top))


#: the parsed toml of every declaration, shipped beside the stencil tables (written by
#: tools/gen_target_cache.py): tomllib's import and parse cost ~40 ms of the first jit call
CACHE_FILE = "targets.json"
CACHE_FORMAT = 1


def file_key(raw: bytes) -> list[int]:
    """What identifies a declaration's contents in the cache: its length and crc32."""
    return [len(raw), zlib.crc32(raw)]


@functools.cache
def _cache() -> dict[str, Any]:
    """file name -> {"key": file_key, "toml": parsed}; empty without a (current) cache file."""
    if not is_data_file("_tables", CACHE_FILE):
        return {}
    cache = json.loads(read_data("_tables", CACHE_FILE))
    return cache["files"] if cache.get("format") == CACHE_FORMAT else {}


def parse_file(file_name: str) -> dict[str, Any]:
    """The parsed toml of ``targets/<file_name>``: from the cache when it holds these exact
    bytes, else parsed (an edited declaration is never read from a stale cache)."""
    raw = read_data("targets", file_name)
    cached = _cache().get(file_name)
    if cached is not None and cached["key"] == file_key(raw):
        parsed: dict[str, Any] = cached["toml"]
        return parsed
    return tomllib.loads(raw.decode("utf-8"))


@functools.cache
def _read(file_name: str) -> Target:
    """One architecture's file, parsed once per process."""
    origin = f"targets/{file_name}"
    target = parse_target(origin, parse_file(file_name))
    if target.name != file_name.removesuffix(".toml"):
        raise TargetFileError(f"{origin}: name {target.name!r} differs from the file name")
    return target


@functools.cache
def targets() -> tuple[Target, ...]:
    """Every architecture, in the order of their ids (parsed once per process)."""
    found = [_read(name) for name in list_data("targets", ".toml")]
    found.sort(key=lambda t: (t.id, t.variant_of != "", t.name))
    bases = [t for t in found if not t.variant_of]
    for a, b in itertools.pairwise(bases):
        if a.id == b.id:
            raise TargetFileError(f"targets/{a.name}.toml and {b.name}.toml share id {a.id}")
    by = {t.name: t for t in bases}
    for t in found:
        base = by.get(t.variant_of) if t.variant_of else t
        if base is None or base.id != t.id:
            raise TargetFileError(f"targets/{t.name}.toml: variant_of {t.variant_of!r} is no base "
                                  f"architecture of id {t.id}")
        undeclared = sorted(set(t.cpu_features) - set(base.feature_bits))
        if undeclared:
            raise TargetFileError(f"targets/{t.name}.toml: cpu_features {undeclared} are not in "
                                  f"{base.name}.toml's [image_features] bits")
    return tuple(found)


def arch_names() -> list[str]:
    """The valid architecture names, in id order (for error messages and parametrisation)."""
    return [t.name for t in targets()]


@functools.cache
def _by_name() -> dict[str, Target]:
    return {t.name: t for t in targets()}


def by_name(name: str) -> Target:
    """The architecture called ``name``; UnknownArchitectureError lists the valid names.
    Reads only that architecture's file (a process that uses one architecture parses one)."""
    if (isinstance(name, str) and name.replace("-", "").replace("_", "").isalnum()
            and is_data_file("targets", f"{name}.toml")):
        return _read(f"{name}.toml")
    target = _by_name().get(name)
    if target is None:
        raise UnknownArchitectureError(f"unknown architecture {name!r}; valid: "
                                       f"{', '.join(arch_names())}")
    return target


def by_id(arch_id: int) -> Target:
    """The base architecture with image id ``arch_id``; UnknownArchitectureError lists the
    ids."""
    for target in targets():
        if target.id == arch_id and not target.variant_of:
            return target
    known = ", ".join(f"{t.id} {t.name}" for t in targets())
    raise UnknownArchitectureError(f"unknown architecture id {arch_id}; valid: {known}")


def id_name(arch_id: int) -> str:
    """The name of an image id, or ``unknown(<id>)`` (for reports about foreign images)."""
    try:
        return by_id(arch_id).name
    except UnknownArchitectureError:
        return f"unknown({arch_id})"


@functools.cache
def host_arch() -> str | None:
    """The architecture the native runner executes, None without one (the extension is
    optional, hence imported here and not at module level)."""
    try:
        from .. import _runner
    except ImportError:
        return None
    try:
        target = by_name(_runner.ARCH_NAME)
    except UnknownArchitectureError:
        return None
    return target.name if target.id == _runner.ARCH else None


def usable_flags() -> frozenset[str]:
    """This CPU's flags as copapy may use them: /proc/cpuinfo minus COPAPY_CPU_FEATURES_MASK."""
    return masked(host_flags())


def host_variants() -> list[str]:
    """The variants of the host architecture whose CPU features this machine has (the native
    runner executes them), in id order."""
    base = host_arch()
    flags = usable_flags()
    return [t.name for t in targets()
            if base is not None and t.variant_of == base and set(t.cpu_features) <= flags]


def best_host_arch() -> str | None:
    """The architecture copapy compiles for by default here: the last variant of the host
    architecture the CPU supports, else the host architecture itself."""
    variants = host_variants()
    return variants[-1] if variants else host_arch()
