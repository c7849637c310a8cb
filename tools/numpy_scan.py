"""Scan NumPy's public API on traced arrays: call every public callable of ``numpy`` and
``numpy.linalg`` under ``@cp.jit`` with a few plausible signatures on small float32/int32/bool
arrays and compare with NumPy on the same inputs (docs/decisions/2026-12-05-numpy-scan.md).

Classes: EQUAL (float32 tolerance, exact for int/bool), DIFFERENT (documented: copapy's
32-bit result types), REFUSED (a copapy TypeError/ValueError naming the function), UNCLEAR (an
exception from inside NumPy, or one not naming the function), WRONG (a result that is not
NumPy's). Signatures NumPy itself rejects are skipped.

    PYTHONPATH=src python tools/numpy_scan.py [--only name,name] [--all-rows]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import copapy as cp

NUMPY_DIR = os.path.dirname(np.__file__)
CLASSES = ("EQUAL", "DIFFERENT", "REFUSED", "UNCLEAR", "WRONG")
#: ordered from worst: a function's class is the worst over its signatures
RANK = {"WRONG": 0, "UNCLEAR": 1, "REFUSED": 2, "DIFFERENT": 3, "EQUAL": 4}

#: the keyword under which a signature carries constant positional arguments
CONSTANT = "__constants__"

F1 = np.float32([0.5, -1.25, 2.0, 0.75])
F1B = np.float32([1.5, 0.25, -2.0, 0.75])
F2 = np.float32([[0.5, -1.25, 2.0], [0.75, 3.0, -0.5]])
F2B = np.float32([[1.5, 0.25, -2.0], [0.75, -1.0, 2.5]])
SQ = np.float32([[2.0, 0.5], [-0.25, 1.5]])
I1 = np.int32([3, -2, 7, 0])
I1B = np.int32([1, 5, -3, 2])
B1 = np.array([True, False, True, True])
B1B = np.array([False, False, True, False])

#: (label, traced arguments, constant keywords[, constant positional arguments after them])
SIGNATURES: list[tuple[str, tuple[np.ndarray, ...], dict[str, Any]]] = [
    ("f32[4]", (F1,), {}),
    ("f32[2,3]", (F2,), {}),
    ("f32[2,3] axis=0", (F2,), {"axis": 0}),
    ("f32[2,2]", (SQ,), {}),
    ("i32[4]", (I1,), {}),
    ("bool[4]", (B1,), {}),
    ("f32[4], f32[4]", (F1, F1B), {}),
    ("f32[2,3], f32[2,3]", (F2, F2B), {}),
    ("i32[4], i32[4]", (I1, I1B), {}),
    ("bool[4], bool[4]", (B1, B1B), {}),
    ("f32[2,2], f32[2,2]", (SQ, SQ.T.copy()), {}),
    ("f32[4], 2", (F1,), {CONSTANT: (2,)}),
    ("f32[2,3], 1", (F2,), {CONSTANT: (1,)}),
    ("i32[4], 3", (I1,), {CONSTANT: (3,)}),
]

#: not functions of arrays, or not about values (printing, types, errors, the C API, testing)
SKIP = {"info", "show_config", "show_runtime", "test", "get_include", "lookfor", "source",
        "who", "deprecate", "deprecate_with_doc", "printoptions", "set_printoptions",
        "get_printoptions", "setbufsize", "getbufsize", "seterr", "geterr", "seterrcall",
        "geterrcall", "errstate", "load", "save", "savez", "savez_compressed", "loadtxt",
        "savetxt", "genfromtxt", "fromfile", "fromregex", "memmap", "vectorize", "frompyfunc",
        "nditer", "nested_iters", "ndenumerate", "ndindex", "broadcast", "busday_count",
        "busday_offset", "is_busday", "busdaycalendar", "datetime_as_string",
        "datetime_data", "tofile", "array_repr", "array_str", "array2string",
        "format_float_positional", "format_float_scientific", "base_repr", "binary_repr",
        "typename", "mintypecode", "may_share_memory", "shares_memory", "from_dlpack",
        "asmatrix", "matrix", "bmat", "recarray", "chararray", "ndarray", "dtype", "poly1d",
        "apply_along_axis", "apply_over_axes", "piecewise_", "add_docstring",
        "add_newdoc", "add_newdoc_ufunc", "setxor1d", "einsum_path", "require"}


#: documented differences for bool operands (docs/semantics.md, "Arithmetic ... on bools"):
#: products and sums of bool arrays inside NumPy's code are int32 counts, NumPy's bool
#: loops are or/and; np.round of bools gives the bools (NumPy 2.4: float16)
BOOL_DIFFERENCES = {"np.convolve", "np.correlate", "np.diag", "np.diagflat", "np.dot",
                    "np.inner", "np.vecdot", "np.kron", "np.linalg.matmul", "np.linalg.outer",
                    "np.matmul",
                    "np.outer", "np.polyadd", "np.polyval", "np.tril", "np.triu", "np.vdot",
                    "np.round", "np.around", "np.trapezoid"}

#: results NumPy leaves unspecified (only shape and type are compared)
UNSPECIFIED = {"np.empty_like", "np.empty"}


def public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """NumPy's public functions and ufuncs (not types, not submodules)."""
    for module, prefix in ((np, "np."), (np.linalg, "np.linalg.")):
        for name in sorted(dir(module)):
            if name.startswith("_") or name in SKIP:
                continue
            obj = getattr(module, name)
            if isinstance(obj, type) or not callable(obj):
                continue
            yield prefix + name, obj


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _leaves(result: Any) -> list[Any] | None:
    """The numeric arrays of a result (tuples flattened); None if it is not numbers."""
    if isinstance(result, tuple | list) and not isinstance(result, np.ndarray):
        out: list[Any] = []
        for r in result:
            sub = _leaves(r)
            if sub is None:
                return None
            out.extend(sub)
        return out
    if isinstance(result, np.ndarray | np.generic | bool | int | float):
        arr = np.asarray(result)
        if arr.dtype.kind in "biuf":
            return [arr.astype(np.float32 if arr.dtype.kind == "f" else np.int32) if
                    isinstance(result, _PYTHON) and arr.dtype.kind in "if" else arr]
    return None


#: a scalar result the jit gives as a Python number (its width is not copapy's type)
_PYTHON = (bool, int, float)


def _same(ours: np.ndarray, ref: np.ndarray, name: str) -> str:
    """EQUAL, DIFFERENT (documented 32-bit result types) or WRONG (with why)."""
    if ours.shape != ref.shape:
        return f"WRONG shape {ours.shape} != {ref.shape}"
    if ours.dtype.kind == "O":
        return "WRONG object array"
    kinds = {ours.dtype.kind, ref.dtype.kind}
    if ours.dtype.kind != ref.dtype.kind and not kinds <= {"i", "u"}:
        return f"WRONG type {ours.dtype} != {ref.dtype}"
    if name in UNSPECIFIED:
        pass
    elif ref.dtype.kind == "f":
        rtol = 1e-3 if ref.dtype == np.float16 else 1e-5  # NumPy's float16 of bools
        ok = np.allclose(ours.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                         atol=rtol / 10, equal_nan=True)
        inf = np.array_equal(np.isinf(ours), np.isinf(ref))
        if not (ok and inf):
            return "WRONG values"
    elif not np.array_equal(ours.astype(np.int64), ref.astype(np.int64)):
        return "WRONG values"
    return "EQUAL" if ours.dtype == ref.dtype else f"DIFFERENT {ours.dtype} for {ref.dtype}"


def _raised_in_numpy(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(NUMPY_DIR)


def _names_function(error: BaseException, name: str, fn: Callable[..., Any]) -> bool:
    """Whether the message names the function (or, for an alias such as np.acosh, the
    ufunc's own name np.arccosh)."""
    text = str(error)
    shorts = {name.rsplit(".", 1)[-1], getattr(fn, "__name__", "")} - {""}
    return name in text or any(re.search(rf"\b{re.escape(short)}\b", text) for short in shorts)


def classify(name: str, fn: Callable[..., Any], args: tuple[np.ndarray, ...],
             kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(class, detail) of one call; None when NumPy itself rejects the signature."""
    kwargs = dict(kwargs)
    constants = kwargs.pop(CONSTANT, ())
    if constants:
        fn = _with_constants(fn, constants)
    try:
        ref = _quiet(fn, *args, **kwargs)
    except Exception:  # NumPy's own rejection: the signature does not apply
        return None
    leaves = _leaves(ref)
    if leaves is None:
        return None
    try:
        ours = _quiet(cp.jit(lambda *xs: _as_tuple(fn(*xs, **kwargs))), *args)
    except (TypeError, ValueError, np.linalg.LinAlgError) as error:
        line = f"{type(error).__name__}: {str(error).splitlines()[0][:90] if str(error) else ''}"
        if _raised_in_numpy(error) or not _names_function(error, name, fn):
            return "UNCLEAR", line
        return "REFUSED", line
    except Exception as error:  # any other failure is unclear to a user
        first = str(error).splitlines()[0][:90] if str(error) else ""
        return "UNCLEAR", f"{type(error).__name__}: {first}"
    got = _leaves(ours)
    if got is None or len(got) != len(leaves):
        return "WRONG", f"result {type(ours).__name__} for {type(ref).__name__}"
    verdicts = [_same(o, r, name) for o, r in zip(got, leaves, strict=True)]
    worst = min(verdicts, key=lambda v: RANK[v.split()[0]])
    klass, _, detail = worst.partition(" ")
    if klass == "WRONG" and name in BOOL_DIFFERENCES and all(a.dtype == bool for a in args):
        return "DIFFERENT", f"documented (bool operands): {detail}"
    return klass, detail


def _as_tuple(result: Any) -> Any:
    """A list of results (np.split's) as the tuple a jitted function returns."""
    return tuple(result) if isinstance(result, list) else result


def _with_constants(fn: Callable[..., Any], constants: tuple[Any, ...]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, *constants, **kwargs)
    call.__name__ = getattr(fn, "__name__", "call")
    return call


def scan(only: set[str] | None = None) -> list[tuple[str, str, str, str]]:
    """(function, signature, class, detail) for every call NumPy accepts."""
    rows = []
    for name, fn in public_callables():
        if only is not None and name not in only:
            continue
        for label, args, kwargs in SIGNATURES:
            verdict = classify(name, fn, args, kwargs)
            if verdict is not None:
                rows.append((name, label, *verdict))
    return rows


def per_function(rows: list[tuple[str, str, str, str]]) -> dict[str, tuple[str, str, str]]:
    """Each function's worst class, with the signature and detail that showed it."""
    worst: dict[str, tuple[str, str, str]] = {}
    for name, label, klass, detail in rows:
        if name not in worst or RANK[klass] < RANK[worst[name][0]]:
            worst[name] = (klass, label, detail)
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated names (np.select,np.linalg.det)")
    parser.add_argument("--all-rows", action="store_true", help="every signature, not the worst")
    parser.add_argument("--hide-equal", action="store_true", help="leave EQUAL rows out")
    options = parser.parse_args()
    only = set(options.only.split(",")) if options.only else None
    rows = scan(only)
    print("| function | signature | class | detail |\n|---|---|---|---|")
    if options.all_rows:
        shown = [(n, label, k, d) for n, label, k, d in rows]
    else:
        shown = [(n, label, k, d) for n, (k, label, d) in sorted(per_function(rows).items())]
    for name, label, klass, detail in sorted(shown, key=lambda r: (RANK[r[2]], r[0])):
        if not (options.hide_equal and klass == "EQUAL"):
            print(f"| `{name}` | {label} | {klass} | {detail.replace('|', '/')} |")
    counts = Counter(k for k, _, _ in per_function(rows).values())
    skipped = {n for n, _ in public_callables()} - {r[0] for r in rows}
    print("\n| class | functions |\n|---|---|")
    for klass in CLASSES:
        print(f"| {klass} | {counts.get(klass, 0)} |")
    print(f"\n{len(per_function(rows))} functions scanned ({len(rows)} calls); "
          f"{len(skipped)} public callables take no array of these signatures", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
