"""Recording a scope's samples to a file: every tick, undecimated (CSV, or Parquet when
pyarrow is installed)."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .sources import Batch

if TYPE_CHECKING:
    import numpy as np
else:
    from .._lazy import numpy as np

#: Parquet row groups: rows buffered before one is written
ROW_GROUP = 50_000


def parquet_available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def formats() -> list[str]:
    return ["csv", "parquet"] if parquet_available() else ["csv"]


class Recorder:
    """Appends batches to ``path`` (``.parquet`` for Parquet, else CSV): columns ``tick``,
    ``time_s``, one per signal label and ``lost_before``, the ticks lost right before the row
    (0 but after a gap in the stream). ``rows`` counts what was written, ``lost`` the ticks
    marked lost."""

    def __init__(self, path: str | Path, labels: list[str], tick_s: float) -> None:
        self.path = Path(path)
        self.labels = list(labels)
        self.tick_s = tick_s
        self.rows = 0
        self.lost = 0
        self._lock = threading.Lock()
        self._csv: TextIO | None = None
        self._parquet: Any = None
        self._pending: list[Batch] = []
        if self.path.suffix == ".parquet":
            if not parquet_available():
                raise ValueError(f"recording {self.path} as Parquet needs pyarrow: pip install "
                                 f"pyarrow, or record to a .csv file")
        else:
            self._csv = open(self.path, "w", newline="")
            self._csv.write(",".join(["tick", "time_s", *self.labels, "lost_before"]) + "\n")

    def add(self, batch: Batch) -> None:
        with self._lock:
            if self._csv is not None:
                table = np.column_stack([batch.ticks.astype(np.float64),
                                         batch.ticks * self.tick_s,
                                         *(batch.columns[k] for k in self.labels),
                                         batch.lost_before()])
                fmt = ",".join(["%d", "%.9g"] + ["%.9g"] * len(self.labels) + ["%d"])
                np.savetxt(self._csv, table, fmt=fmt)
            else:
                self._pending.append(batch)
                if sum(len(b) for b in self._pending) >= ROW_GROUP:
                    self._flush_parquet()
            self.rows += len(batch)
            self.lost += int(batch.lost_before().sum())

    def _flush_parquet(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._pending:
            return
        ticks = np.concatenate([b.ticks for b in self._pending])
        data = {"tick": ticks, "time_s": ticks * self.tick_s}
        data.update({k: np.concatenate([b.columns[k] for b in self._pending])
                     for k in self.labels})
        data["lost_before"] = np.concatenate([b.lost_before() for b in self._pending])
        table = pa.table(data)
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(str(self.path), table.schema)
        self._parquet.write_table(table)
        self._pending = []

    def close(self) -> None:
        with self._lock:
            if self._csv is not None:
                self._csv.close()
                self._csv = None
            elif self._pending or self._parquet is None:
                self._flush_parquet()
            if self._parquet is not None:
                self._parquet.close()
                self._parquet = None
