"""A scope's running core: one thread takes every batch from its source as it comes and
queues it, another moves the queued batches to the recording (all ticks) and to the display
(decimated), so a slow recording (a busy disk) never keeps the first from emptying the
target's bounded stream buffer; the page reads the display and the state, and sends control
writes, start/stop and recording requests here. No Bokeh in this module."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .display import Display
from .record import Recorder
from .sources import CHUNK, Batch, Source, Status

#: seconds of ticks taken but not yet recorded before the source waits: memory stays bounded
#: when the recording is slower than the source (a LocalTarget stepped as fast as it runs,
#: which this throttles), and a stream survives a recording blocked this long (beyond it the
#: stream's own buffer overflows: counted and marked, never silent)
BACKLOG_S = 60.0


@dataclass(frozen=True)
class Control:
    """An input the page writes: a slider over ``[lo, hi]`` when the range is known, a
    checkbox for a bool, else a typed number field."""

    key: Any
    label: str
    initial: float | int | bool
    lo: float | None = None
    hi: float | None = None

    @property
    def kind(self) -> str:
        if isinstance(self.initial, bool):
            return "toggle"
        return "slider" if self.lo is not None and self.hi is not None else "field"

    @property
    def integer(self) -> bool:
        return isinstance(self.initial, int) and not isinstance(self.initial, bool)


class Core:
    """Pumps ``source`` in a thread until ``close``."""

    def __init__(self, source: Source, controls: list[Control], record: str | Path | None = None
                 ) -> None:
        self.source = source
        self.controls = controls
        self.display = Display(source.labels, source.tick_s)
        self.recorder: Recorder | None = None
        self.recorded = 0  # rows of the current recording (the last one, once it ended)
        self.taken = 0  # ticks taken from the source
        self.received = 0  # ticks moved to the recording and the display
        #: ticks run that never arrived and no gap between arrived rows accounts for (lost
        #: at the stream's start or end), known once ``drain`` has waited for them
        self.unaccounted = 0
        self.last_recording: Path | None = None
        self.error = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._queue: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()
        #: ticks queued (taken, not yet moved) may reach this before the pump waits
        self.backlog_limit = max(2 * CHUNK, int(BACKLOG_S / source.tick_s))
        self._room = threading.Condition()
        #: ticks the program had run before the scope (not streamed or traced)
        self.base = source.ticks_run()
        if record is not None:
            self.start_recording(record)
        self._thread = threading.Thread(target=self._pump, name="copapy-scope", daemon=True)
        self._sink = threading.Thread(target=self._drain_queue, name="copapy-scope-sink",
                                      daemon=True)
        self._sink.start()
        self._thread.start()

    def _pump(self) -> None:
        while not self._stop.is_set():
            try:
                batch = self.source.poll()
            except Exception as exc:  # the banner shows it; the thread must not die silently
                self.error = f"{type(exc).__name__}: {exc}"
                time.sleep(0.1)
                continue
            if batch is not None and len(batch):
                with self._room:
                    while (self.taken - self.received > self.backlog_limit
                           and not self._stop.is_set()):
                        self._room.wait(0.1)
                    self.taken += len(batch)
                self._queue.put(batch)
        self._queue.put(None)  # the sink ends after the batches before this

    def _drain_queue(self) -> None:
        while (batch := self._queue.get()) is not None:
            try:
                self._move(batch)
            except Exception as exc:  # as in _pump: said on the banner, the thread goes on
                self.error = f"{type(exc).__name__}: {exc}"
            with self._room:
                self._room.notify_all()

    def _move(self, batch: Batch) -> None:
        with self._lock:
            try:
                if self.recorder is not None:
                    self.recorder.add(batch)
                    self.recorded += len(batch)
            finally:  # a failed write (said on the banner) must not hold the pump back
                self.received += len(batch)
        self.display.add(batch)

    def status(self) -> Status:
        """The source's state; while running or stopped, the scope's error and the ticks
        lost from the stream (loudly: the recording has gaps, marked in its rows)."""
        status = self.source.status()
        if status.state not in ("running", "stopped"):
            return status
        lost = self.lost()
        detail = [self.error] if self.error else []
        if lost:
            detail.append(f"{lost} ticks lost from the stream (the recording marks them in "
                          f"lost_before)")
        return Status(status.state, "; ".join(detail)) if detail else status

    def lost(self) -> int:
        """Ticks the target ran and the scope will never get: the gaps between the rows it
        took, and those missing at the stream's ends (known after ``drain``)."""
        return self.source.gaps() + self.unaccounted

    def write(self, key: Any, value: float | int | bool) -> None:
        self.source.write(key, value)

    def start(self) -> None:
        self.source.start()

    def stop(self) -> None:
        self.source.stop()

    @property
    def recording(self) -> Path | None:
        return self.recorder.path if self.recorder is not None else None

    def start_recording(self, path: str | Path) -> Path:
        recorder = Recorder(path, self.display.labels, self.source.tick_s)
        with self._lock:
            old, self.recorder = self.recorder, recorder
            self.recorded = 0
        if old is not None:
            old.close()
        return recorder.path

    def stop_recording(self) -> Path | None:
        with self._lock:
            old, self.recorder = self.recorder, None
        if old is not None:
            old.close()
            self.last_recording = old.path
        return self.last_recording

    def drain(self, timeout: float = 5.0) -> int:
        """Wait until the source has delivered every tick run since the scope opened (all of
        them, once the program is stopped), up to ``timeout`` s; those ticks. Ticks still
        missing then, beyond the gaps already counted, are counted lost (``unaccounted``)."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.source.ticks_run() - self.base
            if self.received >= run:
                return run
            if time.monotonic() > deadline:
                self.unaccounted = max(0, run - self.received - self.source.gaps())
                return run
            time.sleep(0.05)

    def close(self) -> None:
        """Stop taking; the batches taken still go to the recording, which then closes."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self._thread.is_alive():  # a source stuck in a request: end the sink anyway
            self._queue.put(None)
        self._sink.join(timeout=30)
        self.stop_recording()
        self.source.close()
