"""Measure what verified loading (issue 29) costs: relocations, table size, upload, load time."""

from __future__ import annotations

import argparse
import struct
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

import copapy as cp
from copapy.arch import relocs as R
from copapy.arch.patchkind import PatchError, PatchKind, apply_patch
from copapy.arch.targets import arch_names, by_name
from copapy.arrays import array_input
from copapy.compiler import link as L
from copapy.compiler.program import compile_program
from copapy.compiler.table import StencilTable, load_table

ROLES = ("a", "b", "c", "out", "n", "k", "j")


def programs() -> Iterator[tuple[str, list[Any]]]:
    """The program set of /tmp/lead/imghash.py, named, with array inputs instead of constant
    arrays (constants fold away) and a fused loop large enough to be one."""
    rng = np.random.default_rng(1)
    xs = [cp.value(float(i)) for i in range(8)]
    y = xs[0]
    for k in range(60):
        y = y * xs[k % 8] + xs[(k * 3) % 8] - cp.sin(y) / (xs[(k + 1) % 8] + 2.0)
    yield "scalar chain (60 x mul/add/sin/div)", [y]
    a = array_input(rng.random(200).astype(np.float32), packed=True)
    b = cp.vector([cp.value(float(i)) for i in range(5)])
    yield "packed 200: sum, sqrt", [(a * 2.0 + 1.0).sum(), cp.sqrt(a * a + 1.0)]
    yield "small vectors: sum, dot, cross", [
        (b * b).sum(), b @ b,
        cp.cross(cp.vector([xs[0], xs[1], xs[2]]), cp.vector([xs[3], xs[4], xs[5]]))]
    m = cp.matrix([[xs[i] + xs[j] for j in range(4)] for i in range(4)])
    yield "4x4 matvec", [m @ cp.vector(xs[:4])]
    yield "grad (sqrt, exp)", [cp.grad(cp.sqrt(xs[0] * xs[1] + cp.exp(xs[2])) * xs[3], xs[:4])]
    n = cp.value(3)
    u = array_input(rng.random(2000).astype(np.float32), packed=True)
    yield "fused 2000: a*a+2a-1 (jit's case)", [u * u + u * 2.0 - 1.0]
    yield "where, int ops", [cp.where(xs[0] > xs[1], xs[2], xs[3]), n * 7 // cp.value(2), (n & 5) | 2]
    big = array_input(rng.random(3000).astype(np.float32), packed=True)
    big2 = array_input(rng.random(3000).astype(np.float32), packed=True)
    yield "fused 3000: exp*b+sin, dot", [cp.exp(big) * big2 + cp.sin(big2), (big * big2).sum()]


def nodes_of(outs: list[Any]) -> list[Any]:
    flat: list[Any] = []
    for o in outs:
        flat.extend(o if isinstance(o, (list, tuple)) else [o])
    return [n for o in flat for n in (o.nodes() if callable(getattr(o, "nodes", None)) else [o.node])]


class Capture:
    """Hooks the linker: the chains (stencil, slots) and every reference before resolution."""

    def __init__(self) -> None:
        self.chains: list[list[tuple[str, Any]]] = []
        self.pending: list[list[Any]] = []
        self.runtime: list[Any] = []
        self.helpers: list[str] = []
        self.rodata: list[str] = []
        orig_chain, orig_resolve = L._Linker.chain, L._Linker.resolve
        cap = self

        def chain(self: L._Linker, instrs: Any) -> int:
            cap.chains.append([(i[0], tuple(i[1])) for i in instrs])
            return orig_chain(self, instrs)

        def resolve(self: L._Linker, data_offset: int) -> list[L.RuntimePatch]:
            cap.pending = [list(p) for p in self.pending]
            cap.helpers = list(self.func_offsets)
            cap.rodata = list(self.rodata_offsets)
            cap.runtime = orig_resolve(self, data_offset)
            return cap.runtime

        L._Linker.chain = chain  # type: ignore[method-assign]
        L._Linker.resolve = resolve  # type: ignore[method-assign]

    def reset(self) -> None:
        self.chains = []


def compiled(arch: str, cap: Capture) -> Iterator[tuple[str, bool, Any]]:
    for name, outs in programs():
        nodes = nodes_of(outs)
        for in_place in (False, True):
            cap.reset()
            prog = compile_program(nodes, arch, in_place=in_place)
            yield name, in_place, prog


def kind_names(arch: str) -> dict[PatchKind, str]:
    table = R.TABLES[by_name(arch).reloc_table]
    names: dict[PatchKind, list[str]] = {}
    for spec in table.values():
        for i, part in enumerate(spec.parts):
            n = spec.name.replace("R_", "", 1) + (f".{'hi' if i == 0 else 'lo'}" if len(spec.parts) > 1 else "")
            names.setdefault(part.kind, []).append(n)
    return {k: "/".join(sorted(set(v))[:2]) for k, v in names.items()}


def _generic(kind: PatchKind) -> str:
    if not kind.encoder:
        return "yes"
    return "+J1J2 xor"  # thumb_b25/b21: generic scatter plus "J = NOT(I xor S)"


def sections(image: bytes) -> dict[int, int]:
    count = struct.unpack_from("<I", image, 32)[0]
    hsize = struct.unpack_from("<H", image, 6)[0]
    out = {}
    for k in range(count):
        typ, _, _, _, size = struct.unpack_from("<HHIII", image, hsize + 16 * k)
        out[typ] = size
    return out


def cmd_relocs(archs: list[str]) -> None:
    cap = Capture()
    print("| arch | reference | relocation kind | count | runner patches today | generic op |")
    print("|---|---|---|---:|---:|---|")
    for arch in archs:
        names = kind_names(arch)
        cnt: Counter[tuple[str, str, str]] = Counter()
        left: Counter[tuple[str, str, str]] = Counter()
        for _, _, _ in compiled(arch, cap):
            runtime = {p.site for p in cap.runtime}
            for site, kind, typ, _, _ in cap.pending:
                ref = {"data": "code→data", "code": "code→code (chain)", "func": "code→helper",
                       "rodata": "code→const"}[typ]
                key = (ref, names.get(kind, repr(kind)), _generic(kind))
                cnt[key] += 1
                left[key] += site in runtime
        for key, c in sorted(cnt.items()):
            ref, kn, gen = key
            print(f"| {arch} | {ref} | {kn} | {c} | {left[key]} | {gen} |")


def role_widths(table: StencilTable, name: str) -> list[str]:
    roles: list[str] = []
    for r in table.function(name).relocs:
        if r.target_type == "slot" and r.target not in roles:
            roles.append(r.target)
    return roles


def c_table_bytes(table: StencilTable, names: list[str]) -> dict[str, int]:
    """Bytes of a compact C table: code blob, 10-byte function records, 8-byte relocation
    records (u16 offset, u8 kind, u8 target type/role, i16 addend, u16 target index), one role
    byte per slot role (access width, read/write, array flag), kinds, constant blobs."""
    funcs: set[str] = set(names)
    todo = list(names)
    blobs: set[str] = set()
    while todo:
        for r in table.function(todo.pop()).relocs:
            if r.target_type == "func" and r.target not in funcs:
                funcs.add(r.target)
                todo.append(r.target)
            elif r.target_type == "rodata":
                blobs.add(r.target)
    code = relocs = roles = 0
    wide = 0
    for n in funcs:
        f = table.function(n)
        code += len(f.code)
        relocs += len(f.relocs)
        roles += len(role_widths(table, n))
        wide += sum(1 for r in f.relocs if not -32768 <= r.addend < 32768 or r.offset > 0xFFFF)
    rodata = sum(len(table.rodata[b][0]) + 8 for b in blobs)
    out = {"functions": len(funcs), "code": code, "records": 10 * len(funcs),
           "relocs": 8 * relocs, "roles": roles, "kinds": 20 * len(table.kinds), "rodata": rodata,
           "hash": 32, "wide": wide}
    out["total"] = sum(v for k, v in out.items() if k not in ("functions", "wide"))
    return out


def cmd_table(archs: list[str]) -> None:
    cap = Capture()
    print("| arch | set | functions | code | fn records | reloc records | roles | kinds | "
          "consts | total | zlib |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for arch in archs:
        table = load_table(arch)
        used: set[str] = set()
        for _, _, _ in compiled(arch, cap):
            used.update(n for ch in cap.chains for n, _ in ch)
            used.update(("cp_entry", "cp_ret"))
        f32 = [n for n in table.names() if "f64" not in n]
        for label, names in (("all", table.names()), ("no f64", f32), ("programs' set", sorted(used))):
            s = c_table_bytes(table, names)
            blob = b"".join(table.function(n).code for n in names)
            print(f"| {arch} | {label} | {s['functions']} | {s['code']} | {s['records']} | "
                  f"{s['relocs']} | {s['roles']} | {s['kinds']} | {s['rodata']} | {s['total']} | "
                  f"{len(zlib.compress(blob, 9))}+ |")


def leb(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


def manifest_bytes(chains: list[list[tuple[str, Any]]], table: StencilTable,
                   ids: dict[str, int]) -> int:
    """id + slot offsets (LEB128) per stencil, one count per chain."""
    size = 0
    for ch in chains:
        size += leb(len(ch))
        for name, slots in ch:
            size += leb(ids[name]) + sum(leb(off) for _, off in slots)
    return size


def cmd_upload(archs: list[str]) -> None:
    cap = Capture()
    print("| arch | program | jit in place | ops | image today | code + patches | "
          "manifest | image by ids |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for arch in archs:
        table = load_table(arch)
        ids = {n: i for i, n in enumerate(table.names())}
        for name, in_place, prog in compiled(arch, cap):
            sec = sections(prog.image)
            cut = sec.get(1, 0) + sec.get(3, 0) + sec.get(4, 0)
            ops = sum(len(c) for c in cap.chains)
            man = manifest_bytes(cap.chains, table, ids)
            print(f"| {arch} | {name} | {'yes' if in_place else 'no'} | {ops} | {len(prog.image)} | "
                  f"{cut} | {man} | {len(prog.image) - cut + man + 32} |")


def relink(table: StencilTable, ids: list[str], chains: list[list[tuple[int, tuple[int, ...]]]],
           data_offset: int, data_size: int, width: int = 4) -> bytearray:
    """The verifier of proposal (a) in Python: copy and patch from ids, with every check."""
    code = bytearray()
    pending: list[tuple[int, PatchKind, int]] = []
    funcs: dict[str, int] = {}
    for ch in chains:
        waiting: list[tuple[int, PatchKind]] = []
        seq = [(ids.index("cp_entry"), ()), *ch, (ids.index("cp_ret"), ())]
        for pos, (sid, offs) in enumerate(seq):
            if not 0 <= sid < len(ids):
                raise ValueError(f"block {pos}: stencil id {sid} not in the table")
            f = table.function(ids[sid])
            while len(code) % f.align:
                code += table.nop[:1]
            start = len(code)
            for site, kind in waiting:
                pending.append((site, kind, start))
            waiting = []
            body = f.code if pos == len(seq) - 1 else f.code[: len(f.code) - f.strip]
            code += body
            roles = role_widths(table, f.name)
            if len(offs) != len(roles):
                raise ValueError(f"block {pos}: {f.name} takes {len(roles)} slots, got {len(offs)}")
            for r in f.relocs:
                if r.offset >= len(body):
                    continue
                if r.target_type == "slot":
                    off = offs[roles.index(r.target)]
                    if not 0 <= off and off + width <= data_size:
                        raise ValueError(f"block {pos}: slot {r.target} at {off} outside the data")
                    pending.append((start + r.offset, r.kind, data_offset + off + r.addend))
                elif r.target_type in ("next", "loop"):
                    waiting.append((start + r.offset, r.kind))
                elif r.target_type == "func":
                    funcs.setdefault(r.target, -1)
                    pending.append((start + r.offset, r.kind, -(1 + list(funcs).index(r.target))))
    for fn in funcs:
        funcs[fn] = len(code)
        code += table.function(fn).code
    for site, kind, target in pending:
        if target < 0:
            target = funcs[list(funcs)[-1 - target]]
        try:
            apply_patch(code, site, kind, site, target)
        except (PatchError, KeyError):
            pass  # encoder kinds, or the function's own helpers (not modelled here)
    return code


def cmd_verify(archs: list[str]) -> None:
    cap = Capture()
    print("| arch | program | ops | relocs | Python µs/op |")
    print("|---|---|---:|---:|---:|")
    for arch in archs:
        table = load_table(arch)
        ids = table.names()
        index = {n: i for i, n in enumerate(ids)}
        for name, in_place, _prog in compiled(arch, cap):
            if in_place:
                continue
            chains = [[(index[n], tuple(o for _, o in s)) for n, s in ch] for ch in cap.chains]
            ops = sum(len(c) for c in chains)
            nrel = len(cap.pending)
            t0 = time.perf_counter()
            relink(table, ids, chains, 1 << 20, 1 << 20)
            dt = time.perf_counter() - t0
            print(f"| {arch} | {name} | {ops} | {nrel} | {dt / ops * 1e6:.2f} |")


def cmd_dump(arch: str, index: int, out: str) -> None:
    """Table and manifest of one program as a flat file for tools/load_cost_proto.c."""
    t = load_table(arch)
    names = t.names()
    ids = {n: i for i, n in enumerate(names)}
    kinds = {k: i for i, k in enumerate(t.kinds)}
    cap = Capture()
    name, outs = list(programs())[index]
    compile_program(nodes_of(outs), arch)
    funcs, rel, code, nrel = bytearray(), bytearray(), bytearray(), 0
    for n in names:
        f = t.function(n)
        roles = role_widths(t, n)
        funcs += struct.pack("<IHBBIH", len(code), len(f.code), f.strip, f.align, nrel, len(f.relocs))
        for r in f.relocs:
            typ = {"slot": 0, "next": 1, "loop": 1, "func": 2, "rodata": 3}[r.target_type]
            tgt = ids.get(r.target, 0) if typ == 2 else roles.index(r.target) if typ == 0 else 0
            rel += struct.pack("<HBBiH", r.offset, kinds[r.kind], typ, r.addend, tgt)
            nrel += 1
        code += f.code
    # Thumb's J1/J2 kinds are timed as a plain 24-bit scatter (the extension adds one xor)
    kb = b"".join(k._replace(encoder="", fields=((0, 24, 0),)).pack() if k.encoder else k.pack()
                  for k in t.kinds)
    man = bytearray()
    for ch in cap.chains:
        seq = [("cp_entry", ()), *ch, ("cp_ret", ())]
        man += struct.pack("<I", len(seq))
        for n, slots in seq:
            man += struct.pack("<HB", ids[n], len(slots))
            man += b"".join(struct.pack("<I", o) for _, o in slots)
    hdr = struct.pack("<8I", len(names), nrel, len(t.kinds), len(code), len(man), len(cap.chains),
                      sum(len(c) for c in cap.chains), 1 << 16)
    with open(out, "wb") as fh:
        fh.write(hdr + funcs + rel + kb + code + man)
    print(arch, name, "ops", sum(len(c) for c in cap.chains), "->", out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("what", choices=("relocs", "table", "upload", "verify", "dump"))
    ap.add_argument("archs", nargs="*", help="architectures (default: every targets/*.toml)")
    ap.add_argument("--program", type=int, default=0, help="dump: index into programs()")
    ap.add_argument("--out", default="/tmp/proto.bin", help="dump: output file")
    args = ap.parse_args()
    if args.what == "dump":
        return cmd_dump(args.archs[0], args.program, args.out)
    archs = args.archs or arch_names()
    {"relocs": cmd_relocs, "table": cmd_table, "upload": cmd_upload, "verify": cmd_verify}[args.what](archs)


if __name__ == "__main__":
    sys.exit(main())
