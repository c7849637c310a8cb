"""The scope's parts without a browser: the recording keeps every tick in CSV and Parquet,
the display decimates by a fixed stride across batches and keeps a bounded window, and the
entry points name what is wrong (no deploy, a range for no control, a bad --control)."""

from __future__ import annotations

import csv
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import copapy as cp
from copapy import cli
from copapy.cli_scope import parse_control
from copapy.scope import controls_of
from copapy.scope.core import Core
from copapy.scope.display import Display
from copapy.scope.record import Recorder
from copapy.scope.sources import Batch, Signal, Status, _Rows


def batches(sizes: list[int], first: int = 0) -> list[Batch]:
    out, t = [], first
    for n in sizes:
        ticks = np.arange(t, t + n, dtype=np.int64)
        out.append(Batch(ticks, {"a": ticks * 0.5, "b[0]": -ticks.astype(np.float64)}))
        t += n
    return out


@given(st.lists(st.integers(1, 300), min_size=1, max_size=8))
def test_the_display_keeps_every_kth_tick_across_batches(sizes: list[int]) -> None:
    d = Display(["a", "b[0]"], tick_s=1e-3, rate=200.0, window=1.0)  # stride 5, 200 points
    for b in batches(sizes):
        d.add(b)
    total = sum(sizes)
    _, data = d.since(0)
    expected = np.arange(0, total, 5)[-d.capacity:]
    np.testing.assert_allclose(data["time"], expected * 1e-3)
    np.testing.assert_array_equal(data["a"], expected * 0.5)
    assert d.latest["a"] == (total - 1) * 0.5


def test_the_display_hands_each_page_only_what_is_new() -> None:
    d = Display(["a", "b[0]"], tick_s=1e-3, rate=1000.0, window=0.05)  # stride 1, 50 points
    first, second = batches([30, 40])
    d.add(first)
    index, data = d.since(0)
    assert index == 30 and len(data["a"]) == 30
    d.add(second)
    index, data = d.since(index)
    assert index == 70 and list(data["a"]) == [t * 0.5 for t in range(30, 70)]
    _, data = d.since(0)  # dropped points: what is kept
    assert len(data["a"]) == 50 and data["a"][0] == 20 * 0.5


def test_a_csv_recording_keeps_every_tick(tmp_path: Path) -> None:
    r = Recorder(tmp_path / "r.csv", ["a", "b[0]"], tick_s=1e-3)
    for b in batches([7, 1, 300]):
        r.add(b)
    r.close()
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert r.rows == len(rows) == 308
    assert [int(x["tick"]) for x in rows] == list(range(308))
    assert float(rows[-1]["time_s"]) == pytest.approx(0.307)
    assert float(rows[5]["a"]) == 2.5 and float(rows[5]["b[0]"]) == -5.0


def test_a_parquet_recording_keeps_every_tick(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")  # optional: Parquet only with pyarrow
    r = Recorder(tmp_path / "r.parquet", ["a", "b[0]"], tick_s=1e-3)
    for b in batches([7, 1, 300]):
        r.add(b)
    r.close()
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.num_rows == 308 and table.column("tick").to_pylist() == list(range(308))


def test_parquet_without_pyarrow_names_the_fix(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from copapy.scope import record

    monkeypatch.setattr(record, "parquet_available", lambda: False)
    with pytest.raises(ValueError, match="pip install pyarrow"):
        Recorder(tmp_path / "r.parquet", ["a"], tick_s=1e-3)
    assert record.formats() == ["csv"]


def test_scope_needs_deployed_tasks_and_ranges_of_its_controls() -> None:
    tg = cp.LocalTarget(tick=1e-3)
    with pytest.raises(cp.TargetError, match="no tasks deployed"):
        tg.scope("x")
    gain = cp.value(0.5, name="gain")
    out = gain * 2.0
    tg.deploy(cp.Task(out, period=1e-3))
    with pytest.raises(ValueError, match=r"ranges name \['speed'\]"):
        tg.scope(out=out, controls={"gain": gain}, ranges={"speed": (0, 1)})
    with pytest.raises(ValueError, match="needs the signals"):
        tg.scope()


@pytest.mark.parametrize("text, message", [
    ("gain=2:1", "LO must be below HI"), ("gain=2", "the range is LO:HI"),
    ("gain=a:b", "the range is LO:HI")])
def test_a_bad_control_range_is_named(text: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        parse_control(text)
    assert parse_control("gain=-1:2.5") == ("gain", (-1.0, 2.5))
    assert parse_control("gain") == ("gain", None)


def test_copapy_scope_of_a_runner_needs_its_program(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    with pytest.raises(SystemExit, match="name the program it runs with --image"):
        cli.main(["scope", "/dev/pts/999", "--no-browser"])


def test_a_declared_input_range_makes_a_slider() -> None:
    """cp.value(x, range=(lo, hi)) (issue 35) gives the control its slider range; an input
    declared without one gets a number field; ranges= overrides."""
    declared: dict[str, Any] = {"range": (0.0, 2.0)}
    try:
        gain = cp.value(0.5, name="gain", **declared)
    except TypeError:
        pytest.skip("this tree has no input range declarations (cp.value(range=), issue 35)")
    offset, n = cp.value(0.0, name="offset"), cp.value(3, name="n")
    out = gain * 3.0 + offset + cp.cast(n, cp.float32)
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(cp.Task(out, period=1e-3))
    found = {c.label: (c.kind, c.lo, c.hi) for c in controls_of(
        tg, {"gain": gain, "offset": offset, "n": n}, {"offset": (-1.0, 1.0)})}
    assert found == {"gain": ("slider", 0.0, 2.0), "offset": ("slider", -1.0, 1.0),
                     "n": ("field", None, None)}


class _FakeTrace:
    """A stream trace that holds the rows of some ticks (``time`` and ``trace[key]``)."""

    def __init__(self) -> None:
        self.ticks = np.zeros(0, np.int64)

    @property
    def time(self) -> Any:
        return self.ticks * 1e-3

    def __getitem__(self, key: Any) -> Any:
        return self.ticks * 0.5


@given(st.lists(st.booleans(), min_size=1, max_size=400), st.integers(1, 50))
def test_ticks_missing_from_a_stream_are_counted_and_marked_in_the_recording(
        delivered: list[bool], reads: int) -> None:
    """Ticks the link lost (never delivered) are counted by the source and each recorded row
    says how many were lost right before it: rows + marks = ticks from the first delivered
    to the last, whatever the reads' split."""
    ticks = np.flatnonzero(delivered).astype(np.int64)
    trace = _FakeTrace()
    rows = _Rows(trace, [Signal("a", "a")], tick_s=1e-3)
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(Path(tmp) / "r.csv", ["a"], tick_s=1e-3)
        for cut in np.linspace(0, len(ticks), reads + 1).astype(int)[1:]:
            trace.ticks = ticks[:cut]
            batch = rows.take()
            if batch is not None:
                rec.add(batch)
        rec.close()
        out = list(csv.DictReader(open(Path(tmp) / "r.csv")))
    if not len(ticks):
        assert out == [] and rows.gaps == 0
        return
    missing = int(ticks[-1] - ticks[0] + 1 - len(ticks))
    assert rows.gaps == rec.lost == missing
    assert [int(r["tick"]) for r in out] == ticks.tolist()
    marks = [int(r["lost_before"]) for r in out]
    assert marks == [0, *(np.diff(ticks) - 1).tolist()]
    assert [float(r["a"]) for r in out] == (ticks * 0.5).tolist()


def test_a_parquet_recording_marks_lost_ticks(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")  # optional: Parquet only with pyarrow
    r = Recorder(tmp_path / "r.parquet", ["a"], tick_s=1e-3)
    ticks = np.array([0, 1, 5, 6, 9], np.int64)
    r.add(Batch(ticks, {"a": ticks * 0.5}, np.array([0, 0, 3, 0, 2], np.int64)))
    r.close()
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.column("lost_before").to_pylist() == [0, 0, 3, 0, 2] and r.lost == 5


class _ListSource:
    """A source that delivered some of the ticks a stopped program ran (one batch)."""

    def __init__(self, delivered: list[int], ran: int) -> None:
        self.labels, self.tick_s = ["a"], 1e-3
        self.rows = _Rows(_FakeTrace(), [Signal("a", "a")], self.tick_s)
        self.rows.trace.ticks = np.array(delivered, np.int64)
        self.ran, self.base_read = ran, False

    def poll(self) -> Batch | None:
        time.sleep(0.01)
        return self.rows.take()

    def ticks_run(self) -> int:
        ran = self.ran if self.base_read else 0  # the scope opened before the program ran
        self.base_read = True
        return ran

    def gaps(self) -> int:
        return self.rows.gaps

    def status(self) -> Status:
        return Status("stopped")

    def write(self, key: Any, value: float | int | bool) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...


@pytest.mark.parametrize("delivered", [list(range(3, 97)), [*range(0, 40), *range(45, 95)]],
                         ids=["ends", "gap-and-end"])
def test_ticks_lost_at_the_stream_ends_are_counted_after_the_drain(delivered: list[int]
                                                                   ) -> None:
    """Ticks lost before the first row or after the last one (no gap between rows shows
    them) are counted once the drain gave up waiting for them: lost = run - received, said
    on the banner."""
    core = Core(_ListSource(delivered, 100), [])
    try:
        assert core.drain(timeout=0.5) == 100
        assert core.received == len(delivered)
        assert f"{100 - len(delivered)} ticks lost" in core.status().detail
        assert core.lost() == 100 - len(delivered)
    finally:
        core.close()


class _FastSource(_ListSource):
    """A source that has 1 000 new ticks at every poll (a LocalTarget stepped as fast as it
    runs)."""

    def __init__(self) -> None:
        super().__init__([], 0)
        self.next = 0

    def poll(self) -> Batch | None:
        ticks = np.arange(self.next, self.next + 1000, dtype=np.int64)
        self.next += 1000
        return Batch(ticks, {"a": ticks * 0.5})


def test_a_slow_recording_holds_a_fast_source_back(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks taken but not yet recorded stay within the backlog limit (memory stays bounded),
    and every tick taken is recorded in order once the scope closes."""
    add = Recorder.add

    def slow_add(self: Recorder, batch: Batch) -> None:
        time.sleep(0.01)
        add(self, batch)

    monkeypatch.setattr(Recorder, "add", slow_add)
    core = Core(_FastSource(), [], tmp_path / "r.csv")
    try:
        behind = []
        for _ in range(20):
            time.sleep(0.05)
            behind.append(core.taken - core.received)
        assert max(behind) <= core.backlog_limit + 1000, (behind, core.backlog_limit)
    finally:
        core.close()
    ticks = np.loadtxt(tmp_path / "r.csv", delimiter=",", skiprows=1)[:, 0]
    assert len(ticks) == core.taken == core.received
    assert (ticks == np.arange(len(ticks))).all()
