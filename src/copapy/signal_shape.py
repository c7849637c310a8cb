"""The shape of a signal: how a scalar, a vector or matrix (packed or unpacked) or a quaternion
splits into state leaves, and how its value and its ``init`` are checked against that shape.

A packed array is one state leaf of its shape (one data slot, one copy per run); an unpacked
array and a quaternion are one scalar state per element (constants still fold per element).
Signal operators (signals.py) work on the *math view* of a signal (a Value or an Array: a
quaternion is the unpacked vector (w, x, y, z) there) and give the caller back its own form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import dtypes as dt_types
from .arrays import Array, _auto_packed, asarray
from .graph import build, element_shapes
from .graph.location import mark
from .graph.node import Node, const_value, intern, next_serial
from .graph.state import set_update
from .quaternions import Quaternion
from .value import Value, _convert, is_array, wrap

if TYPE_CHECKING:
    import numpy as np
else:
    from ._lazy import numpy as np

SCALAR, PACKED, UNPACKED, QUATERNION = "scalar", "packed", "unpacked", "quaternion"


@dataclass(frozen=True)
class Form:
    """What a signal looks like to its user: ``kind`` (scalar, packed or unpacked array,
    quaternion) and ``shape`` (() for a scalar, (4,) for a quaternion)."""

    kind: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        if self.kind == SCALAR:
            return "a scalar signal"
        if self.kind == QUATERNION:
            return "a quaternion signal"
        return f"a {self.kind} signal of shape {self.shape}"

    def view(self, x: Any) -> Value[Any] | Array:
        """``x`` (of this form) as its math view: a quaternion as its (4,) unpacked vector."""
        if isinstance(x, Quaternion):
            return Array((4,), items=x.components())
        return x  # type: ignore[no-any-return]

    def make(self, x: Value[Any] | Array) -> Any:
        """A math-view value back in this form (a packed result stays packed)."""
        if self.kind == QUATERNION:
            assert isinstance(x, Array)
            return Quaternion(*x.to_unpacked().items())
        return x

    def leaves(self, x: Value[Any] | Array) -> list[Node]:
        """The nodes one state each holds: a packed array's node, else one per element."""
        if self.kind == SCALAR:
            assert isinstance(x, Value)
            return [x.node]
        assert isinstance(x, Array)
        if self.kind == PACKED:
            return [x.to_packed().node()]
        return [v.node for v in x.to_unpacked().items()]


def form_of(x: Any, op: str, what: str = "takes") -> tuple[Form, Value[Any] | Array]:
    """The form of a signal operand and its math view (numbers and NumPy arrays are
    constants); TypeError naming what the operator takes for anything else."""
    if isinstance(x, Quaternion):
        return Form(QUATERNION, (4,)), Array((4,), items=x.components())
    if isinstance(x, Array):
        return Form(PACKED if x.packed else UNPACKED, x.shape), x
    if is_array(x):
        try:
            a = asarray(x)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"cp.{op} {what} a copapy value, array, quaternion or number, got "
                            f"{type(x).__name__}: {exc}") from None
        return Form(PACKED if a.packed else UNPACKED, a.shape), a
    try:
        return Form(SCALAR, ()), wrap(x)
    except TypeError:
        raise TypeError(f"cp.{op} {what} a copapy value, array, quaternion or a number, got "
                        f"{type(x).__name__} {x!r}") from None


def form_of_init(init: Any, packed: bool | None) -> Form:
    """The form a feedback signal takes from its ``init`` alone: a number is a scalar, a
    sequence or NumPy array an array of its shape (packed above the array threshold, or as
    ``packed`` says), a cp.Quaternion of numbers a quaternion."""
    if isinstance(init, Quaternion):
        return Form(QUATERNION, (4,))
    if is_array(init) and not isinstance(init, Array):
        shape = tuple(np.shape(init))
        if not shape or 0 in shape or len(shape) > 2:
            raise ValueError(f"init of shape {shape}: a signal is a scalar, a vector or a "
                             f"matrix (an init array needs 1 or 2 dimensions, none empty)")
        return Form(PACKED if _auto_packed(packed, math.prod(shape)) else UNPACKED, shape)
    return Form(SCALAR, ())


def init_values(init: Any, form: Form, dtype: dt_types.DType, op: str) -> list[Any]:
    """``init`` as one Python number per element (row-major) of type ``dtype``: a number is
    every element's; an array must have the signal's shape. A traced value is refused."""
    if isinstance(init, Value | Array):
        raise TypeError("init is the value before the first run, Python numbers fixed when the "
                        "program is built; for a start computed at run time select it: "
                        "cp.where(cp.first_run(), start, signal)")
    if isinstance(init, Quaternion):
        if any(c.node.op != "const" for c in init.components()):
            raise TypeError("a quaternion init holds numbers, not traced values: "
                            "cp.quaternion(1.0, 0.0, 0.0, 0.0)")
        init = [const_value(c.node) for c in init.components()]
    if is_array(init):
        data = np.asarray(init)
        if data.dtype.kind not in "biuf":
            raise TypeError(f"cp.{op}: init holds numbers, got {type(init).__name__} {init!r}")
        if data.shape != form.shape:
            raise ValueError(f"cp.{op}: init has shape {data.shape} but the signal has shape "
                             f"{form.shape} ({form.describe()}): pass an init of shape "
                             f"{form.shape}, or one number for every element")
        elements = data.reshape(-1).tolist()
    else:
        elements = [init] * form.size
    try:  # the checks of cp.constant(init, dtype)
        return [_convert(build._check_scalar(v), dtype) for v in elements]
    except (TypeError, OverflowError) as exc:
        raise type(exc)(f"init={init!r} for a {dtype.name} signal: {exc}") from None


def new_states(form: Form, dtype: dt_types.DType, init: Any, op: str,
               name: str | None = None) -> tuple[Value[Any] | Array, list[Node]]:
    """Fresh state leaves of ``form`` and type ``dtype`` holding ``init``: the math view of
    their value this run and the leaves (to bind their updates to)."""
    values = init_values(init, form, dtype, op)
    if form.kind == PACKED:
        raw = b"".join(dtype.pack(v) for v in values)
        leaf = mark(intern("state", dtype, (), (next_serial(), name, raw), form.shape))
        return Array(form.shape, node=leaf), [leaf]
    names: list[str | None] = [name] if form.kind == SCALAR else \
        [None if name is None else f"{name}[{k}]" for k in range(form.size)]
    leaves = [mark(intern("state", dtype, (), (next_serial(), n, dtype.pack(v))))
              for n, v in zip(names, values, strict=True)]
    if form.kind == SCALAR:
        return Value(leaves[0]), leaves
    if name is not None:  # cp.save describes the state as of this shape, not 1-D
        element_shapes.record(leaves[0], form.shape)
    return Array(form.shape, items=[Value(n) for n in leaves]), leaves


def bind(form: Form, leaves: list[Node], update: Any, op: str, signal: bool = True) -> None:
    """Each state leaf takes its element of ``update`` (a value of the signal's shape) next
    run; ValueError naming both shapes if ``update`` has another shape. ``signal``: the update
    is the signal itself (feedback, integrate), so it may read the state's init before its
    first publish; a delay's update is its input, which has no init of its own."""
    shape = update.shape if isinstance(update, Array) else ()
    if shape != form.shape:
        got = "a scalar" if not shape else f"shape {shape}"
        raise ValueError(f"cp.{op}: the update is {got} but the state is {form.describe()}: "
                         f"a signal keeps its shape (give init the update's shape, or reduce "
                         f"the update to the state's)")
    nodes = form.leaves(update) if form.kind != SCALAR else [wrap(update).node]
    for leaf, node in zip(leaves, nodes, strict=True):
        set_update(leaf, build.cast(node, leaf.dtype), signal=signal)
