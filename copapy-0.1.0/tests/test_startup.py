"""What ``import copapy`` and the first ``@cp.jit`` call load: only the jit path."""

from __future__ import annotations

import ast
import hashlib
import subprocess
import sys

import pytest

import copapy
from copapy.compiler.runner_table import runner_table
from copapy.runtime.load import host_architecture

NOT_ON_THE_JIT_PATH = ["copapy.io", "copapy.saved", "copapy.task", "copapy.signals",
                       "copapy.quaternions", "copapy.local_target", "copapy.serial_target",
                       "copapy.target_common", "pathlib", "inspect", "hashlib"]


def test_first_jit_call_loads_only_the_jit_path() -> None:
    code = ("import sys, numpy as np, copapy as cp\n"
            "f = cp.jit(lambda v1, v2: sum((v1 + i) @ v2 for i in range(10)))\n"
            "assert f(np.arange(500, dtype=np.float32), np.full(500, 5, np.float32)) == 6350000\n"
            f"print(sorted(m for m in {NOT_ON_THE_JIT_PATH!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    # numpy imports inspect and pathlib itself on some versions: those count only when
    # `import numpy` alone does not load them
    numpy_alone = subprocess.run(
        [sys.executable, "-c", f"import sys, numpy\n"
                               f"print(sorted(m for m in {NOT_ON_THE_JIT_PATH!r} "
                               f"if m in sys.modules))\n"],
        capture_output=True, text=True, check=True).stdout
    assert sorted(set(ast.literal_eval(out)) - set(ast.literal_eval(numpy_alone))) == []


@pytest.mark.parametrize("name", sorted(copapy._LAZY))
def test_lazy_names_resolve_to_their_module_attribute(name: str) -> None:
    module = __import__(f"copapy.{copapy._LAZY[name]}", fromlist=["_"])
    expected = module if name == copapy._LAZY[name] else getattr(module, name)
    assert getattr(copapy, name) is expected
    assert name in copapy.__all__


def test_quaternion_is_the_function_after_any_import() -> None:
    """cp.quaternion is the documented function, also once a target has imported the module
    that defines it (a submodule of the same name took its place: 'module' object is not
    callable)."""
    code = ("import copapy as cp\n"
            "assert callable(cp.quaternion), cp.quaternion\n"
            "cp.LocalTarget\n"
            "q = cp.quaternion(1.0, 0.0, 0.0, 0.0)\n"
            "assert isinstance(q, cp.Quaternion), q\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    code = "import copapy as cp\ncp.LocalTarget\nassert callable(cp.quaternion), cp.quaternion\n"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        copapy.no_such_name  # noqa: B018


def test_table_pin_is_the_sha256_of_the_runner_table() -> None:
    """The pin's SHA-256 comes from the interpreter's own module (not hashlib's OpenSSL one,
    which costs the first jit call ~4 ms): the same digest."""
    table = runner_table(host_architecture())
    assert table.pin == hashlib.sha256(table.blob).digest()
