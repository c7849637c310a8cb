"""NumPy's ufuncs and functions on traced values: which copapy operation or function computes
each one, and a clear error for what has no compiled form (value.py's ``__array_ufunc__`` and
``__array_function__`` call here through the hook this module installs)."""

from __future__ import annotations

import math
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from . import array_shapes as shp
from .graph.ops import REGISTRY
from .value import ARRAYS, Value, _op, install_numpy_support, is_array

#: NumPy ufuncs that compute a registry operation, by the ufunc's name: np.sin(x) on a traced
#: value is cp.sin(x). The bool-converting public functions (np.logical_and) come too.
UFUNCS: dict[str, tuple[str, str]] = {
    **{spec.numpy: (spec.name, "") for spec in REGISTRY.values() if spec.numpy},
    **{spec.api: (spec.name, spec.api_cast) for spec in REGISTRY.values()
       if spec.api.startswith("logical_")},
}


#: NumPy ufuncs that are a short exact expression of registry operations (their NumPy result:
#: x != x is True exactly for NaN, x - x is 0 exactly for finite x)
_COMPOSED: dict[str, Callable[..., Any]] = {
    "isnan": lambda x: _op("ne", x, x),
    "isinf": lambda x: _op("eq", _op("abs", x), float("inf")),
    "isfinite": lambda x: _op("eq", _op("sub", x, x), 0),
    "square": lambda x: _op("mul", x, x),
    # angles, logarithms, hyperbolics and NaN-ignoring extremes control code calls: a few
    # registry operations each, within float32 rounding of NumPy's (docs/semantics.md)
    "deg2rad": lambda x: _op("mul", _floating(x), math.pi / 180),
    "radians": lambda x: _op("mul", _floating(x), math.pi / 180),
    "rad2deg": lambda x: _op("mul", _floating(x), 180 / math.pi),
    "degrees": lambda x: _op("mul", _floating(x), 180 / math.pi),
    "log10": lambda x: _log_base(_floating(x), 10.0),
    "log2": lambda x: _log_base(_floating(x), 2.0),
    "sinh": lambda x: _op("mul", _op("sub", _op("expm1", _floating(x)),
                                      _op("expm1", _op("neg", _floating(x)))), 0.5),
    "cosh": lambda x: _op("mul", _op("add", _op("exp", _floating(x)),
                                      _op("exp", _op("neg", _floating(x)))), 0.5),
    "fmax": lambda a, b: _nan_ignoring("max", a, b),
    "fmin": lambda a, b: _nan_ignoring("min", a, b),
    "heaviside": lambda x, h0: _heaviside(_floating(x), _floating(h0)),
    "vecdot": lambda a, b: _vecdot(a, b),
    "fmod": lambda a, b: _fmod(a, b),
}


def _fmod(a: Any, b: Any) -> Any:
    """np.fmod, C's remainder with the sign of ``a``: of floats |a| % |b| (operands of one sign
    need no correction, so it is exact) with a's sign; of ints the floor remainder moved by
    one |b| where the signs differ (b = 0 gives 0, NumPy's)."""
    a, b = (_op("cast_i32", x) if getattr(getattr(x, "dtype", None), "is_bool", False) else x
            for x in (a, b))
    rem = _op("mod", a, b)
    if getattr(rem, "dtype", None) is None or rem.dtype.is_float:
        return _op("copysign", _op("mod", _op("abs", a), _op("abs", b)), _floating(a))
    moved = _op("and", _op("ne", rem, 0), _op("ne", _op("lt", a, 0), _op("lt", b, 0)))
    return _op("where", moved, _op("sub", rem, b), rem)


def _vecdot(a: Any, b: Any) -> Any:
    """np.vecdot: Σ a·b along the last axis (copapy's numbers are real: no conjugate)."""
    product: Any = _op("mul", a, b)
    return product.sum(axis=-1) if is_array(product) else product


def _heaviside(x: Any, h0: Any) -> Any:
    """np.heaviside: 0 below zero, 1 above, h0 at zero, NaN for NaN (floats, as NumPy's)."""
    step = _op("where", _op("lt", x, 0), 0.0, _op("where", _op("gt", x, 0), 1.0, h0))
    return _op("where", _op("ne", x, x), x, step)


def _log_base(x: Any, base: float) -> Any:
    """np.log2 / np.log10 as log(x) / log(base): float32 through float64 and rounded once, so
    that log2(8) is 3 and log10(1000) is 3 (in float32 the product's two roundings gave
    2.9999998); float64 keeps the composition (a few ulps, docs/semantics.md)."""
    if getattr(getattr(x, "dtype", None), "name", "float32") == "float64":
        return _op("mul", _op("log", x), 1 / math.log(base))
    return _op("cast_f32", _op("mul", _op("log", _op("cast_f64", x)), 1 / math.log(base)))


def _floating(x: Any) -> Any:
    """x as floats for a float-valued ufunc (int32 and bool as float32)."""
    kind = getattr(x, "dtype", None)
    return x if getattr(kind, "is_float", True) else _op("cast_f32", x)


def _nan_ignoring(op: str, a: Any, b: Any) -> Any:
    """np.fmax / np.fmin: the other operand where one is NaN."""
    return _op("where", _op("ne", b, b), a, _op("where", _op("ne", a, a), b, _op(op, a, b)))


def array_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """A NumPy ufunc called on traced values: the copapy operation it names, or an error that
    says which copapy function to use."""
    name = getattr(ufunc, "__name__", str(ufunc))
    if name == "matmul" and method == "__call__" and not kwargs:
        return ARRAYS.matmul(*inputs)
    if (name in _BOOL_UFUNCS and method == "__call__" and not kwargs
            and all(_is_bool(o) for o in inputs)):
        logical = _BOOL_UFUNCS[name]  # NumPy's bool loops: np.add of bools is or, not 2
        return inputs[0] if logical is None else _op(logical, *inputs)
    composed = _COMPOSED.get(name)
    if composed is not None and method == "__call__" and not kwargs:
        return composed(*inputs)
    found = UFUNCS.get(name)
    if found is None or method != "__call__" or kwargs:
        known = sorted(spec.api for spec in REGISTRY.values() if spec.api)
        what = (f"np.{name}.{method}" if method != "__call__" else
                f"np.{name} with {', '.join(kwargs)}=" if kwargs else f"np.{name}")
        raise TypeError(f"{what} cannot compute on traced copapy values (they are computed "
                        f"when the program runs); use copapy's functions (cp.{', cp.'.join(known)})"
                        f" and operators")
    op, cast = found
    kinds = [getattr(getattr(o, "dtype", None), "is_float", True) for o in inputs]
    if name in _WHOLE_ALREADY and not any(kinds):
        return inputs[0]  # NumPy 2's floor/ceil/trunc of ints and bools: the input unchanged
    if op == "invert" and getattr(getattr(inputs[0], "dtype", None), "is_bool", False):
        op = "lnot"  # np.invert of bools is logical, as ~ (it gave the int32 -2 and -1)
    operands = [_op(f"cast_{cast}", o) for o in inputs] if cast else inputs
    return _op(op, *operands)


#: ufuncs whose NumPy loop for bools is logical (bool result): add and maximum are or,
#: multiply and minimum are and, absolute is the input (copapy's int32 arithmetic gave 2)
_BOOL_UFUNCS: dict[str, str | None] = {"add": "or", "maximum": "or", "fmax": "or",
                                       "multiply": "and", "minimum": "and", "fmin": "and",
                                       "absolute": None}


def _is_bool(o: Any) -> bool:
    """A bool operand: a traced bool or a Python/NumPy bool constant."""
    kind = getattr(o, "dtype", None)
    return bool(getattr(kind, "is_bool", False)) or isinstance(o, bool) or (
        getattr(kind, "kind", "") == "b")


#: ufuncs that give an int or bool input back unchanged in NumPy 2 (copapy's float kernels
#: would make them float32 and round integers beyond 2**24)
_WHOLE_ALREADY = ("floor", "ceil", "trunc")


def _np_clip(a: Any, a_min: Any = None, a_max: Any = None, out: None = None, *,
             min: Any = None, max: Any = None) -> Any:
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    if out is not None or (low is None and high is None):
        raise TypeError("np.clip of traced copapy values takes a bound and no out=: "
                        "cp.clamp(x, low, high), cp.max(x, low) or cp.min(x, high)")
    if high is None:  # NumPy's one-sided clip is np.maximum(a, low): low on a tie (0.0, -0.0)
        return _op("max", a, low)
    if low is None:
        return _op("min", a, high)
    return _op("min", high, _op("max", low, a))  # cp.clamp's definition: a kept on a tie


def _np_var(a: Any, std: bool, axis: Any = None, dtype: Any = None, out: Any = None,
            ddof: Any = 0, keepdims: Any = False, **numpy: Any) -> Any:
    """np.var / np.std as NumPy defines them, over ``axis`` (all axes without it):
    mean((a - mean(a))**2) * n / max(n - ddof, 0), std its square root (NumPy's own code asked
    the elements for a NumPy dtype)."""
    name = "std" if std else "var"
    correction = numpy.pop("correction", None)
    extras = [k for k, v in (("dtype", dtype), ("out", out), *numpy.items())
              if v is not None and v is not True and not _no_value(v)]
    if extras:
        raise TypeError(f"np.{name} of a copapy array takes axis=, ddof= (or correction=) and "
                        f"keepdims= only, got {', '.join(extras)}")
    if correction is not None and not _no_value(correction):
        ddof = correction
    keep = False if _no_value(keepdims) else bool(keepdims)
    centred = a - a.mean(axis=axis, keepdims=True)
    count = math.prod(a.shape[k] for k in shp.normalize_axes(axis, a.ndim, f"np.{name}"))
    var = (centred * centred).sum(axis=axis, keepdims=keep) / float(max(count - ddof, 0))
    return _op("sqrt", var) if std else var


def _no_value(v: Any) -> bool:
    """NumPy's placeholder of an argument not given (np._NoValue)."""
    return type(v).__name__ == "_NoValueType"


#: NumPy functions copapy implements itself, by module and name ("numpy.sort",
#: "numpy.linalg.solve": a name alone clashes across NumPy's modules). array_ops.py and
#: numpy_functions.py register them: ``np.sort(x)`` on a traced array calls ``cp.sort(x)``
NUMPY_FUNCTIONS: dict[str, Callable[..., Any]] = {}

#: NumPy functions whose result's shape depends on the elements' values: a traced array has a
#: fixed shape, so they have no compiled form (the value: what to write instead)
DATA_SHAPED: dict[str, str] = {
    "numpy.unique": "sort instead (np.sort keeps the shape) or count matches of known values "
                    "((x == v).sum() for each v)",
    "numpy.nonzero": "select with cp.where(mask, x, 0.0), or count with mask.sum()",
    "numpy.flatnonzero": "select with cp.where(mask, x, 0.0), or count with mask.sum()",
    "numpy.argwhere": "select with cp.where(mask, x, 0.0), or count with mask.sum()",
    "numpy.extract": "select with cp.where(mask, x, 0.0)",
    "numpy.trim_zeros": "keep the zeros (cp.where) or index with constant bounds",
    "numpy.intersect1d": "compare against the known values ((x == v).any() for each v)",
    "numpy.union1d": "compare against the known values ((x == v).any() for each v)",
    "numpy.setdiff1d": "compare against the known values ((x == v).any() for each v)",
}

#: NumPy functions and modules (a name ending in ".") copapy does not compute on traced
#: values; refused by name (their own code fails deep inside on traced elements)
UNSUPPORTED = ("numpy.fft.", "numpy.random.", "numpy.polynomial.", "numpy.linalg.eig",
               "numpy.linalg.eigh", "numpy.linalg.eigvals", "numpy.linalg.eigvalsh",
               "numpy.linalg.svd", "numpy.linalg.svdvals", "numpy.linalg.qr",
               "numpy.linalg.lstsq", "numpy.linalg.pinv", "numpy.linalg.matrix_rank",
               "numpy.linalg.cond", "numpy.linalg.tensorsolve", "numpy.linalg.tensorinv",
               "numpy.ix_")


#: copapy's NumPy reductions whose result for a 0-d argument is the reduction of its one
#: element (NumPy's rule without ``axis``): the positional arguments before ``axis``
SCALAR_REDUCTIONS = {
    "numpy.median": 1, "numpy.percentile": 2, "numpy.quantile": 2, "numpy.ptp": 1,
    "numpy.average": 1, "numpy.nansum": 1, "numpy.nanmean": 1, "numpy.nanmax": 1,
    "numpy.nanmin": 1, "numpy.nanvar": 1, "numpy.nanstd": 1, "numpy.count_nonzero": 1,
    "numpy.linalg.norm": 2, "numpy.linalg.vector_norm": 1,
}


def _scalar_reduction(qualified: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a registered reduction is called on a traced scalar without an axis."""
    before = SCALAR_REDUCTIONS.get(qualified)
    return (before is not None and bool(args) and isinstance(args[0], Value)
            and len(args) <= before and kwargs.get("axis") is None)


def register_numpy_function(name: str, implementation: Callable[..., Any]) -> None:
    """``implementation`` computes NumPy's function ``name`` ("numpy.sort",
    "numpy.linalg.solve": its module and name) on traced arrays."""
    NUMPY_FUNCTIONS[name] = implementation


def numpy_name(func: Any) -> str:
    """NumPy's function as its module and name ("numpy.linalg.solve")."""
    return f"{getattr(func, '__module__', None) or 'numpy'}.{getattr(func, '__name__', func)}"


def shown(qualified: str) -> str:
    """``numpy.linalg.eig`` as users write it: ``np.linalg.eig``."""
    return "np" + qualified.removeprefix("numpy")


def _covered() -> str:
    return (f"NumPy's ufuncs, reductions, np.where, np.clip, "
            f"{', '.join(sorted(shown(n) for n in NUMPY_FUNCTIONS))} "
            f"(docs/guide/concepts/arrays.md, 'NumPy functions on traced arrays')")


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A NumPy function called on traced values: copapy's own implementation (registered, or
    np.where and np.clip as select and clamp); a clear TypeError for what has no fixed-shape
    compiled form or no copapy implementation; else NumPy's implementation on the elements."""
    qualified = numpy_name(func)
    name = getattr(func, "__name__", "")
    own = NUMPY_FUNCTIONS.get(qualified)
    if own is not None:
        if _scalar_reduction(qualified, args, kwargs):  # of a 0-d value: of its one element
            kwargs = {k: v for k, v in kwargs.items() if k not in ("axis", "keepdims")}
            args = (ARRAYS.scalar_method(args[0], "ravel", (), {}), *args[1:])
        return own(*args, **kwargs)
    if qualified == "numpy.where" and len(args) == 3 and not kwargs:
        return _op("where", *args)
    if qualified == "numpy.clip":
        return _np_clip(*args, **kwargs)
    if qualified in ("numpy.var", "numpy.std") and args and hasattr(args[0], "mean"):
        return _np_var(args[0], name == "std", *args[1:], **kwargs)
    instead = DATA_SHAPED.get(qualified)
    if instead is not None:
        raise TypeError(f"{shown(qualified)} of a traced copapy array: its result's shape "
                        f"depends on the elements' values, which exist only when the program "
                        f"runs (a compiled result has a fixed shape); {instead}")
    if any(qualified == u or (u.endswith(".") and qualified.startswith(u)) for u in UNSUPPORTED):
        raise TypeError(f"{shown(qualified)} is not supported on traced copapy values; copapy "
                        f"computes {_covered()}")
    implementation = getattr(func, "_implementation", getattr(func, "__wrapped__", None))
    if implementation is None:
        return NotImplemented
    try:
        result = implementation(*args, **kwargs)
    except Exception as error:  # re-raised as is unless NumPy's code failed
        if not _needs_values(error):
            raise
        raise TypeError(f"{shown(qualified)} is not supported on traced copapy values: NumPy's "
                        f"own implementation needs the elements' values, which exist only when "
                        f"the program runs ({type(error).__name__} inside NumPy: "
                        f"{str(error)[:120]}); copapy computes {_covered()}") from error
    return _traced_objects(result)


def _traced_objects(result: Any) -> Any:
    """NumPy's result with its object arrays of traced values as copapy arrays (np.concatenate,
    np.tensordot and others build them: later operations, np.sort, the jit's result, want
    copapy arrays); anything else unchanged."""
    if isinstance(result, tuple | list) and any(_is_object_array(r) for r in result):
        return type(result)(_traced_objects(r) for r in result)
    if _is_object_array(result):
        return ARRAYS.from_objects(result)
    if type(result).__name__ == "ndarray" and result.ndim == 0 and isinstance(result.item(),
                                                                              Value):
        return result.item()  # a 0-d object array (np.tensordot over every axis)
    return result


def _is_object_array(x: Any) -> bool:
    kind = getattr(x, "dtype", None)
    return (type(x).__name__ == "ndarray" and getattr(kind, "kind", "") == "O" and x.size > 0
            and x.ndim > 0 and any(isinstance(v, Value) for v in x.flat))


def _needs_values(error: Exception) -> bool:
    """Whether NumPy's implementation failed on the traced values rather than copapy refusing
    clearly: any exception raised inside NumPy's own code (its last frame there: a ufunc loop
    of NumPy dtypes, an attribute of ndarrays, an index of object arrays), or copapy's refusal
    to give a traced value a truth or float value that NumPy asked for."""
    frames = traceback.extract_tb(error.__traceback__)
    if len(frames) == 1:
        return True  # raised by NumPy's C implementation itself (np.packbits)
    numpy_dir = os.path.dirname(getattr(sys.modules.get("numpy"), "__file__", None) or "")
    if numpy_dir and frames and frames[-1].filename.startswith(numpy_dir + os.sep):
        return True
    text = str(error)
    return ("traced copapy" in text or "dtype('O')" in text
            or "not supported for the input types" in text)


install_numpy_support(array_ufunc, array_function)
