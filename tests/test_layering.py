"""The package's import graph: no cycles (a function-local import counts, only
TYPE_CHECKING imports are free) and no layer importing one it feeds (docs/design.md,
"Data flow and layout")."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "copapy"

#: what each layer may not import: data flows DSL -> graph -> compiler -> image -> runner
FORBIDDEN = {
    "arch": ("graph", "compiler", "image", "runtime", "serial", "DSL", "targets", "scope"),
    "graph": ("compiler", "image", "runtime", "serial", "DSL", "targets", "scope"),
    "compiler": ("runtime", "serial", "DSL", "targets", "scope"),
    "image": ("graph", "compiler", "runtime", "serial", "DSL", "targets", "scope"),
    "runtime": ("graph", "compiler", "serial", "DSL", "targets", "scope"),
    "serial": ("graph", "compiler", "runtime", "DSL", "targets", "scope"),
    # the DSL (and cp.io's channel declarations) describe programs; checking them against a
    # target's state (TargetError) belongs to the targets
    "DSL": ("compiler", "image", "runtime", "serial", "targets", "scope"),
    # the live scope sits beside the targets: their scope() methods and cli_scope open it;
    # it drives them through their public methods and imports none of them
    "scope": ("graph", "compiler", "image", "DSL", "targets"),
}
#: the top-level modules of the DSL and of the targets (packages are named by their folder)
GROUPS = {
    "DSL": ("value", "numpy_dispatch", "numpy_functions", "numpy_sequences", "lookup", "arrays",
            "array_shapes", "array_ops", "array_update", "functions", "quaternions", "signals",
            "signal_shape", "task", "io", "jacobians", "linalg"),
    "targets": ("local_target", "serial_target", "saved", "target_common", "io_plan", "keep_state",
                "loading", "cli", "cli_program", "cli_tools", "cli_bench", "cli_scope", "jit",
                "kits", "bench", "sweeps"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def is_extension(name: str) -> bool:
    """A C extension module (``copapy._runner``): its stub or its built library exists."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".pyi").exists() or any(path.parent.glob(path.name + ".*.so"))


def typing_only(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``, which never run."""
    nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                nodes.update(id(n) for n in ast.walk(stmt))
    return nodes


@cache
def imports() -> dict[str, frozenset[str]]:
    """Every copapy module each module imports when it runs (anywhere in its body)."""
    graph: dict[str, frozenset[str]] = {}
    for name, path in modules().items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        skip = typing_only(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if full in modules():
                        found.add(full)
                    elif target in modules() and not is_extension(full):
                        found.add(target)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules())
        graph[name] = frozenset(found - {name})
    return graph


def cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer(module: str) -> str:
    top = module.split(".")[1] if "." in module else module
    for group, members in GROUPS.items():
        if top in members:
            return group
    return top


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}),
             "d": frozenset({"a"})}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_imports_itself_back() -> None:
    assert cycles(imports()) == [], "import cycles (a function-local import counts)"


@pytest.mark.parametrize("lower", sorted(FORBIDDEN))
def test_no_layer_imports_one_it_feeds(lower: str) -> None:
    wrong = sorted(f"{m} imports {t}" for m, targets in imports().items() if layer(m) == lower
                   for t in targets if layer(t) in FORBIDDEN[lower])
    assert wrong == []
