"""Copy plans: how ``tg.read``/``tg.write`` move an array's (a quaternion's, a named port's)
elements between a loaded program's data region and a NumPy array.

A plan is made once per value and loaded program from the value's slots (target_common.Slots):
its elements' positions in the data region, as element indices of one typed view of the
region. A call then costs one copy: a slice of that view when the elements are neighbours
(one memcpy), else one gather or scatter through the index array (NumPy's C loop), instead
of one Python call per element (an unpacked 100-element input cost ~120 µs to write and read
that way; RESULTS.md, "Target I/O").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import dtypes as dt
from .target_common import Slots, numbers_of, shaped

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from ._lazy import numpy as np

__all__ = ["CopyPlan", "copy_plan"]


class CopyPlan:
    """One value's elements in a data region: ``read()`` a new array, ``write(x)`` them."""

    __slots__ = ("_flat", "_index", "_storage", "dtype", "name", "read", "shape")

    def __init__(self, region: Any, dtype: dt.DType, shape: tuple[int, ...],
                 index: NDArray[np.intp], name: str | None = None) -> None:
        self.dtype = dtype
        self.shape = shape
        #: the port name the plan was made for (it also takes a flat list), None for a value
        self.name = name
        self._storage = np.dtype("<i4" if dtype.is_bool else dtype.numpy)
        first, count = int(index[0]), len(index)
        if int(index[-1]) - first + 1 == count and bool((np.diff(index) == 1).all()):
            # neighbours: a view of exactly these elements, copied with one memcpy
            self._flat: Any = region[first:first + count].reshape(shape)
            self._index: Any = None
            copy: Callable[[], Any] = self._flat.copy
        else:
            self._flat = region
            self._index = index.reshape(shape)
            copy = functools.partial(region.take, self._index)
        #: the elements as a new array of the value's shape (bool for bool elements); a C
        #: callable, no Python frame per call, except for bool
        self.read: Callable[[], Any] = (copy if not dtype.is_bool else
                                        lambda: copy().astype(np.bool_))

    def write(self, x: Any) -> None:
        """Write ``x`` (an array or nested list of the value's shape; for a port name also a
        flat list) into the elements, checked as writing one number is (dt.storage_array);
        ValueError for another shape."""
        if type(x) is not np.ndarray or x.dtype is not self._storage or x.shape != self.shape:
            values = shaped(numbers_of(x, self.dtype, self.shape), self.shape, self.name)
            x = dt.storage_array(values, self.dtype)
        if self._index is not None:
            self._flat[self._index] = x
        else:
            self._flat[...] = x


def copy_plan(buffer: Any, slots: Slots) -> CopyPlan | None:
    """The plan of ``slots`` in ``buffer`` (the program's data region, a writable buffer);
    None when its elements are not all of one type at offsets aligned to it (then the
    target copies them port by port)."""
    if not slots.shape or any(p.dtype != slots.dtype for p in slots.ports):
        return None
    size = slots.dtype.size
    if any(p.offset % size for p in slots.ports):
        return None
    raw = np.frombuffer(buffer, dtype=np.uint8)
    region = raw[:raw.size - raw.size % size].view("<i4" if slots.dtype.is_bool
                                                   else slots.dtype.numpy)
    index = np.concatenate([np.arange(p.offset // size, p.offset // size + p.count)
                            for p in slots.ports]).astype(np.intp)
    if index.size != int(np.prod(slots.shape)):
        return None
    name = slots.key[0] if isinstance(slots.key[0], str) else None
    return CopyPlan(region, slots.dtype, slots.shape, index, name)
