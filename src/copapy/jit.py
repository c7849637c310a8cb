"""``@cp.jit``: trace a NumPy-style function once per argument signature, run machine code.

Signature: for each argument its kind (number, sequence, buffer), element type and shape.
A new signature compiles a new program; programs live in a bounded LRU cache. Array
arguments are packed inputs. One that only fused element-wise loops (two operations or more)
and lone math kernels read is read in place: the program reads the caller's buffer through a
pointer slot that the call sets (when the buffer is C-contiguous, of the element type and
aligned to it). Any other array is copied once, straight into the program's memory
(converting the element type in the same copy when needed: uint8/int8/int16/int64 to int32,
float16 to float32). Results are numbers or NumPy arrays: an array the caller owns, or with
``cp.map_to_numpy(value)`` a view of the program's memory; one the caller owns that a fused loop
writes is written straight into a new array.

Thread safety: a program runs as one C call that writes the arguments, runs and reads the
results while holding the GIL, so concurrent calls from several threads never see each other's
data (arguments that call needs in another form are converted before anything is written). A
lock per jitted function serialises compilation and the calls of programs without that path.
"""

from __future__ import annotations

import functools
import inspect
import sys
from _thread import allocate_lock  # threading.Lock itself; importing threading costs ~1 ms
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from . import dtypes as dt
from ._contract import PlanKind
from ._dispatch import Dispatcher
from .array_shapes import MAX_NDIM
from .arrays import Array, array_input, asarray, matrix, vector
from .compiler import compile_program
from .compiler.layout import ROLE_CONSTANT
from .graph.node import fresh_array_input
from .loading import load_program
from .runtime.load import check_architecture, fastest_host_architecture
from .value import Value, constant, flatten, is_traced, value

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

_WIDEN = {"b": "bool", "i": "int32", "u": "int32", "f": "float32"}



def _bad_result(r: Any, index: int | None) -> str:
    """Why a jitted function's result ``r`` (element ``index`` of a returned tuple) cannot be
    returned, naming it and its type (a tuple of ints, not just "tuple")."""
    what = type(r).__name__
    if isinstance(r, tuple | list) and r:
        what += " of " + " and ".join(sorted({type(e).__name__ for e in r}))
    where = f"its result [{index}] is" if index is not None else "it returned"
    hint = " (several results: return a tuple)" if isinstance(r, list) and index is None else ""
    return (f"a jitted function must return copapy values or arrays (or a tuple of them); "
            f"{where} a {what}, {r!r}{hint}. Allowed: a traced value or array, a Python number, "
            f"a non-empty 1-D or 2-D NumPy array, cp.map_to_numpy(...); a shape or other "
            f"Python data is known before the call: compute it outside the jitted function")

class MapToNumpy:
    """Marks a result to be returned as a NumPy array (view or copy). A plain class, not a
    dataclass: a frozen dataclass costs ~0.5 ms at ``import copapy`` (Python 3.11 compiles
    each generated method), and not a tuple (a tuple result means several results)."""

    __slots__ = ("copy", "value")

    def __init__(self, value: Any, copy: bool) -> None:
        self.value = value
        self.copy = copy


def map_to_numpy(value: Any, copy: bool = False) -> Any:
    """Return this result as a NumPy view of the program's memory (no copy).

    ``copy=False``: the view, valid until the next call of the jitted function (which
    overwrites it); a bool result is a bool view (strided over the int32 slots), a constant
    result a read-only one. ``copy=True``: an array the caller owns, which is what an array
    result without ``map_to_numpy`` is.
    """
    if not isinstance(value, Array | Value):
        raise TypeError("map_to_numpy takes a copapy value or array")
    return MapToNumpy(value, copy)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


def _element_type(kind: str, itemsize: int) -> str:
    if kind == "f":
        return "float64" if itemsize == 8 else "float32"
    if kind in ("i", "u"):
        return "int32"
    if kind == "b":
        return "bool"
    raise TypeError(f"arrays of dtype kind {kind!r} cannot be passed to a jitted function; "
                    f"use numbers (bool, int, float)")


_SCALARS = frozenset({float, int, bool})


def as_python_scalar(a: Any) -> Any:
    """A NumPy scalar or 0-d array as the Python number it holds (np.float32 like float,
    np.int64 like int, np.bool_ like bool: the same results as NumPy 2 gives), except a
    float64 one, which stays np.float64: NumPy 2 (NEP 50) keeps its type where a Python float
    is weak, so it is a float64 argument (``_is_float64``); anything else unchanged."""
    if getattr(a, "ndim", None) == 0 and hasattr(a, "item") and hasattr(a, "dtype"):
        return a[()] if a.dtype == np.float64 else a.item()
    return a


def _is_float64(a: Any) -> bool:
    """An np.float64 argument (as_python_scalar's): a float64 scalar input, not a float."""
    return type(a) is np.float64


def _base_array(a: Any) -> Any:
    """An ndarray subclass as its base ndarray (a view): the program computes on the data with
    NumPy's meaning, never the subclass's; refused where those differ (a masked array's buffer
    holds its masked elements, a matrix's ``*`` is a matrix product). Anything else unchanged."""
    if type(a) is np.ndarray or not isinstance(a, np.ndarray):
        return a
    ma = sys.modules.get("numpy.ma")  # a masked array exists only once numpy.ma is imported
    if ma is not None and isinstance(a, ma.MaskedArray):
        raise TypeError("a masked array cannot be passed to a jitted function (the program "
                        "reads every element, masked or not): pass x.filled(value), or "
                        "np.asarray(x) if the mask can be ignored")
    if isinstance(a, np.matrix):
        raise TypeError("np.matrix cannot be passed to a jitted function (its operators are "
                        "matrix operations, * is a matrix product): pass np.asarray(m), and "
                        "use @ for a matrix product")
    return np.asarray(a)


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cache key: kinds, element types and shapes, never values."""
    key: list[Any] = []
    for a in args:
        t = type(a)
        if t in _SCALARS:
            key.append(t)
            continue
        shape = getattr(a, "shape", None)
        if shape is not None and hasattr(a, "dtype"):
            key.append(("buf", a.dtype.kind, a.dtype.itemsize, tuple(shape)))
            continue
        if isinstance(a, list | tuple):
            key.append(("seq", _sequence_signature(a)))
            continue
        raise TypeError(f"cannot pass {t.__name__} to a jitted function: use numbers, nested "
                        f"sequences of numbers or NumPy arrays")
    return tuple(key)


def _sequence_signature(seq: Any) -> tuple[Any, ...]:
    try:
        arr = np.asarray(seq)
    except ValueError as exc:
        raise TypeError(f"ragged sequence passed to a jitted function: {exc}") from None
    if arr.dtype == object or arr.size == 0 or arr.ndim > MAX_NDIM:
        raise TypeError(f"sequences passed to a jitted function must be non-empty, rectangular "
                        f"(1-D to {MAX_NDIM}-D) and hold only numbers")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"sequence of {arr.dtype} passed to a jitted function: only numbers")
    return ("f" if arr.dtype.kind == "f" else arr.dtype.kind, arr.shape)


class FastPlan(NamedTuple):
    """One C call for write-run-read: ``invoke(args, inputs, outputs)``, then ``post`` on its
    tuple (array results) or its only item (``unwrap``: a single scalar result)."""

    invoke: Any
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    post: Callable[[tuple[Any, ...]], Any] | None
    unwrap: bool

    def __call__(self, args: tuple[Any, ...]) -> Any:
        r = self.invoke(args, self.inputs, self.outputs)
        if self.post is not None:
            return self.post(r)
        return r[0] if self.unwrap else r


class _Compiled:
    """One traced and loaded program, with its fast argument and result plans."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], arch: str) -> None:
        traced: list[Any] = []
        for a in args:
            if _is_float64(a):
                traced.append(value(float(a), dt.float64))
            elif isinstance(a, bool | int | float):
                traced.append(value(a))
            else:
                arr = np.asarray(a)
                traced.append(_array_input(arr, _element_type(arr.dtype.kind,
                                                              arr.dtype.itemsize)))
        result = fn(*traced)
        self.tuple_result = isinstance(result, tuple)
        results = list(result) if self.tuple_result else [result]
        if not results:
            raise TypeError("a jitted function returns at least one value; it returned ()")
        outputs = []
        #: per result: its kind ("scalar", "copy": an array the caller owns, "array": a view)
        self.plan: list[tuple[str, Any]] = []
        for index, r in enumerate(results):
            copy = True
            if isinstance(r, MapToNumpy):
                r, copy = r.value, r.copy
            if isinstance(r, bool | int | float):
                r = _const_value(r)
            elif isinstance(r, np.ndarray) and 1 <= r.ndim <= MAX_NDIM and r.size:
                r = _result_array(r)
            if not isinstance(r, Value | Array):
                raise TypeError(_bad_result(r, index if self.tuple_result else None))
            if isinstance(r, Array) and not r.packed:
                r = r.to_packed()
            outputs.append(r)
            kind = "scalar" if not isinstance(r, Array) else "copy" if copy else "array"
            self.plan.append((kind, r))
        compiled = compile_program(flatten(outputs, "a jitted function's results"), arch,
                                   in_place=True)
        # the homes of arguments and results the caller's arrays stand in for are zeros the
        # runner leaves untouched (and keeps no reset copy of): not counted against the cap
        reserve = sum(node.nbytes for node in compiled.pointers)
        program: Any = load_program(compiled.image, arch, own_code=True, reserve=reserve)
        self.ports = ports = compiled.ports
        #: array inputs the fast path hands over by address, and results it has written into a
        #: new array (compile_program(in_place))
        self.pointers = compiled.pointers
        self.run = program.run
        self.read = program.read
        self.write = program.write
        self._views: list[Any] = []
        buffer = program if not hasattr(program, "read_bytes") else None
        self.inputs: list[tuple[str, Any]] = []
        for t in traced:
            port = ports.get(t.nodes()[0] if isinstance(t, Array) else t.node)
            if port is None:  # the function does not use this argument
                self.inputs.append(("skip", None))
            elif isinstance(t, Array):
                self.inputs.append(("array", _view(buffer, port, t.shape)))
            else:
                self.inputs.append(("scalar", (port.offset, port.dtype.code, port.dtype)))
        self.outputs: list[tuple[str, Any]] = []
        for kind, r in self.plan:
            if kind == "scalar":
                port = ports[r.node]
                self.outputs.append(("scalar", (port.offset, port.dtype.code)))
            else:
                port = ports[r.node()]
                self.outputs.append((kind, _result_view(buffer, port, r.shape)))

        #: per argument: the element type of its array input (None: not an array input)
        self._kinds = tuple(t.dtype if kind == "array" else None
                            for t, (kind, _) in zip(traced, self.inputs, strict=True))
        self.call = self._generate()
        #: one C call for write-run-read, atomic under the GIL; None if not applicable (then
        #: every call of this program goes through ``call`` under the function's lock)
        self.fast = self._generate_fast(program, traced)

    def invoke(self, args: tuple[Any, ...]) -> Any:
        """Call through the fast path, converting arguments it cannot take as they are.

        Only for programs with a fast path. Every run of such a program is one atomic C call:
        a thread on its fast path never sees a half-written call of another thread. Arguments
        are converted completely (which may run Python code and switch threads) before
        anything is written.
        """
        fast = self.fast
        assert fast is not None
        try:
            return fast(args)
        except TypeError:
            pass  # e.g. a list, a non-contiguous array or other element type: convert first
        converted = tuple(a if kind is None else dt.storage_array(a, kind)
                          for a, kind in zip(args, self._kinds, strict=True))
        return fast(converted)

    def _generate_fast(self, program: Any, traced: list[Any]) -> FastPlan | None:
        """One C call for write-run-read (atomic under the GIL); None if not applicable."""
        invoke = getattr(program, "invoke", None)
        if invoke is None:
            return None
        in_plan: list[tuple[Any, ...]] = []
        for t, (kind, where) in zip(traced, self.inputs, strict=True):
            if kind == "skip":
                in_plan.append((PlanKind.VIEW, 0, 0, 0))
            elif kind == "scalar":
                in_plan.append((PlanKind.SCALAR, where[0], where[1], 0))
            else:
                port = self.ports[t.nodes()[0]]
                if port.dtype.is_bool:
                    return None  # bool arrays are stored as int32: converted on the slow path
                node = t.nodes()[0]
                slot = self.pointers.get(node)
                nbytes = port.dtype.size * t.size
                if slot is None:
                    in_plan.append((PlanKind.COPY, port.offset, port.dtype.code, nbytes, t.shape))
                else:  # read in place: the buffer's address goes into the pointer slot
                    in_plan.append((PlanKind.IN_PLACE, port.offset, port.dtype.code, nbytes,
                                    t.shape, slot))
        out_plan: list[tuple[Any, ...]] = []
        env: dict[str, Any] = {"np": np}
        results = []
        nodes = [r.node() if isinstance(r, Array) else r.node for _, r in self.plan]
        for k, ((kind, where), (_, r)) in enumerate(zip(self.outputs, self.plan,
                                                           strict=True)):
            if kind == "scalar":
                out_plan.append((PlanKind.SCALAR, where[0], where[1], 0))
                results.append(f"r[{k}]")
                continue
            port = self.ports[r.node()]
            if kind == "copy":
                slot = self.pointers.get(r.node())
                nbytes = port.dtype.size * r.size
                # the array itself is made inside the C call (numpy.empty): no Python code
                # runs after it; bool results are stored as int32 and converted afterwards
                maker = None if port.dtype.is_bool else (
                    np.empty, (r.shape, np.dtype(port.dtype.numpy)))  # a dtype: ~10 ns less
                if slot is not None and nodes.count(r.node()) == 1:
                    # written through its pointer slot into the new array: no copy out
                    out_plan.append((PlanKind.IN_PLACE, port.offset, port.dtype.code, nbytes, (),
                                     slot, maker))
                else:
                    out_plan.append((PlanKind.COPY, port.offset, port.dtype.code, nbytes, (), -1,
                                     maker))
                if maker is not None:
                    results.append(f"r[{k}]")
                    continue
                env[f"shape{k}"] = r.shape
                results.append(f"np.frombuffer(r[{k}], '<i4').reshape(shape{k}).astype(bool)")
            else:  # the C call returns the view itself
                out_plan.append((PlanKind.VIEW, 0, 0, 0, (), -1, where))
                results.append(f"r[{k}]")
        outputs = tuple(out_plan)
        if all(text == f"r[{k}]" for k, text in enumerate(results)):
            # the invoke tuple is the result (or its only item): no Python code per call
            return FastPlan(invoke, tuple(in_plan), outputs, None, not self.tuple_result)
        body = f"({', '.join(results)},)" if self.tuple_result else results[0]
        exec(f"def post(r):\n    return {body}", env)
        return FastPlan(invoke, tuple(in_plan), outputs, env["post"], False)

    def _generate(self) -> Callable[[tuple[Any, ...]], Any]:
        """A call function specialised to this signature: no loops, no branches per call."""
        env: dict[str, Any] = {"write": self.write, "run": self.run, "read": self.read,
                               "storage": dt.storage_array}
        lines = ["def call(args):"]
        for k, (kind, where) in enumerate(self.inputs):
            if kind == "scalar":
                offset, code, _ = where
                lines.append(f"    write({offset}, {code}, args[{k}])")
            elif kind == "array":
                env[f"in{k}"] = where
                env[f"kind{k}"] = self._kinds[k]
                lines.append(f"    in{k}[...] = storage(args[{k}], kind{k})")
        lines.append("    run()")
        results = []
        for k, (kind, where) in enumerate(self.outputs):
            if kind == "scalar":
                results.append(f"read({where[0]}, {where[1]})")
            else:
                env[f"out{k}"] = where
                results.append(f"out{k}.copy()" if kind == "copy" else f"out{k}")
        if self.tuple_result:
            lines.append(f"    return ({', '.join(results)},)")
        else:
            lines.append(f"    return {results[0]}")
        exec("\n".join(lines), env)  # generated from our own plan only
        call: Callable[[tuple[Any, ...]], Any] = env["call"]
        return call


def _view(buffer: Any, port: Any, shape: tuple[int, ...]) -> Any:
    if buffer is None:
        raise TypeError("jit runs on the native runner only (LocalTarget() of this machine)")
    fmt = "<i4" if port.dtype.is_bool else port.dtype.numpy
    count = 1
    for d in shape:
        count *= d
    view = np.frombuffer(buffer, dtype=fmt, count=count, offset=port.offset).reshape(shape)
    return view


def _result_view(buffer: Any, port: Any, shape: tuple[int, ...]) -> Any:
    """The view of an array result: bool results as bool (the low byte of each int32 0/1
    slot; the data region is little-endian), and read-only where it is the program's
    constant (a write would change what every later call returns)."""
    view = _view(buffer, port, shape)
    if port.dtype.is_bool:
        view = view.view(np.bool_)[..., ::4]
    if port.role == ROLE_CONSTANT:
        view.flags.writeable = False
    return view


def _array_input(arr: Any, etype: str) -> Array:
    """A packed input of the argument's shape and element type, without initial data: every
    call writes the argument or reads it in place, so the caller's elements are never copied
    into the image (at 1e8 elements that copy took 55 s and 4.6 GB before the memory cap was
    checked; issue 31)."""
    if not 1 <= arr.ndim <= MAX_NDIM or arr.size == 0:
        return array_input(arr, packed=True, dtype=dt.BY_NAME[etype])  # its error
    shape = tuple(int(d) for d in arr.shape)
    return Array(shape, node=fresh_array_input(dt.BY_NAME[etype], b"", shape)
                 ).refuse_assignment(ARGUMENT)


#: why assigning into an array argument is refused (docs/semantics.md, "Item assignment")
ARGUMENT = ("it is an argument of a @cp.jit function; NumPy would change the caller's array, "
            "but a jitted function only reads its arguments (the caller's array stays as it "
            "is); assign into a copy instead: x = x.copy(); x[0] = v")


def _result_array(r: Any) -> Array:
    """A NumPy array result: an object array of values (NumPy's functions on traced arrays
    give those: np.cumsum, np.concatenate) or a constant, of its own element type when copapy
    has it (a float64 constant stays float64)."""
    keep = dt.BY_NAME.get(r.dtype.name) if r.dtype != object else None
    if r.ndim > 2:
        return asarray(r) if keep is None else asarray(r).astype(keep)
    return vector(r, dtype=keep) if r.ndim == 1 else matrix(r, dtype=keep)


def _const_value(x: bool | int | float) -> Value[Any]:
    return constant(x)


class JitFunction(Dispatcher):
    """A jitted function: call it like the original; ``cache_info()`` reports the cache.

    Calls go to the C slot of ``Dispatcher`` first, which runs the fast plan of the most
    recent signature; anything else (another signature, keywords, no fast plan) comes to
    ``_dispatch``."""

    def __init__(self, fn: Callable[..., Any], cache_size: int, arch: str | None) -> None:
        if cache_size < 1:
            raise ValueError("cache_size must be >= 1")
        self.fn = fn
        self.cache_size = cache_size
        self.arch = check_architecture(arch) if arch is not None else None
        self._cache: OrderedDict[tuple[Any, ...], _Compiled] = OrderedDict()
        self._lock = allocate_lock()
        self._hits = 0
        self._misses = 0
        self._parameters: inspect.Signature | None = None
        self.__name__ = getattr(fn, "__name__", "jitted function")
        functools.update_wrapper(self, fn)

    def __reduce__(self) -> str | tuple[Any, ...]:
        """A jitted function pickles as its Python function: by reference where the module
        attribute is this object (``@cp.jit`` at module level, as pickle does functions),
        else with the function itself (which cloudpickle, Dask's pickler, sends by value);
        the receiver compiles its own programs on the first calls."""
        module = sys.modules.get(getattr(self, "__module__", ""), None)
        name = str(getattr(self, "__qualname__", self.__name__))
        if getattr(module, name, None) is self:
            return name
        return (JitFunction, (self.fn, self.cache_size, self.arch))

    def _dispatch(self, *args: Any, **kwargs: Any) -> Any:
        """The general call: signature look-up (compiling a new one); the C slot calls it when
        the fast plan of the most recent signature does not take the arguments."""
        if kwargs:
            if any(map(is_traced, (*args, *kwargs.values()))):
                return self.fn(*args, **kwargs)  # called while tracing (see below)
            args = self._bind(args, kwargs)
        key = tuple(map(type, args))
        if not _SCALARS.issuperset(key):
            if any(map(is_traced, args)):
                # called by a function being traced (a jitted function calling another one):
                # its operations become part of the caller's program
                return self.fn(*args)
            args = tuple(as_python_scalar(_base_array(a)) for a in args)
            key = _signature(args)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is None:
                self._misses += 1
                compiled = _Compiled(self.fn, args, self.arch or fastest_host_architecture())
                self._cache[key] = compiled
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            else:
                self._hits += 1
                self._cache.move_to_end(key)
            if compiled.fast is None:
                self._clear_fast()
                # no fast path: no other thread can be running this program outside the lock
                return compiled.call(args)
            fast = compiled.fast
            self._set_fast(fast.invoke, fast.inputs, fast.outputs, fast.post, fast.unwrap)
        # a program with a fast path runs only through it (one atomic C call), never through
        # the multi-step ``call``, because other threads may be on its fast path right now
        return compiled.invoke(args)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Keyword arguments (and defaults) as positional arguments in the function's order."""
        if self._parameters is None:
            self._parameters = inspect.signature(self.fn)
        try:
            bound = self._parameters.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.__name__}(): {exc}") from None
        bound.apply_defaults()
        params = self._parameters.parameters
        # keyword-only parameters left out keep their defaults (the traced call passes none)
        kw_only = [n for n in kwargs if n in params
                   and params[n].kind is inspect.Parameter.KEYWORD_ONLY]
        if kw_only:
            raise TypeError(f"{self.__name__}(): keyword-only parameters of a jitted function "
                            f"cannot be given ({', '.join(kw_only)}): make them ordinary "
                            f"parameters (def f(x, k=2.0)), which a call can name as well")
        extra = [n for n in bound.kwargs if n not in params]
        if extra:
            star = next(p.name for p in params.values()
                        if p.kind is inspect.Parameter.VAR_KEYWORD)
            raise TypeError(f"{self.__name__}(): a jitted function takes its arguments by "
                            f"position or by name, not through **{star} ({', '.join(extra)})")
        return bound.args

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits + self._fast_hits, self._misses, self.cache_size,
                         len(self._cache))

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = self._fast_hits = 0
            self._clear_fast()


def jit(fn: Callable[..., Any] | None = None, *, cache_size: int = 32,
        arch: str | None = None) -> Any:
    """Decorator: ``@cp.jit`` or ``@cp.jit(cache_size=8)``; compiles once per argument
    signature (kind, element type, shape), keeping ``cache_size`` programs.

    Arrays: a C-contiguous argument of the traced element type that only element-wise
    expressions of two operations or more, a lone math function (sqrt, sin, exp, ...) or,
    from 4 KiB of result on, a lone cheap operation (``x + y``, ``x * 2``) read is read in
    place, during the call only (on x86_64 and aarch64); the program never
    writes an argument. Others are copied once into the program (and converted: int8 to
    int32, float16 to float32, ...). ``arch`` picks the stencil table (default: the best one the
    CPU runs, e.g. ``"x86_64-v4"``). See :func:`map_to_numpy` for results as arrays. A jitted
    function that another one calls while it traces is traced into the caller's program.
    Keyword-only parameters keep their defaults (give values through ordinary parameters).
    An ndarray subclass is read as its base ndarray, ``np.asarray(x)`` (``np.memmap``, a
    subclass of your own; its methods and operators are not traced, the results are plain
    ndarrays, and each such call takes the general path, some µs more); ``np.ma.MaskedArray``
    and ``np.matrix`` are refused with TypeError: pass ``x.filled(value)`` or ``np.asarray(x)``.
    A NumPy scalar or 0-d array is the Python number it holds: ``np.float16/32`` have the
    signature of ``float`` (the program's float32 argument, as for a Python float), the NumPy
    integer types that of ``int``, ``np.bool_`` that of ``bool``; a warm program takes them on
    the fast path (``f(x, np.float32(dt))`` costs what ``f(x, 0.01)`` does). A float64 one
    (``np.float64``, ``np.array(0.1)``, ``x64[0]``) is a float64 argument, as NumPy 2 keeps
    its type (NEP 50): ``f(x32, np.float64(0.1))`` computes ``x32 * 0.1`` in float64, as
    NumPy does; a Python float stays weak (float32 with float32 arrays).
    Signal state (``cp.delay``, ``cp.feedback``) lives in the program of one signature: each
    call is one run (``f(1.0), f(2.0)`` with ``cp.delay(x)`` gives 0.0, 1.0); a new signature,
    or one evicted from the cache and compiled again, starts from ``init``. ``cp.dt`` has no
    value here (no period): it is a compile error.
    """
    if fn is None:
        return lambda f: JitFunction(f, cache_size, arch)
    return JitFunction(fn, cache_size, arch)
