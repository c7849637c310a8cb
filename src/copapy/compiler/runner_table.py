"""The stencil table a runner carries for verified loading (issue 29, docs/image.md "Format
version 2"): one compact binary blob per architecture, the same bytes in Python and C.

tools/gen_runner_tables.py writes it into ``runner/tables/<arch>.c``; its SHA-256 is the
TABLE_PIN of every format-2 image compiled for the architecture. Every number the runner needs
to copy and patch a stencil and to check its slots is in here; the role descriptors (what a
slot role reads or writes, and how wide) are derived from the stencil name's operand forms
by ``role_descriptor``, the one rule.

Layout (little-endian; offsets from the blob start):

    header (80 bytes)  "CPTB", u16 version, u16 arch id, u32 counts: functions, relocations,
                       roles, kinds, rodata blobs, code bytes; u32 offsets of those six tables;
                       u16 id of cp_entry, cp_ret; u8 nop length, 3 zero bytes; 16 bytes nop
    functions (20 B)   u32 code offset, u32 length, u32 first relocation, u16 relocations,
                       u16 first role, u8 roles, u8 strip, u8 align, u8 flags (FN_*)
    relocations (12 B) u32 offset, u8 kind, u8 type (REL_*), u16 target (role index in the
                       function, function id or rodata index), i32 addend
    roles (4 B)        u8 role letter (ROLE_NAMES index), u8 access (ACCESS_*), u8 element
                       bytes, u8 flags (bit 0 written, bits 1-3 the length roles n, k, j whose
                       product is an array's element count)
    kinds (32 B)       the generic patch descriptors of docs/image.md, wide: 6 fields and the
                       XOR_NOT_SIGN flip mask (arch/patchkind.py pack_wide; Thumb-2 branches)
    rodata (12 B)      u32 code offset, u32 length, u32 alignment
    code               every function's bytes, then every constant blob
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import import_module
from typing import Any

from .table import StencilTable, load_table


def _sha256_function() -> Callable[[bytes], Any]:
    """The interpreter's own SHA-256 (``_sha256``; ``_sha2`` from Python 3.12): hashlib's
    loads OpenSSL's library first, ~4 ms of the first jit call. The same digest."""
    for name in ("_sha256", "_sha2", "hashlib"):
        try:
            fn: Callable[[bytes], Any] = import_module(name).sha256
        except (ImportError, AttributeError):
            continue
        return fn
    raise ImportError("this Python has no SHA-256 (hashlib is missing)")


sha256 = _sha256_function()

MAGIC = b"CPTB"
VERSION = 2
HEADER = struct.Struct("<4sHH6I6IHHBB2x16s")
FUNC = struct.Struct("<IIIHHBBBB")
RELOC = struct.Struct("<IBBHi")
ROLE = struct.Struct("<4B")
RODATA = struct.Struct("<III")

#: architectures (and variants) whose compiler output is format 2 (stencil ids): every
#: runner of theirs verifies, and the emulated back ends check each image with the runner's
#: verifier against the table built here before they run it (loading.py verify_image)
VERIFIED_ARCHS = frozenset({"x86_64", "x86_64-v3", "x86_64-v4", "cortex-m7", "aarch64", "rv64",
                            "rv32", "x86", "armv7a", "armv6", "cortex-m4", "cortex-m55",
                            "tricore"})
#: the tables C runners link (runner/tables/*.c must match: tests/test_verified_loading.py):
#: the host architectures of the runner and its wheels (x86_64 and its variants, aarch64,
#: riscv64, i686, armv7l) and the Cortex-M7 firmware; the others' runners are emulated here
#: and their images are verified against the table from Python instead
RUNNER_TABLE_ARCHS = frozenset({"x86_64", "x86_64-v3", "x86_64-v4", "cortex-m7", "aarch64",
                                "rv64", "x86", "armv7a"})

#: slot roles in their canonical order: a block's slot offsets come in this order
ROLE_NAMES = ("a", "b", "c", "out", "n", "k", "j")
REL_SLOT, REL_NEXT, REL_LOOP, REL_FUNC, REL_RODATA = range(5)
_REL = {"slot": REL_SLOT, "next": REL_NEXT, "loop": REL_LOOP, "func": REL_FUNC,
        "rodata": REL_RODATA}
#: function flags: may appear in a manifest; starts a fused loop; ends one (branches back);
#: runs inside a fused loop only (the vector-register signature); Thumb code; starts a
#: counted loop (cp.fori_loop, stencils/fori.c); ends one (its back branch)
FN_BLOCK, FN_LOOP_BEGIN, FN_LOOP_END, FN_LOOP_BODY, FN_THUMB = 1, 2, 4, 8, 16
FN_FORI_BEGIN, FN_FORI_END = 32, 64
#: the counted loop's stencils (stencils/fori.c)
FORI_BEGIN, FORI_END = "floop_i32__begin", "floop_i32__end"
#: what a slot role designates: a scalar; an array of elements (count: the product of the
#: length roles in flags); an array length (i32, frozen); a pointer slot (8 bytes, frozen) to
#: an array of the enclosing fused loop's length; one of the block's own length n; a counted
#: loop's counter (i32, frozen: only its loop's stencils write it)
ACCESS_SCALAR, ACCESS_ARRAY, ACCESS_LENGTH, ACCESS_LOOP_POINTER, ACCESS_POINTER, \
    ACCESS_COUNTER = range(6)
WRITTEN = 1
DIM_N, DIM_K, DIM_J = 2, 4, 8
LENGTH_ROLES = {"n": DIM_N, "k": DIM_K, "j": DIM_J}
POINTER_SIZE = 8
LENGTH_SIZE = 4


@dataclass(frozen=True)
class Role:
    name: str
    access: int
    elem: int
    flags: int

    @property
    def frozen_size(self) -> int:
        """Bytes of the slot that must be frozen (0: an ordinary slot)."""
        return {ACCESS_LENGTH: LENGTH_SIZE, ACCESS_LOOP_POINTER: POINTER_SIZE,
                ACCESS_POINTER: POINTER_SIZE, ACCESS_COUNTER: LENGTH_SIZE}.get(self.access, 0)


def slot_roles(table: StencilTable, name: str) -> tuple[str, ...]:
    """The slot roles of a function, in the canonical order."""
    used = {r.target for r in table.function(name).relocs if r.target_type == "slot"}
    unknown = used - set(ROLE_NAMES)
    if unknown:
        raise ValueError(f"{name}: slot roles {sorted(unknown)} are not among {ROLE_NAMES}")
    return tuple(r for r in ROLE_NAMES if r in used)


_SIZES = {"f32": 4, "f64": 8, "i32": 4, "bool": 4}
_BOOL_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "lnot"}


#: int32 index arrays of the sorting stencils (stencils/include/cp_index.h): argsort's result
#: and scratch row, the permutation b of pgather/pscatter, whatever the element type
_INDEX_ROLES = {"argsort": ("out", "b"), "pgather": ("b",), "pscatter": ("b",)}
#: scalar slots of several int32: pairs (the levels of ngather/nscatter), ngatherat's b (two
#: levels and the block's start, padded to 16 bytes)
_WIDE_ROLES = {"ngather": {"b": 8, "c": 8}, "nscatter": {"b": 8, "c": 8},
               "ngatherat": {"b": 16, "c": 8}}
#: array dimensions other than "n elements" (the length roles whose product is the count)
_DIMS = {"matmul": {"a": DIM_N | DIM_K, "b": DIM_K | DIM_J, "out": DIM_N | DIM_J},
         "matvec": {"a": DIM_N | DIM_K, "b": DIM_K, "out": DIM_N},
         "vecmat": {"a": DIM_K, "b": DIM_K | DIM_J, "out": DIM_J},
         # strided views: the vector has n elements, the array it steps through j
         "sgather": {"a": DIM_J, "out": DIM_N},
         # a fused loop's strided operand: its source has j elements, not the loop's count
         "vrsgather": {"a": DIM_J},
         "sscatter": {"a": DIM_N, "out": DIM_J},
         # N-D strided views: n x k elements gathered from a block of j
         "ngather": {"a": DIM_J, "out": DIM_N | DIM_K},
         # ... from a block at an offset into the j elements the pointer designates
         "ngatherat": {"a": DIM_J, "out": DIM_N | DIM_K},
         "nscatter": {"a": DIM_N | DIM_K, "out": DIM_J},
         # sorting along k rows of n elements; argsort's scratch b is j rows
         "argsort": {"a": DIM_N | DIM_K, "b": DIM_N | DIM_J, "out": DIM_N | DIM_K},
         "pgather": {"a": DIM_N | DIM_K, "b": DIM_N | DIM_K, "out": DIM_N | DIM_K},
         "pscatter": {"a": DIM_N | DIM_K, "b": DIM_N | DIM_K, "out": DIM_N | DIM_K}}
#: operand roles a stencil writes besides out (argsort's scratch row)
_SCRATCH = {"argsort": ("b",)}


def _elem(op: str, role: str) -> int:
    """Bytes of one element of ``role`` of the operation ``op`` (``<family>_<type>``): the
    operand type, except a conversion's result (``tof64_f32``: 8), a comparison's result (a
    bool, 4) and ``where``'s condition ``c`` (a bool, 4)."""
    family, _, dtype = op.rpartition("_")
    base = family[2:] if family.startswith(("vr", "vb")) else family
    if role == "out" and base.startswith("to") and base[2:] in _SIZES:
        return _SIZES[base[2:]]
    if (role == "out" and base in _BOOL_RESULT) or (base == "where" and role == "c"):
        return 4
    if role in _INDEX_ROLES.get(base, ()):
        return 4
    if role in _WIDE_ROLES.get(base, {}):
        return _WIDE_ROLES[base][role]
    return _SIZES[dtype]


def role_descriptor(name: str, role: str, roles: tuple[str, ...]) -> Role:
    """What slot ``role`` of stencil ``name`` designates (the operand forms of its name:
    ``<op>_<type>__<dst>_<a>_<b>_<c>``, docs/design.md). Wider than the access is safe (a
    false refusal, which tests/test_verified_loading.py would show), narrower is not."""
    if role in LENGTH_ROLES:
        return Role(role, ACCESS_LENGTH, LENGTH_SIZE, 0)
    if name in (FORI_BEGIN, FORI_END):
        return Role(role, ACCESS_COUNTER, LENGTH_SIZE, WRITTEN)
    op, _, forms_text = name.partition("__")
    forms = forms_text.split("_")
    family = op.split("_")[0]
    written = WRITTEN if role == "out" or role in _SCRATCH.get(family, ()) else 0
    # the forms follow the destination in the order of the stencil macros' parameters:
    # where(c, a, b) (cp_stencil.h CP_SEL1, cp_array.h CP_VSEL1), the fused dots dot(a op c, b)
    # (cp_array.h CP_VFDOT1), everything else a, b
    order = (("out", "c", "a", "b") if family == "where" else
             ("out", "a", "c", "b") if family.startswith("dot") and family != "dot" else
             ("out", "a", "b", "c"))
    form = dict(zip(order, forms, strict=False)).get(role, "m")
    if form == "p":
        # a fused loop step whose pointer has dimensions of its own (vrsgather) is sized by them
        own = ("n" in roles and not family.startswith("vr")) or family in _DIMS
        # a block's own pointer designates n elements, a gather's source (form p) its j
        length = _DIMS.get(family, {}).get(role, DIM_N) if own else 0
        return Role(role, ACCESS_POINTER if own else ACCESS_LOOP_POINTER, _elem(op, role),
                    written | length)
    if form == "v":
        dims = _DIMS.get(family, {})
        return Role(role, ACCESS_ARRAY, _elem(op, role), written | dims.get(role, DIM_N))
    return Role(role, ACCESS_SCALAR, _elem(op, role), written)


def function_flags(table: StencilTable, name: str) -> int:
    func = table.function(name)
    flags = FN_THUMB if func.thumb else 0
    if "__" in name:
        flags |= FN_BLOCK
    if name.startswith("vloop_") and name.endswith("__begin"):
        flags |= FN_LOOP_BEGIN
    if name == FORI_BEGIN:
        flags |= FN_FORI_BEGIN
    elif name == FORI_END:
        flags |= FN_FORI_END
    elif any(r.target_type == "loop" for r in func.relocs):
        flags |= FN_LOOP_END | FN_LOOP_BODY
    if name.startswith("vr"):
        flags |= FN_LOOP_BODY
    return flags


@dataclass(frozen=True)
class RunnerTable:
    """The blob, its pin and the index a Python loader needs."""

    arch: str
    blob: bytes
    ids: dict[str, int]

    @cached_property
    def pin(self) -> bytes:
        pin: bytes = sha256(self.blob).digest()
        return pin


def build(table: StencilTable) -> RunnerTable:
    names = table.names()
    ids = {n: i for i, n in enumerate(names)}
    rodata_ids = {k: i for i, k in enumerate(sorted(table.rodata))}
    kinds = {k: i for i, k in enumerate(table.kinds)}
    funcs, relocs, roles, code = bytearray(), bytearray(), bytearray(), bytearray()
    n_relocs = n_roles = 0
    for name in names:
        func = table.function(name)
        own = slot_roles(table, name)
        for role in own:
            d = role_descriptor(name, role, own)
            roles += ROLE.pack(ROLE_NAMES.index(role), d.access, d.elem, d.flags)
        funcs += FUNC.pack(len(code), len(func.code), n_relocs, len(func.relocs), n_roles,
                           len(own), func.strip, func.align, function_flags(table, name))
        n_roles += len(own)
        for r in func.relocs:
            target = (own.index(r.target) if r.target_type == "slot" else
                      ids[r.target] if r.target_type == "func" else
                      rodata_ids[r.target] if r.target_type == "rodata" else 0)
            relocs += RELOC.pack(r.offset, kinds[r.kind], _REL[r.target_type], target, r.addend)
            n_relocs += 1
        code += func.code
    rodata = bytearray()
    for key in sorted(table.rodata):
        data, align = table.rodata[key]
        rodata += RODATA.pack(len(code), len(data), align)
        code += data
    kind_bytes = b"".join(k.pack_wide() for k in table.kinds)
    parts = [bytes(p) for p in (funcs, relocs, roles, kind_bytes, rodata, code)]
    offsets, at = [], HEADER.size
    for part in parts:
        at += (-at) % 4
        offsets.append(at)
        at += len(part)
    if len(table.nop) > 16 or len(names) > 0xFFFF or len(table.kinds) > 0xFF:
        raise ValueError(f"{table.arch}: the table does not fit the runner format")
    header = HEADER.pack(MAGIC, VERSION, table.arch_id, len(names), n_relocs, n_roles,
                         len(table.kinds), len(table.rodata), len(code), *offsets,
                         ids["cp_entry"], ids["cp_ret"], len(table.nop), 0, table.nop)
    blob = bytearray(header)
    for off, part in zip(offsets, parts, strict=True):
        blob += bytes(off - len(blob))
        blob += part
    return RunnerTable(table.arch, bytes(blob), ids)


@cache
def runner_table(arch: str) -> RunnerTable:
    return build(load_table(arch))
