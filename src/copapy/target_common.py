"""What LocalTarget and SerialTarget share: decoding trace rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import dtypes as dt

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def decode_rows(raw: bytes, dtypes: Sequence[dt.DType]) -> tuple[NDArray[np.uint64],
                                                                   list[NDArray[Any]]]:
    """Split concatenated trace rows into the time stamps and one column per value.

    A row is ``uint64`` (t_ns of a native trace row, the tick of a STREAM event; docs/realtime.md
    and docs/protocol.md) followed by the values, packed, little-endian. Columns are new arrays
    of the values' NumPy types (bool for bool values).
    """
    import numpy as np

    record = np.dtype([("t", "<u8")] + [(f"v{i}", d.fmt) for i, d in enumerate(dtypes)])
    table = np.frombuffer(raw, dtype=record)
    columns = [table[f"v{i}"].astype(bool if d.is_bool else d.numpy)
               for i, d in enumerate(dtypes)]
    return table["t"], columns
