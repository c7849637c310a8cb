"""The host differential programs on every architecture, bit for bit against native x86_64.

The design promises bit-identical results on every architecture (own math kernels, no FMA
contraction, no fast-math). These tests hold every target to it: each program is compiled
for x86_64 (run natively, the baseline) and for the target (run on its emulator), both get
the same input bytes, and every output must have the same bits (any NaN equals any NaN: NaN
payloads are not part of the contract). No difference is tolerated anywhere.

* ``test_random_graphs``: random expression graphs (tests/support/randgraph.py strategies),
  the three families of tests/test_differential.py; each graph runs twice (initial values,
  then written inputs). float64 only where the target's stencil table has it: on Cortex-M4
  and RV32 every graph that computes with a float64 value must be rejected with a
  CompileError naming float64.
* ``test_operation``: every registered element-wise operation (copapy.graph.ops.REGISTRY) with
  every operand type it accepts: one program of 64 copies of the operation, run over all
  combinations of special values plus seeded random values (write, run, read; 64 operand
  tuples per run); then programs that together use every reachable register form of the
  operation's stencil (``test_every_reachable_stencil_form_is_exercised`` checks that).
* ``test_array_operations``: the array operations of the registry and every element-wise
  operation on packed arrays, including the fused dots (``dot(a + s, b)`` and its kin), every
  ``where`` operand combination and reductions whose result lands in register 1; together
  they use every array stencil (``test_every_array_stencil_is_exercised`` checks that).
* ``test_cortex_m7_qemu_program``: Cortex-M7 also runs on qemu's real M7 model (mps2-an500,
  FPv5-D16) through ``QemuProgram``, besides unicorn (which runs M7 Thumb code on an ARMv8-A
  "max" CPU). The other tests run it through qemu's batch API too (configuration
  ``cortex-m7-qemu``).

Configurations (tests/support/archs.py): nine architectures on unicorn, x86_64 on unicorn as
well (the
Python patcher and an emulated CPU on the baseline's machine code), Cortex-M7 and Cortex-M55
on qemu-system-arm (many programs per boot: ``run_jobs``). A missing emulator makes the tests
fail with the install command; nothing here is ever skipped.

Scale: ``CP_CROSS_ARCH_SCALE`` multiplies the example and input counts (default 1: about
2.5 minutes with ``-n 2`` on two shared cores); ``CP_CROSS_ARCH_SEED`` changes the random
operands (failure messages name the seed).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arch.features import base_of
from copapy.arch.targets import arch_names, by_name, host_arch, targets
from copapy.compiler import CompiledProgram, CompileError, compile_program
from copapy.dtypes import DType
from copapy.graph import build, levels
from copapy.graph.node import Node
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph
from copapy.graph.traverse import live_nodes
from copapy.runtime.errors import CpuFeatureError
from copapy.runtime.load import is_native

from .support.archs import (
    ARCHS,
    CONFIG_IDS,
    CONFIGS,
    NATIVE,
    OTHER_TARGETS,
    QEMU_INSTALL,
    REPO,
    Batch,
    Config,
    execute,
    first_difference,
    has_float64,
    has_live_float64,
    missing_tools,
    same_raw,
    show,
    stencils_used,
)
from .support.cpu import lacks
from .support.randgraph import FLOAT_OPS, INT_OPS, KERNEL_OPS, Graph, graphs

SCALE = float(os.environ.get("CP_CROSS_ARCH_SCALE", "1"))
SEED = int(os.environ.get("CP_CROSS_ARCH_SEED", "0"))
NO_FP64 = [a for a in ARCHS if not has_float64(a)]
#: scalar (elementwise) operations; the array operations are tested in test_array_operations
ELEMENTWISE = sorted(n for n, s in REGISTRY.items()
                     if getattr(s, "shape_rule", "elementwise") == "elementwise")


def scaled(n: int) -> int:
    return max(1, round(n * SCALE))


# ---------------------------------------------------------------- set-up checks


@pytest.mark.parametrize("runner", ["unicorn", "qemu"])
def test_emulator_is_installed(runner: str) -> None:
    problem = missing_tools(runner)
    assert problem is None, problem
    if runner == "qemu":
        from copapy.runtime import qemu_backend as qb

        for arch in sorted({c.arch for c in CONFIGS if c.runner == "qemu"}):
            try:
                assert qb.harness_path(arch).is_file()
            except RuntimeError as exc:
                raise AssertionError(f"{exc}\ninstall: {QEMU_INSTALL}") from exc


def test_every_target_is_covered() -> None:
    assert sorted(ARCHS + OTHER_TARGETS) == sorted(arch_names())
    for name in OTHER_TARGETS:  # assembly subsets, compared with x86_64 in their own tests
        assert (REPO / "tests" / f"test_{name}.py").is_file(), f"{name} has no tests"
    assert {c.arch for c in CONFIGS} == set(ARCHS)
    assert NO_FP64 == [a for a in ARCHS if not by_name(a).float64], "tables differ from tomls"


@pytest.mark.parametrize("arch", ARCHS)
def test_local_target_runs_every_architecture(arch: str) -> None:
    """LocalTarget(arch=...) picks the runner these tests use, and computes the same bits."""
    x = cp.value(0.7)
    y = cp.value(-3)
    out = cp.sqrt(x * x + 1.0) + cp.sin(x) * cp.atan2(x, 2.0) - y // 2
    missing = lacks(by_name(arch)) if base_of(by_name(arch)).name == host_arch() else ()
    if missing:  # a variant this CPU cannot run: refused before anything runs, named
        with pytest.raises(CpuFeatureError, match=f"this CPU lacks {', '.join(missing)}"):
            cp.LocalTarget(arch).compile(out)
        return
    results = []
    for target_arch in ("x86_64", arch):
        tg = cp.LocalTarget(target_arch)
        tg.compile(out)
        tg.write(x, 1.25)
        tg.write(y, 7)
        tg.run()
        results.append(tg.read(out))
        kind = type(tg._program).__name__
    emulated = {"unicorn": "UnicornProgram", "qemu": "QemuProgram",
                "native": "Program"}[by_name(arch).emulator]
    expected = "Program" if is_native(arch) else emulated
    assert kind == expected
    assert struct.pack("<f", results[1]) == struct.pack("<f", results[0]), results


# ---------------------------------------------------------------- running compiled programs


@dataclass
class Prog:
    """One differential program: compiled for native x86_64 and for the target."""

    outputs: list[Node]
    native: CompiledProgram
    target: CompiledProgram
    input_nodes: list[Node]
    input_sets: list[list[bytes | None]]  # per run: raw bytes per input node (None: keep)
    label: str = ""

    def batch(self, compiled: CompiledProgram) -> Batch:
        ports = compiled.ports
        sets = []
        for values in self.input_sets:
            sets.append([(ports[n].offset, raw) for n, raw in zip(self.input_nodes, values,
                                                                  strict=True)
                         if raw is not None and n in ports])
        outs = [(ports[o].offset, o.nbytes) for o in self.outputs]
        return Batch(compiled.image, sets, outs)


#: the baseline of programs that every configuration runs (operation and forms programs):
#: compiled and run natively once per process, keyed by the output nodes (kept alive here)
_native_compiled: dict[tuple[Node, ...], CompiledProgram] = {}
_native_results: dict[tuple[object, ...], list[list[bytes]]] = {}


def compile_pair(outputs: list[Node], arch: str, cache: bool = False
                 ) -> tuple[CompiledProgram, CompiledProgram | None]:
    """Native and target compile; None for the target if it (correctly) rejects float64.
    ``cache``: the program is built once per process and run on every configuration."""
    key = tuple(outputs)
    native = _native_compiled.get(key)
    if native is None:
        native = compile_program(outputs, NATIVE.arch)
        if cache:
            _native_compiled[key] = native
    if not has_float64(arch) and has_live_float64(outputs):
        with pytest.raises(CompileError, match=f"{arch} has no float64"):
            compile_program(outputs, arch)
        return native, None
    return native, compile_program(outputs, arch)


@dataclass
class Mismatch:
    prog: Prog
    run: int
    output: int
    got: bytes
    want: bytes


#: architectures whose FPU flushes float32 subnormals to zero ([tests] flushes_subnormals in
#: targets/<name>.toml): compared under subnormal_rule
FLUSHING = {t.name for t in targets() if t.flushes_subnormals}
FLT_MIN = 2.0**-126


def _is_subnormal(values: Any) -> Any:
    with np.errstate(all="ignore"):
        a = np.abs(np.asarray(values, dtype=np.float64))
    return (a > 0.0) & (a < FLT_MIN)


def _atan2_residual_is_subnormal(y: Any, x: Any) -> Any:
    """atan2's kernel corrects the quotient q = min/max of |y|, |x| by its residual, which is
    about q * 2^-24: for q below 2^-98 that residual is subnormal inside the x86 kernel (and
    moves the last bit there), while a flushing FPU drops it."""
    with np.errstate(all="ignore"):
        ay, ax = np.abs(np.asarray(y, np.float64)), np.abs(np.asarray(x, np.float64))
        q = np.minimum(ay, ax) / np.maximum(ay, ax)
    return (q > 0.0) & (q < 2.0**-98)


#: operations whose float32 kernel computes a subnormal intermediate for normal operands, and
#: when (docs/tricore.md): an output depending on such a node is not compared bit for bit
KERNEL_SUBNORMALS = {"atan2": _atan2_residual_is_subnormal}


def subnormal_rule(prog: Prog, run: int) -> dict[int, str]:
    """The documented rule of a target whose FPU flushes float32 subnormals (docs/tricore.md),
    per output of one run: "skip" if a float32 value the output depends on (an input, constant
    or intermediate node, as the reference computes it) has a subnormal element; "flush" if
    only the output itself has: those elements must be zeros of the same sign, the others
    bit-identical. Outputs not listed are compared bit for bit, as everywhere."""
    env: dict[Any, Any] = {}
    for k in range(run + 1):  # a run sees the last value written to each input
        for n, raw in zip(prog.input_nodes, prog.input_sets[k], strict=True):
            if raw is not None:
                env[n] = decode(raw, n.dtype, n.shape)
    nodes = [n for n in live_nodes(prog.outputs) if n.dtype.name == "float32"]
    values = dict(zip(nodes, evaluate_graph(nodes, env), strict=True))
    sub = {n for n, v in values.items() if _is_subnormal(v).any()}
    inside = {n for n in nodes if n.op in KERNEL_SUBNORMALS
              and KERNEL_SUBNORMALS[n.op](*(values[a] for a in n.args)).any()}
    rule = {}
    for j, out in enumerate(prog.outputs):
        if out.op in ("input", "const"):
            continue  # read back from its slot: no FPU on the way
        deps = depends_on(out)
        if any(n in sub for n in deps if n is not out) or deps & inside:
            rule[j] = "skip"
        elif out in sub:
            rule[j] = "flush"
    return rule


def flushed(raw: bytes) -> bytes:
    """float32 bytes with every subnormal replaced by the zero of its sign."""
    words = np.frombuffer(raw, dtype="<u4").copy()
    words[(words & 0x7F800000) == 0] &= 0x80000000
    return words.tobytes()


def run_and_compare(config: Config, progs: Sequence[Prog]) -> list[Mismatch]:
    """Run all programs natively and on ``config``; every output compared bit for bit (under
    subnormal_rule on a target whose FPU flushes subnormals)."""
    keys = [(p.native.image, *map(tuple, p.input_sets)) for p in progs]
    native = [p.batch(p.native) for p in progs]
    todo = [b for b, key in zip(native, keys, strict=True) if key not in _native_results]
    target = [p.batch(p.target) for p in progs]
    execute(NATIVE, todo)
    execute(config, target)
    bad = []
    for prog, nb, tb, key in zip(progs, native, target, keys, strict=True):
        if key in _native_results:
            nb.results = _native_results[key]
        elif tuple(prog.outputs) in _native_compiled:  # a program every configuration runs
            _native_results[key] = nb.results
        for k, (want_row, got_row) in enumerate(zip(nb.results, tb.results, strict=True)):
            rule = subnormal_rule(prog, k) if config.arch in FLUSHING else {}
            for j, (want, got) in enumerate(zip(want_row, got_row, strict=True)):
                if rule.get(j) == "skip":
                    continue
                if rule.get(j) == "flush":
                    want = flushed(want)
                if not same_raw(got, want, prog.outputs[j].dtype):
                    bad.append(Mismatch(prog, k, j, got, want))
    return bad


def decode(raw: bytes, dtype: DType, shape: tuple[int, ...] = ()) -> Any:
    values = np.frombuffer(raw, dtype="<i4" if dtype.is_bool else dtype.numpy)
    if dtype.is_bool:
        values = values != 0
    return values.reshape(shape) if shape else values[0]


def reference(prog: Prog, run: int, output: int, element: int = 0) -> str:
    """The NumPy/host-kernel oracle for one output (element), to tell which side is wrong."""
    env: dict[Any, Any] = {}
    for k in range(run + 1):  # a run sees the last value written to each input
        for n, raw in zip(prog.input_nodes, prog.input_sets[k], strict=True):
            if raw is not None:
                env[n] = decode(raw, n.dtype, n.shape)
    try:
        value = np.asarray(evaluate_graph([prog.outputs[output]], env)[0]).reshape(-1)[element]
    except Exception as exc:  # the message must not hide the mismatch
        return f"<reference failed: {exc}>"
    dtype = prog.outputs[output].dtype
    return show(dtype.pack(value.item()), dtype)


def describe(outputs: Sequence[Node], inputs: Sequence[Node]) -> str:
    """The graph as straight-line code (a minimal reproducer is written from this)."""
    names: dict[int, str] = {}
    lines = []
    order: list[Node] = []
    seen: set[int] = set()

    def visit(n: Node) -> None:
        if id(n) in seen:
            return
        seen.add(id(n))
        for a in n.args:
            visit(a)
        order.append(n)

    for o in outputs:
        visit(o)
    for n in order:
        if n.op == "const":
            names[id(n)] = f"{n.dtype.unpack(n.attr)!r}:{n.dtype.name}"  # type: ignore[arg-type]
            continue
        name = f"v{len(names)}"
        names[id(n)] = name
        if n.op == "input":
            index = inputs.index(n) if n in inputs else "?"
            lines.append(f"{name} = input[{index}]:{n.dtype.name} "
                         f"(initial {n.dtype.unpack(n.attr[2])!r})")  # type: ignore[index]
        else:
            args = ", ".join(names[id(a)] for a in n.args)
            lines.append(f"{name} = {n.op}({args}):{n.dtype.name}")
    lines.append("outputs: " + ", ".join(names[id(o)] for o in outputs))
    return "\n    ".join(lines)


def depends_on(node: Node) -> set[Node]:
    seen: set[Node] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.args)
    return seen


def report(config: Config, bad: list[Mismatch], limit: int = 6) -> str:
    lines = [f"{config.id}: {len(bad)} output(s) differ from native x86_64"]
    for m in bad[:limit]:
        out = m.prog.outputs[m.output]
        deps = depends_on(out)
        inputs = [(n, raw) for n, raw in zip(m.prog.input_nodes, m.prog.input_sets[m.run],
                                             strict=True) if n in deps]
        args = ", ".join("(initial)" if raw is None else show(raw, n.dtype)
                         if not n.shape else f"<{n.dtype.name} array {list(n.shape)}>"
                         for n, raw in inputs)
        k = first_difference(m.got, m.want, out.dtype)
        size = out.dtype.size
        got, want = m.got[k * size : (k + 1) * size], m.want[k * size : (k + 1) * size]
        where = f" element {k} of {out.size}" if out.shape else ""
        lines.append(f"  {m.prog.label} run {m.run} inputs [{args}] output {m.output}{where}: "
                     f"{config.arch} gave {show(got, out.dtype)}, x86_64 "
                     f"{show(want, out.dtype)}, reference "
                     f"{reference(m.prog, m.run, m.output, k)}"
                     "\n    " + describe([out], [n for n, _raw in inputs]))
    return "\n".join(lines)


# ---------------------------------------------------------------- (a) random graphs

KINDS = {
    # the three families of tests/test_differential.py
    "exact": (FLOAT_OPS + INT_OPS, ("float32", "int32", "bool")),
    "kernels": (FLOAT_OPS + KERNEL_OPS, ("float32", "int32")),
    "float64": (FLOAT_OPS + INT_OPS + KERNEL_OPS, ("float64", "float32", "int32", "bool")),
}
#: hypothesis examples per (configuration, family), and graphs per example: qemu gets large
#: batches (one boot per example), the in-process emulators one graph at a time
EXAMPLES = {"unicorn": scaled(100), "qemu": scaled(30), "native": scaled(30)}
GRAPHS_PER_EXAMPLE = {"unicorn": (1, 3), "qemu": (4, 20), "native": (4, 20)}


def graph_prog(g: Graph, arch: str) -> Prog | None:
    outputs = [o.node for o in g.outputs]
    native, target = compile_pair(outputs, arch)
    if target is None:
        return None
    nodes = [v.node for v, _i, _w in g.inputs]
    written = [v.node.dtype.pack(w) for v, _i, w in g.inputs]  # type: ignore[arg-type]
    return Prog(outputs, native, target, nodes, [[None] * len(nodes), written], "graph")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_random_graphs(config: Config, kind: str) -> None:
    ops, dtypes = KINDS[kind]
    if not has_float64(config.arch) and kind != "float64":
        ops = [o for o in ops if o != "cast_f64"]  # every example compiles and runs
    low, high = GRAPHS_PER_EXAMPLE[config.runner]
    counts = {"compared": 0, "rejected": 0}

    @settings(max_examples=EXAMPLES[config.runner], deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(st.lists(graphs(ops, dtypes=dtypes), min_size=low, max_size=high))
    def check(gs: list[Graph]) -> None:
        progs = []
        for g in gs:
            prog = graph_prog(g, config.arch)
            if prog is None:
                counts["rejected"] += 1
            else:
                progs.append(prog)
        counts["compared"] += len(progs)
        bad = run_and_compare(config, progs)
        assert not bad, report(config, bad)

    check()
    assert counts["compared"] > 0
    if kind == "float64" and not has_float64(config.arch):
        assert counts["rejected"] > 0, "no float64 graph was generated for the rejection check"


# ---------------------------------------------------------------- (b) every operation

DTYPES = {"float32": cp.float32, "float64": cp.float64, "int32": cp.int32, "bool": cp.bool_}


def _f32(bits: int) -> bytes:
    return struct.pack("<I", bits)


def _f64(bits: int) -> bytes:
    return struct.pack("<Q", bits)


#: special operand values: signed zeros, subnormals, limits, rounding ties, int32 conversion
#: limits, arguments near the kernels' overflow thresholds and range reduction, infinities,
#: quiet and signalling NaNs of both signs (raw bit patterns)
SPECIALS: dict[str, list[object]] = {
    "float32": [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0, -3.5, 3.0, 7.0, -7.0,
                100.0, 0.1, 1e-40, -1e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38,
                8388607.5, 16777216.0, 2147483520.0, 2147483648.0, -2147483648.0,
                -2147483904.0, 1e20, 3.1415927, 1.5707964, 88.72284, -103.97, 1e10, -1e10,
                math.inf, -math.inf, _f32(0x7FC00000), _f32(0xFFC00000), _f32(0x7F800001),
                _f32(0x7FC12345)],
    "float64": [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0, -3.5, 3.0, 7.0, -7.0,
                100.0, 0.1, 1e-310, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                -1.7976931348623157e308, 4503599627370495.5, 9007199254740993.0,
                2147483647.5, 2147483648.0, -2147483648.5, -2147483649.0, 1e300,
                math.pi, math.pi / 2, 709.78, -745.1, 1e22, -1e22, math.inf, -math.inf,
                _f64(0x7FF8000000000000), _f64(0xFFF8000000000000), _f64(0x7FF0000000000001),
                _f64(0x7FF8000012345678)],
    "int32": [0, 1, -1, 2, -2, 3, 7, -7, 31, 32, 33, -31, -32, 255, -256, 1000, -1000, 46341,
              65536, 0x55555555, 2**31 - 1, -(2**31), -(2**31) + 1],
    "bool": [False, True],
}
#: operand values of ``where`` (three operands: all combinations would be 64000 runs)
WHERE_SPECIALS = {"float32": [0.0, -0.0, 1.0, -3.5, 1e-40, math.inf, _f32(0x7FC00000)],
                  "float64": [0.0, -0.0, 1.0, -3.5, 1e-310, math.inf, _f64(0x7FF8000000000000)],
                  "int32": [0, 1, -1, 2**31 - 1, -(2**31), 7],
                  "bool": [False, True]}
#: random operand tuples per operation and operand type (besides all special combinations)
RANDOM_INPUTS = scaled(1000)
#: copies of the operation in one program, each with its own inputs: one run computes this
#: many operand tuples (a run per tuple would make the emulators' call overhead dominate)
LANES = 64


def pack(value: object, dtype: DType) -> bytes:
    return value if isinstance(value, bytes) else dtype.pack(value)  # type: ignore[arg-type]


def random_values(dtype: str, rng: np.random.Generator, n: int) -> list[bytes]:
    """Random operand bytes: random bit patterns (every exponent, NaN payloads, subnormals),
    wide and narrow magnitudes, integers and halves (rounding ties), special values."""
    d = DTYPES[dtype]
    if dtype == "bool":
        return [d.pack(bool(b)) for b in rng.integers(0, 2, n)]
    specials = [pack(v, d) for v in SPECIALS[dtype]]
    kind = rng.integers(0, 5, n)
    if dtype == "int32":
        values = np.where(kind <= 1, rng.integers(-(2**31), 2**31, n),
                          np.where(kind == 2, rng.integers(-100, 101, n),
                                   rng.integers(-(2**16), 2**16, n))).astype("<i4")
    else:
        ftype, utype = ("<f8", "<u8") if dtype == "float64" else ("<f4", "<u4")
        bits = rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n,
                                                                            dtype=np.uint64)
        patterns = bits.astype(utype).view(ftype)
        wide = rng.choice([-1.0, 1.0], n) * 2.0 ** rng.uniform(-30, 30, n) * rng.uniform(1, 2, n)
        narrow = rng.uniform(-10, 10, n)
        ties = rng.integers(-(10**6), 10**6, n) + rng.choice([0.0, 0.5, 0.25], n)
        values = np.select([kind == 0, kind == 1, kind == 2], [patterns, wide.astype(ftype),
                                                               narrow.astype(ftype)],
                           ties.astype(ftype)).astype(ftype)
    raw = values.tobytes()
    size = d.size
    pick = rng.integers(0, len(specials), n)
    return [specials[pick[i]] if kind[i] == 4 else raw[i * size : (i + 1) * size]
            for i in range(n)]


def op_cases(name: str) -> list[str]:
    """Operand types the type rules accept for operation ``name``."""
    spec = REGISTRY[name]
    out = []
    for dtype, d in DTYPES.items():
        try:
            build.apply(name, *[build.fresh_input_for_test(d)] * spec.arity)
        except (TypeError, build.ShapeOrTypeError):
            continue
        out.append(dtype)
    return out


def op_operands(name: str, dtype: str) -> list[tuple[bytes, ...]]:
    """All combinations of special values, then seeded random operand tuples."""
    spec = REGISTRY[name]
    d = DTYPES[dtype]
    specials = [pack(v, d) for v in (WHERE_SPECIALS if spec.arity == 3 else SPECIALS)[dtype]]
    tuples = list(itertools.product(specials, repeat=spec.arity))
    rng = np.random.default_rng([zlib.crc32(f"{name}/{dtype}".encode()), SEED])
    n = RANDOM_INPUTS if dtype != "bool" else 0
    columns = [random_values(dtype, rng, n) for _ in range(spec.arity)]
    return tuples + list(zip(*columns, strict=True))


@functools.cache
def op_graph(name: str, dtype: str) -> tuple[list[list[Node]], list[Node]]:
    d = DTYPES[dtype]
    arity = REGISTRY[name].arity
    lanes = [[cp.value(SPECIALS[dtype][1], d).node for _ in range(arity)]
             for _ in range(LANES)]
    return lanes, [build.apply(name, *lane) for lane in lanes]


def op_prog(name: str, dtype: str, config: Config) -> Prog | None:
    """LANES independent copies of the operation; each run feeds LANES operand tuples."""
    lanes, outputs = op_graph(name, dtype)
    native, target = compile_pair(outputs, config.arch, cache=True)
    if target is None:
        return None
    tuples = op_operands(name, dtype)
    sets: list[list[bytes | None]] = []
    for start in range(0, len(tuples), LANES):
        chunk = list(itertools.islice(itertools.cycle(tuples[start:]), LANES))
        sets.append([raw for t in chunk for raw in t])
    return Prog(outputs, native, target, [n for lane in lanes for n in lane], sets,
                f"{name}({dtype}) seed {SEED}")


# ---- stencil forms: every operand/result register combination of every operation
#
# A single-operation program exercises one form of its stencil (operands from memory). The
# table has up to 18 forms per binary operation (operand from register 0, 1 or memory; result
# into register 0 or 1), 54 per ``where``, each a separately compiled function with its own
# relocations. Random programs built around one operation (with a few helper operations to
# keep values in registers, so the allocator spills and reuses) are generated from a fixed
# seed; a program is kept if it uses a form of the operation not seen yet, until every
# reachable form is used. Which forms a program uses is read from the compiler's lowering for
# x86_64; the forms are the same on every architecture.

HELPERS = {"float32": ("sub", "neg"), "float64": ("sub", "neg"), "int32": ("sub", "neg"),
           "bool": ("xor", "lnot")}
FORM_CANDIDATES = 1000  # random programs tried per operation and operand types, at most
FORM_INPUT_SETS = scaled(4)


@dataclass
class Forms:
    """Programs that together use every reachable form of one operation's stencil."""

    family: str  # e.g. "add_f32"
    operands: tuple[str, ...]  # operand types, e.g. ("bool", "float32", "float32")
    reachable: set[str]
    used: set[str]
    programs: list[tuple[list[Node], list[Node]]]  # (inputs, outputs)


def form_signatures(name: str) -> list[tuple[str, ...]]:
    """Operand types for which ``name`` compiles to its own stencil with no conversions."""
    out = []
    arity = REGISTRY[name].arity
    if name == "where":
        return [("bool", d, d) for d in DTYPES]
    for dtype in op_cases(name):
        node = build.apply(name, *(cp.value(SPECIALS[dtype][1], DTYPES[dtype]).node
                                   for _ in range(arity)))
        if node.op == name and all(a.op == "input" for a in node.args):
            out.append((dtype,) * arity)
    return out


def _form_program(name: str, operands: tuple[str, ...], rng: np.random.Generator
                  ) -> tuple[list[Node], list[Node]]:
    inputs: list[Node] = []
    pools: dict[str, list[Node]] = {}
    for dtype in dict.fromkeys(operands):
        fresh = [cp.value(SPECIALS[dtype][1], DTYPES[dtype]).node
                 for _ in range(int(rng.integers(1, 4)))]
        inputs += fresh
        pools[dtype] = list(fresh)
    outputs: list[Node] = []
    recent, p_op = rng.uniform(0.3, 0.95), rng.uniform(0.3, 0.8)

    def pick(t: str) -> Node:
        pool = pools[t]
        if rng.random() < recent:  # likely still in a register
            return pool[-1 - int(rng.integers(0, min(3, len(pool))))]
        return pool[int(rng.integers(0, len(pool)))]

    for _ in range(int(rng.integers(10, 40))):
        r = rng.random()
        if r < p_op:
            node = build.apply(name, *[pick(t) for t in operands])
        else:
            t = list(pools)[int(rng.integers(0, len(pools)))]
            binary, unary = HELPERS[t]
            node = (build.apply(binary, pick(t), pick(t)) if r < p_op + (1 - p_op) * 0.6
                    else build.apply(unary, pick(t)))
        if node.op in ("input", "const"):
            continue
        pools.setdefault(node.dtype.name, []).append(node)
        if rng.random() < 0.15:
            outputs.append(node)
    for pool in pools.values():
        outputs += [n for n in pool[-2:] if n.op != "input"]
    return inputs, outputs


def _unreachable_forms(name: str, operands: tuple[str, ...], family: str) -> set[str]:
    """Two operands in the same register are the same value: f(x, x). That needs equal
    operand types, and the builder simplifies some such nodes (x & x, x - x for int32,
    where(c, x, x), ...), so those forms never occur."""
    arity = len(operands)
    out = set()
    for i, j in itertools.combinations(range(arity), 2):
        di, dj = DTYPES[operands[i]], DTYPES[operands[j]]
        if di.stencil != dj.stencil:
            continue
        possible = di is dj
        if possible:
            args = [build.apply(HELPERS[t][1], cp.value(SPECIALS[t][1], DTYPES[t]).node)
                    for t in operands]
            args[j] = args[i]
            possible = build.apply(name, *args).op == name
        if not possible:
            for form in itertools.product("01m", repeat=arity):
                if form[i] == form[j] != "m":
                    out |= {f"{family}__{dst}_{'_'.join(form)}" for dst in "01"}
    return out


@functools.cache
def forms(name: str, operands: tuple[str, ...]) -> Forms:
    from copapy.compiler.table import load_table

    table = load_table(NATIVE.arch)
    single = build.apply(name, *(cp.value(SPECIALS[t][1], DTYPES[t]).node for t in operands))
    family = stencils_used([single], last=True).split("__")[0]
    scalar_forms = {s for s in table.names()  # "v" forms are the array stencils
                    if s.startswith(family + "__") and "v" not in s.split("__")[1]}
    reachable = scalar_forms - _unreachable_forms(name, operands, family)
    result = Forms(family, operands, reachable, set(), [])
    rng = np.random.default_rng([zlib.crc32(f"forms/{name}/{operands}".encode()), SEED])
    for _ in range(FORM_CANDIDATES):
        inputs, outputs = _form_program(name, operands, rng)
        if not outputs:
            continue
        new = (stencils_used(outputs) & reachable) - result.used
        if new:
            result.used |= new
            result.programs.append((inputs, outputs))
            if result.used == reachable:
                break
    return result


def forms_progs(name: str, config: Config) -> list[Prog]:
    progs = []
    for operands in form_signatures(name):
        f = forms(name, operands)
        rng = np.random.default_rng([zlib.crc32(f"inputs/{name}/{operands}".encode()), SEED])
        for k, (inputs, outputs) in enumerate(f.programs):
            native, target = compile_pair(outputs, config.arch, cache=True)
            if target is None:
                continue
            columns = [random_values(n.dtype.name, rng, FORM_INPUT_SETS)
                       for n in inputs]
            sets: list[list[bytes | None]] = [[None] * len(inputs)]  # initial values first
            sets += [list(row) for row in zip(*columns, strict=True)]
            progs.append(Prog(outputs, native, target, inputs, sets,
                              f"{f.family} forms program {k} seed {SEED}"))
    return progs


@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_operation(config: Config, name: str) -> None:
    """Special and random operands through the single operation, then every stencil form."""
    cases = op_cases(name)
    assert cases, f"{name} accepts no operand type"
    progs = [p for p in (op_prog(name, dtype, config) for dtype in cases) if p is not None]
    progs += forms_progs(name, config)
    bad = run_and_compare(config, progs)
    assert not bad, report(config, bad)


def test_every_reachable_stencil_form_is_exercised() -> None:
    """The forms programs use every stencil form the compiler can emit for an operation
    (checked on the x86_64 table; the other tables have the same names, minus float64 on
    Cortex-M4 and RV32)."""
    from copapy.compiler.table import load_table

    missing = []
    used: set[str] = set()
    for name in ELEMENTWISE:
        signatures = form_signatures(name)
        assert signatures, f"{name}: no operand types without conversions"
        for operands in signatures:
            f = forms(name, operands)
            missing += sorted(f.reachable - f.used)
            used |= f.used
    assert not missing, f"no generated program uses {missing}: raise FORM_CANDIDATES"
    for arch in ARCHS:  # the same forms exist in every table (without float64 if no FP64)
        names = set(load_table(arch).names())
        want = {n for n in used if has_float64(arch) or "f64" not in n}
        assert want <= names, f"{arch} lacks {sorted(want - names)[:10]}"


# ---------------------------------------------------------------- (d) packed arrays
#
# The array operations of the registry (reductions, products, views, stack, concat, fill) and
# every element-wise operation on packed arrays (loop stencils, "v" forms: array operands,
# scalar operands broadcast), on lengths that leave loop tails (1, 7, 67), with the same
# random and special element values. Reductions and dots also run in pairs (the second result
# goes to register 1) and as fused dots (dot(a op s, b): one loop, no temporary array).

ARRAY_N = 67
ARRAY_INPUT_SETS = scaled(4)


def _array_input(shape: tuple[int, ...], dtype: str) -> Node:
    from copapy.arrays import array_input

    if not shape:
        return cp.value(SPECIALS[dtype][1], DTYPES[dtype]).node
    return array_input(np.zeros(shape, DTYPES[dtype].numpy), packed=True,
                       dtype=DTYPES[dtype]).node()


def array_graph(specs: list[tuple[tuple[int, ...], str]], make: Any
                ) -> tuple[list[Node], list[Node]]:
    """(inputs, outputs) of ``make(*inputs)`` over fresh inputs of the given shapes and types."""
    inputs = [_array_input(shape, dtype) for shape, dtype in specs]
    out = make(*inputs)
    return inputs, list(out) if isinstance(out, list | tuple) else [out]


def array_prog(label: str, config: Config, specs: list[tuple[tuple[int, ...], str]],
               make: Any) -> Prog | str | None:
    """A program ``make(*inputs)`` over fresh inputs of the given shapes and types; a string
    if the target cannot compile what x86_64 compiles (the message); None if float64 is
    correctly rejected."""
    inputs, outputs = array_graph(specs, make)
    try:
        native, target = compile_pair(outputs, config.arch)
    except CompileError as exc:
        return f"{label}: {exc}"
    if target is None:
        return None
    rng = np.random.default_rng([zlib.crc32(f"array/{label}".encode()), SEED])
    sets: list[list[bytes | None]] = [[None] * len(inputs)]
    for _ in range(ARRAY_INPUT_SETS):
        sets.append([b"".join(random_values(dtype, rng, math.prod(shape)))
                     for shape, dtype in specs])
    return Prog(outputs, native, target, inputs, sets, label)


def elementwise_array_cases(name: str) -> list[tuple[str, list[tuple[tuple[int, ...], str]],
                                                     Any]]:
    """(label, input specs, builder): array operands, and scalars broadcast over arrays."""
    v = (ARRAY_N,)
    cases = []
    for dtype in op_cases(name):
        if name == "where":
            # every operand combination with at least one array (condition, a, b)
            forms = [(v, v, v), ((), v, v), (v, (), v), (v, v, ()), (v, (), ()), ((), (), v),
                     ((), v, ())]
            for form in forms:
                specs = [(form[0], "bool"), (form[1], dtype), (form[2], dtype)]
                cases.append((f"where({dtype}) {form}", specs,
                              lambda *a: build.apply("where", *a)))
            continue
        arity = REGISTRY[name].arity
        forms = [(v,)] if arity == 1 else [(v, v), (v, ()), ((), v)]
        for form in forms:
            specs = [(shape, dtype) for shape in form]
            cases.append((f"{name}({dtype}) {form}", specs,
                          lambda *a, name=name: build.apply(name, *a)))
    return cases


def both_registers(x: Node, y: Node) -> list[Node]:
    """Outputs that keep ``x`` live while ``y`` is computed: the scalar results of two
    reductions land in registers 0 and 1."""
    return [x, y, build.apply("sub", x, y)]


def fused_operand(op: str, family: str, array: Node, scalar: Node, variant: int) -> Node:
    """The element-wise operand that lowering fuses into a dot as ``family``: ``array op
    scalar`` (dotadd, dotsub, dotmul) or ``scalar - array`` (dotrsub); for the commutative
    operations ``variant`` 1 puts the scalar first."""
    if family == "dotrsub" or (variant == 1 and op != "sub"):
        return build.apply(op, scalar, array)
    return build.apply(op, array, scalar)


def array_op_cases(name: str) -> list[tuple[str, list[tuple[tuple[int, ...], str]], Any]]:
    num = ["float32", "float64", "int32"]
    cases: list[tuple[str, list[tuple[tuple[int, ...], str]], Any]] = []
    if name in ("rsum", "rmin", "rmax"):
        for d in num:
            for n in (1, 7, ARRAY_N):
                cases.append((f"{name}({d}[{n}])", [((n,), d)],
                              lambda a, name=name: build.apply(name, a)))
            cases.append((f"{name}({d}[5x7])", [((5, 7), d)],
                          lambda a, name=name: build.apply(name, a)))
            # the second reduction's result goes to register 1 (the first one's is still live)
            cases.append((f"{name}({d}[{ARRAY_N}]), {name}({d}[7]) in registers 0 and 1",
                          [((ARRAY_N,), d), ((7,), d)],
                          lambda a, b, name=name: both_registers(build.apply(name, a),
                                                                 build.apply(name, b))))
    elif name == "dot":
        for d in num:
            for n in (1, 7, ARRAY_N):
                cases.append((f"dot({d}[{n}])", [((n,), d), ((n,), d)],
                              lambda a, b: build.apply("dot", a, b)))
            cases.append((f"dot({d}[{ARRAY_N}]), dot({d}[7]) in registers 0 and 1",
                          [((ARRAY_N,), d), ((ARRAY_N,), d), ((7,), d), ((7,), d)],
                          lambda a, b, c, e: both_registers(build.apply("dot", a, b),
                                                            build.apply("dot", c, e))))
            # fused dots (compiler/lower.py find_fusions): dot(a op s, b) with the array
            # operand of ``op`` on either side and the fused operand first or second
            for op, family in (("add", "dotadd"), ("sub", "dotsub"), ("sub", "dotrsub"),
                               ("mul", "dotmul")):
                cases.append((f"{family}({d}[{ARRAY_N}]), {family}({d}[7]) in registers 0 "
                              "and 1", [((ARRAY_N,), d), ((ARRAY_N,), d), ((7,), d), ((7,), d),
                                        ((), d)],
                              lambda a, b, c, e, s, op=op, family=family: both_registers(
                                  build.apply("dot", fused_operand(op, family, a, s, 0), b),
                                  build.apply("dot", e, fused_operand(op, family, c, s, 1)))))
    elif name in ("matvec", "vecmat", "matmul"):
        shapes = {"matvec": [((5, 7), (7,)), ((1, 1), (1,)), ((3, 67), (67,))],
                  "vecmat": [((5,), (5, 7)), ((1,), (1, 1)), ((67,), (67, 3))],
                  "matmul": [((5, 7), (7, 3)), ((1, 1), (1, 1)), ((2, 67), (67, 4))]}[name]
        for d in num:
            for sa, sb in shapes:
                cases.append((f"{name}({d}{list(sa)}, {list(sb)})", [(sa, d), (sb, d)],
                              lambda a, b, name=name: build.apply(name, a, b)))
    elif name == "transpose":
        for d in DTYPES:
            for shape in ((5, 7), (1, 67), (67, 1)):
                cases.append((f"transpose({d}{list(shape)})", [(shape, d)],
                              lambda a: build.apply("transpose", a)))
    elif name == "index":
        for d in DTYPES:
            cases.append((f"index({d})", [((ARRAY_N,), d), ((), d)],
                          lambda a, s: [build.index(a, 0), build.index(a, 66),
                                        build.apply("eq", build.index(a, 13), s)]))
    elif name == "slice":
        for d in DTYPES:
            cases.append((f"slice({d})", [((ARRAY_N,), d), ((ARRAY_N,), d)],
                          lambda a, b: [build.slice_(a, 3, 40),
                                        build.apply("eq", build.slice_(a, 0, 30),
                                                    build.slice_(b, 37, 30))]))
    elif name == "reshape":
        for d in DTYPES:
            cases.append((f"reshape({d})", [((6, 7), d)],
                          lambda a: [build.reshape(a, (42,)), build.apply(
                              "transpose", build.reshape(a, (7, 6)))]))
    elif name == "fill":
        for d in DTYPES:
            cases.append((f"fill({d})", [((), d)],
                          lambda s: [build.broadcast_to(s, (ARRAY_N,)),
                                     build.broadcast_to(s, (3, 5))]))
    elif name == "stack":
        for d in DTYPES:
            cases.append((f"stack({d})", [((), d), ((), d), ((), d)],
                          lambda x, y, z: [build.stack([x, y, z], (3,)),
                                           build.stack([x, y, z, z, y, x], (2, 3))]))
    elif name == "concat":
        for d in DTYPES:
            cases.append((f"concat({d})", [((ARRAY_N,), d), ((7,), d)],
                          lambda a, b: [build.concat([a, b], (ARRAY_N + 7,)),
                                        build.concat([b, b], (2, 7))]))
    elif name == "sgather":
        for d in DTYPES:
            cases.append((f"sgather({d})", [((ARRAY_N,), d)],
                          lambda a: [build.strided(a, 0, 2, 34), build.strided(a, 66, -1, 67),
                                     build.strided(a, 60, -7, 9)]))
    elif name == "sscatter":
        for d in DTYPES:
            cases.append((f"sscatter({d})", [((9,), d)],
                          lambda a: [build.scatter(a, 3, 7, ARRAY_N),
                                     build.scatter(a, 64, -8, ARRAY_N)]))
    elif name in ("ngather", "nscatter"):
        # N-D strided views (graph/levels.py): two and three levels, steps of both signs
        for d in DTYPES:
            cases.append((f"{name}({d})", [((5, 4, 6), d)], lambda a, name=name: [
                v if name == "ngather" else levels.scatter(v, *v.attr[:2], v.args[0].size)
                for v in (levels.gather(a, 5, [(5, 24), (3, -2)]),
                          levels.gather(a, 100, [(3, -48), (2, 12), (3, -2)]))]))
    elif name in ("argsort", "pgather", "pscatter"):
        # sorting along rows: the order, the sorted values, the gradient's scatter
        for d in ("float32", "float64", "int32"):
            cases.append((f"{name}({d})", [((3, 23), d)], lambda a, name=name: [
                order if name == "argsort" else build.make(REGISTRY[name], (order, a))
                for order in [build.make(REGISTRY["argsort"], (a,))]]))
    else:
        raise AssertionError(f"array operation {name} has no cross-architecture case: add one")
    return cases


ARRAY_OPS = sorted(n for n in REGISTRY if n not in ELEMENTWISE and n != "where")
ARRAY_GROUPS = ["elementwise", *ARRAY_OPS]


def array_group_cases(group: str) -> list[tuple[str, list[tuple[tuple[int, ...], str]], Any]]:
    if group == "elementwise":
        return [c for name in ELEMENTWISE for c in elementwise_array_cases(name)]
    return array_op_cases(group)


@pytest.mark.parametrize("group", ARRAY_GROUPS)
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_array_operations(config: Config, group: str) -> None:
    cases = array_group_cases(group)
    progs: list[Prog] = []
    problems: list[str] = []
    for label, specs, make in cases:
        prog = array_prog(label, config, specs, make)
        if isinstance(prog, str):
            problems.append(prog)
        elif prog is not None:
            progs.append(prog)
    assert not problems, (f"{config.arch} cannot compile {len(problems)} of {len(cases)} "
                          f"programs that x86_64 compiles, e.g.:\n  " + "\n  ".join(
                              problems[:8]))
    bad = run_and_compare(config, progs)
    assert not bad, report(config, bad)


#: array stencils ("v" forms) of the x86_64 table that no program can make the compiler emit,
#: with the reason (none at present: every one is reachable)
#: array stencils no LocalTarget graph reaches, with where they are exercised instead
UNREACHABLE_ARRAY_STENCILS: dict[str, str] = {
    f"{op}_{t}__v_p_m_m": ("the pointer form of a gather reads a @cp.jit argument in place; only "
                          "jit's in-place lowering uses it (tests/test_jit_gathers.py runs it "
                          "natively and on unicorn's x86_64 and aarch64)")
    for op in ("ngather", "sgather", "ngatherat") for t in ("i32", "f64")
} | {
    f"ngather_{t}__p_v_m_m": ("the pointer-result form of a level gather from an array slot "
                             "writes a @cp.jit result through its pointer slot; only jit's "
                             "in-place lowering uses it (tests/test_jit_temporaries.py runs it "
                             "natively and on unicorn's x86_64 and aarch64)")
    for t in ("i32", "f64")
}


def test_every_array_stencil_is_exercised() -> None:
    """The cases of test_array_operations together use every array stencil of the x86_64
    table (read from the compiler's lowering): the loops, the reductions with their result in
    register 0 and in register 1, the fused dots, every ``where`` operand combination. The
    other tables have the same names (minus float64 on Cortex-M4 and RV32)."""
    from copapy.compiler.table import load_table

    array_stencils = {n for n in load_table(NATIVE.arch).names()
                      if "__" in n and "v" in n.split("__")[1].split("_")}
    unreachable = set(UNREACHABLE_ARRAY_STENCILS)
    assert unreachable <= array_stencils, (
        f"not in the table any more: {sorted(unreachable - array_stencils)}")
    used: set[str] = set()
    for group in ARRAY_GROUPS:
        for _label, specs, make in array_group_cases(group):
            used |= stencils_used(array_graph(specs, make)[1])
    missing = array_stencils - unreachable - used
    assert not missing, (f"{len(missing)} of {len(array_stencils)} array stencils are used by "
                         f"no case of test_array_operations: {sorted(missing)}")
    assert not unreachable & used, f"listed as unreachable but used: {sorted(unreachable & used)}"
    for arch in ARCHS:
        names = set(load_table(arch).names())
        want = {n for n in used & array_stencils if has_float64(arch) or "f64" not in n}
        assert want <= names, f"{arch} lacks {sorted(want - names)[:10]}"


@pytest.mark.parametrize("arch", [a for a in ARCHS if not by_name(a).float64])
def test_float64_is_rejected_without_fp64(arch: str) -> None:
    assert not has_float64(arch)
    x = cp.value(1.0, cp.float64)
    y = cp.value(2.0)
    for out in (x + 1.0, cp.sin(x), cp.cast(y, cp.float64) * 2.0, cp.cast(x * x, cp.float32)):
        with pytest.raises(CompileError, match=f"{arch} has no float64"):
            cp.LocalTarget(arch).compile(out)
    tg = cp.LocalTarget(arch)
    tg.compile(y * 2.0)  # float32 is fine
    tg.write(y, 1.5)
    tg.run()
    assert tg.read(y * 2.0) == 3.0


# ---------------------------------------------------------------- (c) Cortex-M7 on qemu


def test_cortex_m7_qemu_program() -> None:
    """The real Cortex-M7 model (FPv5-D16, FP64 in hardware) through QemuProgram directly."""
    from copapy.runtime.qemu_backend import QemuProgram

    problem = missing_tools("qemu")
    assert problem is None, problem
    x = cp.value(0.3, cp.float64)
    y = cp.value(0.7)
    k = cp.value(5)
    outs = [cp.exp(x) * cp.sqrt(x + 2.0) - cp.atan2(x, 0.25), cp.tanh(y) / (y + 0.5),
            cp.pow(y, 2.5) + cp.cast(k, cp.float32), (k * 7) // 3 % 4]
    nodes = [o.node for o in outs]
    native = compile_program(nodes, "x86_64")
    target = compile_program(nodes, "cortex-m7")
    qp = QemuProgram(target.image, "cortex-m7")
    from copapy import _runner

    np_ = _runner.load(native.image)
    for xv, yv, kv in [(0.3, 0.7, 5), (-1.5, 3.25, -9), (12.0, 1e-3, 2**31 - 1), (1e-300, 0.0, 0)]:
        for prog, comp in ((qp, target), (np_, native)):
            prog.write(comp.ports[x.node].offset, 2, xv)
            prog.write(comp.ports[y.node].offset, 1, yv)
            prog.write(comp.ports[k.node].offset, 3, kv)
            prog.run()
        for o in nodes:
            got = qp.read(target.ports[o].offset, o.dtype.code)
            want = np_.read(native.ports[o].offset, o.dtype.code)
            assert same_raw(o.dtype.pack(got), o.dtype.pack(want), o.dtype), (o, xv, yv, kv,
                                                                                 got, want)
    np_.unload()

