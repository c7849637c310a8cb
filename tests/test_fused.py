"""Fused element-wise loops (compiler/fuse.py, stencils/fused.c), executing generated code.

Random element-wise trees over packed arrays (every element-wise registry operation except the
select, float32 / int32 / bool operands, scalars broadcast, lengths that leave partial blocks
for every vector width), compiled with fusion on and off, run on the native runner (x86_64,
x86_64-v3, x86_64-v4) and on unicorn (aarch64): fused == unfused == the NumPy / host-kernel
reference (graph/reference.py) element by element, bit for bit (any NaN equals any NaN, as in
the cross-architecture suite). Also: the chosen loops (what is fused and what is not: an
intermediate with another user, an output), results in place of a dead operand, the backward
branch, and that targets without ``fuse_vector_bytes`` have no fused stencils.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import copapy as cp
from copapy.arch.targets import by_name, host_arch, targets
from copapy.arrays import array_input
from copapy.compiler import compile_program, fuse, lower
from copapy.compiler.table import load_table
from copapy.graph import build
from copapy.graph.build import ShapeOrTypeError
from copapy.graph.node import Node
from copapy.graph.ops import REGISTRY
from copapy.graph.reference import evaluate_graph

from .support.archs import Batch, Config, execute, first_difference, stencils_used
from .support.registry_ops import DTYPES, accepts, elementwise

FUSED_ARCHS = [t.name for t in targets() if "fuse_vector_bytes" in t.build]
#: the host's architecture and its variants on the native runner, the others on unicorn
CONFIGS = [Config(a, "native" if (by_name(a).variant_of or a) == host_arch() else "unicorn")
           for a in FUSED_ARCHS]
#: lengths around every block size and its register halves (blocks of 4 to 32 lanes of
#: float32, 2 to 16 of float64: one or two registers, targets/*.toml fuse_register_bytes)
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 63, 65, 100, 1003]
#: every element-wise operation but the select (a family of its own, never fused)
OPS = [n for n in elementwise() if REGISTRY[n].arity <= 2]


@contextmanager
def fusion(on: bool) -> Iterator[None]:
    saved = fuse.ENABLED
    fuse.ENABLED = on
    try:
        yield
    finally:
        fuse.ENABLED = saved


def packed(n: int, dtype: str) -> Node:
    return array_input(np.zeros(n, DTYPES[dtype].numpy), packed=True, dtype=DTYPES[dtype]).node()


def random_elements(rng: np.random.Generator, n: int, dtype: str) -> Any:
    """Values of every magnitude with the special ones mixed in."""
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype == "int32":
        small = rng.integers(-40, 40, n)
        big = rng.integers(-(2**31), 2**31 - 1, n)
        return np.where(rng.random(n) < 0.7, small, big).astype(np.int32)
    np_type = DTYPES[dtype].numpy
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(np_type)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e30, 0.5, 100.5, 1e6],
                        dtype=np_type)
    pick = rng.random(n) < 0.15
    x[pick] = specials[rng.integers(0, len(specials), int(pick.sum()))]
    return x


def run(outputs: list[Node], inputs: dict[Node, Any], config: Config, on: bool
        ) -> list[bytes]:
    """Raw bytes of the outputs of one run of the program compiled with fusion on/off."""
    with fusion(on):
        compiled = compile_program(outputs, config.arch)
    ports = compiled.ports
    writes = [(ports[n].offset, np.ascontiguousarray(v, dtype=n.dtype.numpy
                                                     if not n.dtype.is_bool else np.int32
                                                     ).tobytes())
              for n, v in inputs.items() if n in ports]
    batch = Batch(compiled.image, [writes], [(ports[o].offset, o.nbytes) for o in outputs])
    execute(config, [batch])
    return batch.results[0]


def expected(outputs: list[Node], inputs: dict[Node, Any]) -> list[bytes]:
    values = evaluate_graph(outputs, inputs)
    return [np.ascontiguousarray(v, dtype=np.int32 if o.dtype.is_bool else o.dtype.numpy
                                 ).tobytes() for v, o in zip(values, outputs, strict=True)]


def check(outputs: list[Node], inputs: dict[Node, Any], config: Config) -> None:
    fused = run(outputs, inputs, config, True)
    unfused = run(outputs, inputs, config, False)
    want = expected(outputs, inputs)
    for k, out in enumerate(outputs):
        for label, got in (("fused", fused[k]), ("unfused", unfused[k])):
            bad = first_difference(got, want[k], out.dtype)
            assert bad < 0, (f"{config.id}: output {k} ({out.op}, {out.dtype.name}), {label} "
                             f"differs from the reference at element {bad}")


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[Node], dict[Node, Any]]:
    """Random element-wise trees over packed arrays of one length, with some intermediates
    also outputs (other users: not fused) and some scalar operands."""
    n = draw(st.sampled_from(LENGTHS))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dtypes = draw(st.sampled_from([("float32",), ("float32", "int32", "bool"), ("int32", "bool"),
                                   ("float64", "float32"), ("float64",)]))
    inputs: dict[Node, Any] = {}
    pool: list[Node] = []
    for _ in range(draw(st.integers(1, 3))):
        dtype = draw(st.sampled_from(dtypes))
        node = packed(n, dtype)
        inputs[node] = random_elements(rng, n, dtype)
        pool.append(node)
    extra: list[Node] = []
    for _ in range(draw(st.integers(2, 14))):
        name = draw(st.sampled_from(OPS))
        operands: list[Node] = []
        for k in range(REGISTRY[name].arity):
            choice = draw(st.integers(0, 9))
            if choice == 0:  # a scalar input, broadcast
                dtype = draw(st.sampled_from(dtypes))
                s = cp.value(0, DTYPES[dtype]).node
                inputs[s] = random_elements(rng, 1, dtype)[0]
                operands.append(s)
            elif choice == 1:  # a constant
                dtype = draw(st.sampled_from(dtypes))
                operands.append(build.const(random_elements(rng, 1, dtype)[0].item(),
                                            DTYPES[dtype]))
            elif choice < 6 or k:  # mostly the latest value: long chains
                operands.append(pool[-1 if choice < 6 else draw(st.integers(0, len(pool) - 1))])
            else:
                operands.append(draw(st.sampled_from(pool)))
        try:
            result = build.apply(name, *operands)
        except (ShapeOrTypeError, TypeError, OverflowError):
            continue
        if not result.shape:
            continue
        pool.append(result)
        if draw(st.integers(0, 7)) == 0:
            extra.append(result)  # another user: stored, a leaf of the loops after it
    outputs = [pool[-1], *extra]
    if not pool[-1].shape or pool[-1].op == "input":
        outputs = [o for o in outputs if o.shape and o.op != "input"]
    return outputs, inputs


def fused_stencils(outputs: list[Node], arch: str) -> set[str]:
    with fusion(True):
        return {s for s in stencils_used(outputs, arch) if s.startswith(("vr", "vloop_"))}


@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
def test_random_trees(config: Config) -> None:
    """fused == unfused == reference on random trees (hypothesis)."""
    examples = 60 if config.runner == "native" else 20

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(trees())
    def prop(case: tuple[list[Node], dict[Node, Any]]) -> None:
        outputs, inputs = case
        if outputs:
            check(outputs, inputs, config)

    prop()


def near_quadrants(np_type: Any) -> Any:
    """Arguments next to multiples of pi/2 below 100: float32 reduces some of them to |r| <
    2^-20, which its Cody-Waite step does not take (the scalar kernel's Payne-Hanek does)."""
    x = (np.arange(1, 64) * (np.pi / 2)).astype(np_type)
    return np.concatenate([np.nextafter(x, x * 0), x, np.nextafter(x, x * 2)])


def argument_classes(dtype: str) -> list[Any]:
    """Arguments by the path the sin/cos kernels take: tiny, |x| <= pi/4 (direct), the
    Cody-Waite range, next to a quadrant, beyond the Cody-Waite range (Payne-Hanek: the
    scalar kernel in a fused block), inf and NaN."""
    t = DTYPES[dtype].numpy
    big = 1e5 if dtype == "float32" else 2.0**31
    return [np.array([0.0, -0.0, 1e-40, -3e-5, 1e-7, 2e-4], t),
            np.linspace(-0.78, 0.78, 13, dtype=t),
            np.linspace(-99.0, 99.0, 37, dtype=t), near_quadrants(t),
            np.array([100.0, -100.5, 1e4, big, -3e7, 1e30, 3.4e38], t),
            np.array([np.inf, -np.inf, np.nan], t)]


def mixed(op: str, dtype: str, x: Any, rng: np.random.Generator, config: Config) -> None:
    """a*b + op(x) (register 0 holds a*b while register 1 computes op(x)) and op(x - 0)*1.5
    (op in register 0): fused == unfused == the scalar kernel."""
    n = len(x)
    a, b, c, z = (packed(n, dtype) for _ in range(4))
    av, bv, cv, zv = cp.Value(a), cp.Value(b), cp.Value(c), cp.Value(z)
    f = getattr(cp, op)
    outputs = [(av * bv + f(cv)).node, (f(cv - zv) * 1.5).node]
    check(outputs, {a: random_elements(rng, n, dtype), b: random_elements(rng, n, dtype),
                    c: x.astype(DTYPES[dtype].numpy), z: np.zeros(n, DTYPES[dtype].numpy)},
          config)


@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
def test_math_blocks_mixing_small_and_huge_arguments(config: Config) -> None:
    """A fused block of sin or cos takes the branch-free lane form when every lane can, the
    scalar kernel for the whole block otherwise: blocks whose lanes mix every argument class,
    with the one that needs the scalar kernel at every lane position, in both registers (the
    other one holding a value across the scalar kernel's call) and as the loop's last partial
    block: fused == unfused == the scalar kernel, bit for bit (hypothesis)."""
    examples = 40 if config.runner == "native" else 12

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(op=st.sampled_from(["sin", "cos"]), dtype=st.sampled_from(["float32", "float64"]),
           n=st.integers(1, 40), common=st.integers(0, 3),
           odd=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 5)), max_size=3),
           seed=st.integers(0, 2**32 - 1))
    def prop(op: str, dtype: str, n: int, common: int, odd: list[tuple[int, int]],
             seed: int) -> None:
        classes = argument_classes(dtype)
        lanes = [common] * n  # a class the lane form takes, a few lanes of any class
        for pos, k in odd:
            lanes[pos % n] = k
        rng = np.random.default_rng(seed)
        mixed(op, dtype, np.array([rng.choice(classes[k]) for k in lanes]), rng, config)

    # and every lane position of the widest block (32: two AVX-512 registers of float32) as
    # the only one beyond Cody-Waite
    for op in ("sin", "cos"):
        for dtype in ("float32", "float64"):
            x = np.tile(np.linspace(0.1, 40.0, 32), 32)
            x[np.arange(32) * 33] = 3.0e9
            mixed(op, dtype, x, np.random.default_rng(0), config)
    prop()


def test_random_trees_fuse() -> None:
    """The random trees do fuse (the property above tests the fused code, not only the
    unfused one): most trees of a sample contain a fused loop."""
    with_loops = 0
    total = 0

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(trees())
    def count(case: tuple[list[Node], dict[Node, Any]]) -> None:
        nonlocal with_loops, total
        outputs, _ = case
        if outputs:
            total += 1
            with_loops += bool(fused_stencils(outputs, "x86_64"))

    count()
    assert with_loops >= total // 3, f"only {with_loops} of {total} random trees fused"


def expression(n: int) -> tuple[list[Node], dict[Node, Any], Node, Node]:
    a, b = packed(n, "float32"), packed(n, "float32")
    rng = np.random.default_rng(n)
    av, bv = (cp.Value(a), cp.Value(b))
    out = (cp.sqrt(av * av + bv * bv) * 0.5 + cp.sin(av)).node
    inputs = {a: random_elements(rng, n, "float32"), b: random_elements(rng, n, "float32")}
    return [out], inputs, a, b


@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
@pytest.mark.parametrize("n", [1, 7, 8, 16, 17, 67, 1003])
def test_expression(config: Config, n: int) -> None:
    """sqrt(a*a+b*b)*0.5+sin(a) (the benchmark's): one loop of seven operations, both vector
    registers, a scalar broadcast, a math kernel's lane form."""
    outputs, inputs, _, _ = expression(n)
    with fusion(True):
        names = [s for s in _lowered(outputs, config.arch)]
    assert names == ["vloop_i32__begin", "vrmul_f32__0_p_p", "vrmul_f32__1_p_p",
                     "vradd_f32__0_0_1", "vrsqrt_f32__0_0", "vrmul_f32__0_0_m",
                     "vrsin_f32__1_p", "vradd_f32__0_0_1", "vrstore_f32__p_0",
                     "vloop_f32__end"], names
    check(outputs, inputs, config)


def _lowered(outputs: list[Node], arch: str) -> list[str]:
    """The stencils of the chain in order (the lowering's emit calls)."""
    names: list[str] = []
    real = lower._Lowerer.emit

    def spy(self: Any, stencil: str, slots: list[tuple[str, int]]) -> None:
        names.append(stencil)
        real(self, stencil, slots)

    lower._Lowerer.emit = spy  # type: ignore[method-assign]
    try:
        compile_program(outputs, arch)
    finally:
        lower._Lowerer.emit = real  # type: ignore[method-assign]
    return [s for s in names if not s.startswith("store_")]


def test_intermediate_with_another_user_is_not_fused() -> None:
    """t = a*b is an output too: it is stored by its own loop and read by the loop of
    sqrt(t)+a, not recomputed and not kept in a register."""
    n = 33
    a, b = packed(n, "float32"), packed(n, "float32")
    t = build.apply("mul", a, b)
    u = build.apply("add", build.apply("sqrt", t), a)
    outputs = [u, t]
    names = _lowered(outputs, "x86_64")
    assert "mul_f32__v_v_v" in names  # t: the unfused packed loop (a single operation)
    assert names.count("vloop_i32__begin") == 1
    assert "vrsqrt_f32__0_p" in names  # t read as a block from memory
    rng = np.random.default_rng(1)
    inputs = {a: random_elements(rng, n, "float32"), b: random_elements(rng, n, "float32")}
    for config in CONFIGS:
        check(outputs, inputs, config)


def test_three_registers_split_the_tree() -> None:
    """(a*b + c) * (a*c + b) - (b*b + a) * (c*c + a): each product needs both registers, the
    difference three; the cut-off operand becomes a loop of its own (stored, then read), and
    the result is still the reference's."""
    n = 67
    a, b, c = (packed(n, "float32") for _ in range(3))
    ap = build.apply
    left = ap("mul", ap("add", ap("mul", a, b), c), ap("add", ap("mul", a, c), b))
    right = ap("mul", ap("add", ap("mul", b, b), a), ap("add", ap("mul", c, c), a))
    out = ap("sub", left, right)
    names = _lowered([out], "x86_64")
    assert names.count("vloop_i32__begin") == 2, names
    rng = np.random.default_rng(2)
    inputs = {x: random_elements(rng, n, "float32") for x in (a, b, c)}
    for config in CONFIGS:
        check([out], inputs, config)


def test_result_in_place_of_a_dead_operand() -> None:
    """A fused loop whose result takes the slot of its dead operand (t, a temporary array
    with two users, is dead after the second loop): the second loop writes each block where
    it read it."""
    n = 67
    a, b = packed(n, "float32"), packed(n, "float32")
    ap = build.apply
    t = ap("sin", ap("add", a, b))  # two users below: a temporary array
    x = ap("mul", ap("sqrt", t), t)  # ... reads t twice, a loop; t is dead after it
    slots: list[list[tuple[str, int]]] = []
    real = lower._Lowerer.emit

    def spy(self: Any, stencil: str, s: list[tuple[str, int]]) -> None:
        if stencil.startswith("vr"):
            slots.append(s)
        real(self, stencil, s)

    lower._Lowerer.emit = spy  # type: ignore[method-assign]
    try:
        with fusion(True):
            compile_program([ap("neg", ap("exp", x))], "x86_64")
    finally:
        lower._Lowerer.emit = real  # type: ignore[method-assign]
    reads = {off for s in slots for role, off in s if role in ("a", "b")}
    stores = [off for s in slots for role, off in s if role == "out"]
    assert any(off in reads for off in stores), (reads, stores)
    rng = np.random.default_rng(3)
    inputs = {a: random_elements(rng, n, "float32"), b: random_elements(rng, n, "float32")}
    for config in CONFIGS:
        check([ap("neg", ap("exp", x))], inputs, config)


def test_outputs_and_single_operations_are_not_loops() -> None:
    """A single element-wise operation keeps its packed loop (no fused loop for it), and an
    element-wise output is stored, never only kept in a register."""
    a = packed(40, "float32")
    assert not fused_stencils([build.apply("sin", a)], "x86_64")
    s = build.apply("sin", a)
    out = build.apply("mul", s, a)
    names = _lowered([out, s], "x86_64")
    assert "vloop_i32__begin" not in names


def test_switch_off() -> None:
    """fuse.ENABLED = False (COPAPY_FUSE=0 at import) compiles the packed loops of before."""
    outputs, _, _, _ = expression(100)
    with fusion(False):
        assert not {s for s in stencils_used(outputs, "x86_64") if s.startswith("vr")}


@pytest.mark.parametrize("arch", [t.name for t in targets()])
def test_declared_per_target(arch: str) -> None:
    """A target has the fused forms of every element line exactly when its toml declares
    fuse_vector_bytes; the others compile the same expression without them."""
    table = load_table(arch)
    names = [n for n in table.names() if n.startswith(("vr", "vloop_"))]
    if "fuse_vector_bytes" in by_name(arch).build:
        assert fuse.LOOP_BEGIN in table and "vrsin_f32__0_p" in table
        assert "vradd_i32__1_m_p" in table and "vrlt_f32__0_0_1" in table
        assert not [n for n in names if n.startswith(("vrtof64", "vrtof32_f64"))]
    else:
        assert not names
        outputs, _, _, _ = expression(20)
        assert not fused_stencils(outputs, arch)


def test_loop_branch_is_resolved_in_python() -> None:
    """The backward branch is a code-to-code reference: no runtime patch on x86_64/aarch64."""
    outputs, _, _, _ = expression(1003)
    for arch in FUSED_ARCHS:
        with fusion(True):
            compiled = compile_program(outputs, arch)
        assert compiled.runtime_patches == 0, arch


# ---------------------------------------------------------------- every reachable form

FORM_N = 37  # partial last blocks for every lane count
#: a unary operation that keeps the type (an interior operand of that type)
KEEP = {"float32": "neg", "float64": "neg", "int32": "neg", "bool": "lnot"}


def form_trees(op: str, dtype: str) -> list[Node]:
    """Trees in which ``op`` (operands of ``dtype``) is computed in every operand form the
    register order reaches (fused.c, CP_FUN_D): operands from a block, a scalar, the register
    of the result, and results into register 0 and register 1 (the second operand of a node
    whose first one needs both registers). Every tree has inputs of its own (so that
    hash-consing shares no interior node between trees); a commutative operation orders its
    operands by their fingerprints, which include the inputs' names, so a tree is rebuilt with
    other names until its operands are in the intended order."""
    ap = build.apply
    names = iter(range(10**6))

    def arr(d: str = dtype) -> Node:
        return array_input(np.zeros(FORM_N, DTYPES[d].numpy), packed=True, dtype=DTYPES[d],
                           name=f"x{next(names)}").node()

    def scal() -> Node:
        return cp.value(0, DTYPES[dtype], name=f"s{next(names)}").node

    def keep(x: Node) -> Node:  # not op itself: neg(neg(x)) and lnot(lnot(x)) simplify to x
        d = x.dtype.name
        if KEEP[d] != op:
            return ap(KEEP[d], x)
        if d == "bool":
            return ap("and", x, arr(d))
        return ap("abs" if x.dtype.is_float else "invert", x)

    def opnode(first: Callable[[], Node], second: Callable[[], Node]) -> Node:
        for _ in range(64):
            x = first()
            node = ap(op, x, second())
            if x in (node.args[0], *node.args[0].args):
                return node
        raise AssertionError(f"{op}: no names that keep the operand order")

    def into0(f: Node) -> Node:  # the only operand of the root: f goes to 0
        return keep(f)

    def into1(f: Node) -> Node:  # the first operand needs both registers: f goes to 1
        d = f.dtype.name
        return ap("add", ap("add", keep(arr(d)), keep(arr(d))), f)

    def keep_arr() -> Node:
        return keep(arr())

    def need2() -> Node:  # keeps the type and needs both registers
        return ap("and" if dtype == "bool" else "add", keep(arr()), keep(arr()))

    if REGISTRY[op].arity == 1:
        fs = [lambda: ap(op, arr()), lambda: ap(op, keep(arr()))]
    else:
        fs = [lambda: opnode(arr, arr), lambda: opnode(arr, scal), lambda: opnode(scal, arr),
              lambda: opnode(keep_arr, arr), lambda: opnode(arr, keep_arr),
              lambda: opnode(keep_arr, scal), lambda: opnode(scal, keep_arr)]
    trees = []
    for make in fs:
        for wrap in (into0, into1):
            try:
                trees.append(wrap(make()))
            except (ShapeOrTypeError, TypeError):
                pass
    if REGISTRY[op].arity == 2:
        for make2 in (lambda: opnode(keep_arr, keep_arr), lambda: opnode(keep_arr, need2)):
            try:  # 0_0_1, 0_1_0
                trees.append(make2())
            except (ShapeOrTypeError, TypeError):
                pass
    return trees


FORM_CASES = [(op, d) for op in OPS for d in ("float32", "float64", "int32", "bool")
              if accepts(op, d)]


def form_inputs(outputs: list[Node], seed: int) -> dict[Node, Any]:
    rng = np.random.default_rng(seed)
    inputs: dict[Node, Any] = {}
    stack = list(outputs)
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.op == "input":
            values = random_elements(rng, max(1, x.size), x.dtype.name)
            inputs[x] = values if x.shape else values[0]
        stack.extend(x.args)
    return inputs


@pytest.mark.parametrize("config", CONFIGS, ids=[c.id for c in CONFIGS])
def test_every_operation_in_every_form(config: Config) -> None:
    """Every element-wise operation and operand type in every reachable form: fused ==
    unfused == reference."""
    for k, (op, dtype) in enumerate(FORM_CASES):
        outputs = form_trees(op, dtype)
        if outputs:
            check(outputs, form_inputs(outputs, k), config)


#: the element lines that are no graph operation: copies of float arrays are the packed mov
#: loops (array.c), never an element-wise node
UNREACHABLE = {f"vrmov_{t}__{f}" for t in ("f32", "f64") for f in ("0_0", "0_p", "1_1", "1_p")}
#: a strided view's lanes: only @cp.jit's in-place lowering reads a view of an argument in a
#: loop (tests/test_jit_gathers.py runs them natively and on unicorn's x86_64 and aarch64)
UNREACHABLE |= {f"vrsgather_{w}__{d}_p" for w in ("i32", "f64") for d in (0, 1)}


def test_every_fused_stencil_is_exercised() -> None:
    """The form trees use every vector-register stencil of the fused tables (read from the
    lowering) but the unreachable ones; so the test above runs each of them."""
    for arch in FUSED_ARCHS:
        table = {n for n in load_table(arch).names() if n.startswith(("vr", "vloop_"))}
        assert UNREACHABLE <= table
        table -= UNREACHABLE
        used: set[str] = set()
        for op, dtype in FORM_CASES:
            used |= fused_stencils(form_trees(op, dtype), arch)
        assert used <= table
        missing = sorted(table - used)
        assert not missing, f"{arch}: {len(missing)} of {len(table)} unused: {missing[:20]}"


def test_loop_end_without_begin_is_an_error() -> None:
    """The linker resolves the backward branch to the stencil after the loop's begin; a loop
    end without one is a CompileError, not a branch to nowhere."""
    from copapy.compiler.link import link
    from copapy.compiler.lower import CompileError, Instr

    table = load_table("x86_64")
    assert any(r.target_type == "loop" for r in table.function("vloop_f32__end").relocs)
    with pytest.raises(CompileError, match="branches back"):
        link([[Instr("vloop_f32__end", ())]], table)
    linked = link([[Instr(fuse.LOOP_BEGIN, (("n", 0),)), Instr("vrneg_f32__0_p", (("a", 0),)),
                    Instr("vrstore_f32__p_0", (("out", 0),)), Instr("vloop_f32__end", ())]],
                  table)
    assert linked.patches == []


#: the element lines of kind vec: math kernels whose fused stencils the kernel sources define
VEC_OPS = ("sqrt", "sin", "cos", "exp", "log", "tanh")


@pytest.mark.parametrize("arch", ["x86_64", "x86_64-v3", "x86_64-v4"])
def test_math_kernel_stencils_call_nothing_on_their_common_path(arch: str) -> None:
    """A fused stencil of a math kernel runs the kernel's branch-free lane form inline and
    calls the scalar kernel (cp_v<op>_<T>_w, which saves every register) only for a block
    with a lane that needs it; so its common path, up to the jump to the next stencil, has no
    call and the stencil no stack realignment (a register may still be spilled). When every
    block called the lane form through memory, the stencil saved the chain's registers,
    realigned the stack and stored the block every time (AVX2: the expression's loop 2.4 ->
    1.9 ns/element)."""
    import capstone

    table = load_table(arch)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    slow = []
    for op in VEC_OPS:
        for t in ("f32", "f64"):
            for form in ("0_0", "0_p", "1_1", "1_p"):
                fn = table.function(f"vr{op}_{t}__{form}")
                calls = [r for r in fn.relocs if r.target_type == "func"]
                assert all(r.target == f"cp_v{op}_{t}_w" for r in calls), (fn.name, calls)
                slow += [fn.name] if calls else []
                end = min(r.offset for r in fn.relocs if r.target_type == "next")
                code = [(i.address, f"{i.mnemonic} {i.op_str}") for i in md.disasm(fn.code, 0)]
                realign = [c for _, c in code if c.startswith("and rsp")]
                common = [c for a, c in code if a < end and c.startswith("call")]
                assert not realign and not common, (fn.name, realign, common)
    # sin and cos take the scalar kernel for a large argument (Payne-Hanek reduction)
    assert {n[2:5] for n in slow} == {"sin", "cos"}, slow


@pytest.mark.parametrize("arch", ["x86_64", "x86_64-v3", "x86_64-v4"])
def test_operand_stencils_have_no_stack_frame_on_their_common_path(arch: str) -> None:
    """A block of two registers: the partial block of an operand from memory is loaded
    register part by register part, and the loops over a block's lanes are unrolled, so the
    cheap forms (two arrays, an array and a scalar, two registers) set up no stack frame
    before their full-block test, which every block would pay (the partial path may have
    one). Loaded as one vector of 32 lanes with a run-time lane index, the partial block went
    through an aligned stack slot whose frame (push, realign, 0x4c0 bytes) came first."""
    import capstone

    table = load_table(arch)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    for op, kinds in (("add", ("f32", "f64", "i32")), ("mul", ("f32", "f64", "i32")),
                      ("lt", ("f32", "i32")), ("neg", ("f32", "f64", "i32"))):
        for kind in kinds:
            forms = ("0_p", "1_p") if op == "neg" else ("0_p_p", "1_p_m", "0_0_1", "0_m_0")
            for form in forms:
                fn = table.function(f"vr{op}_{kind}__{form}")
                end = min(r.offset for r in fn.relocs if r.target_type == "next")
                touched = []
                for i in md.disasm(fn.code, 0):
                    if i.address >= end or (i.mnemonic.startswith("j") and i.mnemonic != "jmp"):
                        break  # the jump to the next stencil, or the full-block test
                    if i.mnemonic in ("push", "pop") or "rsp" in i.op_str or "rbp" in i.op_str:
                        touched.append(f"{i.mnemonic} {i.op_str}")
                assert not touched, (op, kind, form, touched)


@pytest.mark.parametrize("arch", ["x86_64", "x86_64-v3", "x86_64-v4"])
def test_the_store_of_a_full_block_has_no_stack_frame(arch: str) -> None:
    """The loop skeleton's store runs once per block: its partial-block path stores lane by
    lane at constant lanes (register extracts), so no stencil of it touches the stack. With a
    run-time lane index the block went through an aligned stack slot, and every block paid
    for the frame (push, realign, restore): a one-operation loop such as `x * 2` ran 25-35%
    slower (benchmarks/bench_lone.py, RESULTS.md)."""
    import capstone

    table = load_table(arch)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    for kind in ("f32", "f64", "i32"):
        code = table.function(f"vrstore_{kind}__p_0").code
        touched = [f"{i.mnemonic} {i.op_str}" for i in md.disasm(code, 0)
                   if i.mnemonic in ("push", "pop") or "rsp" in i.op_str or "rbp" in i.op_str]
        assert not touched, (kind, touched)
