"""The live scope in a real browser (headless Chromium driven by Selenium): the page needs its
token, plots values that advance, its controls write inputs that the program's output
follows, start/stop work, a recording from the page keeps every tick, and the banner shows
FAULTED after an injected fault — on LocalTarget, the host runner and (with ZEPHYR_BASE) the
Zephyr firmware in qemu."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import copapy as cp
from copapy.runtime import load as loader
from copapy.runtime import native
from copapy.runtime.load import host_architecture

from .support import browser as br
from .support import zephyr_runners as zr
from .support.faults import SNIPPETS, FaultWaiter, deploy_faulty, inject
from .support.runners import runner_process

HOST = host_architecture()
ROOT = Path(__file__).resolve().parents[1]
RANGES = {"gain": (0.0, 2.0)}


def program(faulty: bool = False) -> tuple[list[cp.Task], dict[str, Any], dict[str, Any]]:
    """(tasks, signals, controls): ``count`` advances every tick, ``out = 3 gain + offset``
    follows the controls; with ``faulty`` a second task (``victim``, first released at 0.3 s)
    is the one whose code fault injection replaces."""
    gain, offset = cp.value(0.5, name="gain"), cp.value(0.0, name="offset")
    count = cp.feedback(lambda n: n + 1.0, init=0.0)
    out = gain * 3.0 + offset
    tasks = [cp.Task(count, out, period=1e-3, name="loop")]
    if faulty:
        tasks.append(cp.Task(cp.sin(gain) * 2.0, period=0.5, offset=0.3, priority=1,
                             name="victim"))
    return tasks, {"count": count, "out": out}, {"gain": gain, "offset": offset}


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with br.chromium() as d:
        yield d


def open_scope(tg: Any, signals: dict[str, Any], controls: dict[str, Any], **kw: Any) -> Any:
    return tg.scope(controls=controls, ranges=RANGES, **signals, **kw)


def check_live_page(d: Any, scope: Any, started: bool = True, page_record: bool = True
                    ) -> None:
    """Values advance, the slider and the number field write inputs the output follows,
    stop and start work, a recording from the page holds consecutive ticks (``page_record``;
    else the scope records from its start, which the page's button would end)."""
    br.open_page(d, scope.url)
    if not started:
        assert br.wait_for("banner 'stopped'", lambda: br.banner(d) == "stopped")
        br.element(d, "start", "button").click()
    assert br.wait_for("banner 'running'", lambda: br.banner(d) == "running")
    first = br.wait_for("points plotted", lambda: br.plotted(d, "count")[1] >= 0 and
                        br.plotted(d, "count"))
    br.wait_for("plotted time advancing", lambda: br.plotted(d, "count")[1] > first[1] + 0.2)
    c0 = br.latest(d)["count"]
    br.wait_for("count advancing", lambda: br.latest(d)["count"] > c0 + 100)
    assert br.latest(d)["out"] == pytest.approx(1.5)

    gain = br.drag_slider(d, "control-gain", 90)
    assert 0.5 < gain <= 2.0, gain
    br.wait_for(f"out following gain {gain}",
                lambda: br.latest(d)["out"] == pytest.approx(3 * gain, rel=1e-5))
    br.type_into(d, "control-offset", "2.5")
    br.wait_for("out following offset 2.5",
                lambda: br.latest(d)["out"] == pytest.approx(3 * gain + 2.5, rel=1e-5))

    br.element(d, "stop", "button").click()
    br.wait_for("banner 'stopped'", lambda: br.banner(d) == "stopped")
    held = br.wait_for("count holding", lambda: _holds(d))
    br.element(d, "start", "button").click()
    br.wait_for("count advancing after start", lambda: br.latest(d)["count"] > held + 50)
    if page_record:
        check_page_recording(d, scope)


def check_page_recording(d: Any, scope: Any) -> None:
    br.element(d, "record", "button").click()
    br.wait_for("recording", lambda: "recorded" in br.model(d, "info", "text")
                and " to " in br.model(d, "info", "text"))
    time.sleep(0.5)
    br.element(d, "record", "button").click()
    path = Path(br.wait_for("recording finished", lambda: scope.core.last_recording))
    with open(path) as f:
        rows = list(csv.DictReader(f))
    ticks = np.array([int(r["tick"]) for r in rows])
    assert len(ticks) > 100 and (np.diff(ticks) == 1).all(), "the recording skipped ticks"
    assert set(rows[0]) == {"tick", "time_s", "count", "out", "lost_before"}
    assert all(r["lost_before"] == "0" for r in rows)


def _holds(d: Any) -> float | None:
    a = br.latest(d)["count"]
    time.sleep(0.4)
    return a if br.latest(d)["count"] == a else None


def check_faulted(d: Any, scope: Any, kind: str) -> None:
    br.open_page(d, scope.url)
    text = br.wait_for("the FAULTED banner", lambda: br.banner(d).startswith("FAULTED")
                       and br.banner(d))
    assert kind in text and "task 1 (victim)" in text, text


def websocket_refused(base: str) -> int:
    """The close code the server answers a websocket without the token with (Bokeh checks
    the user after the handshake, so the socket opens and is closed at once)."""
    host, port = base.split("//")[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
                  f"dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://{host}:{port}\r\n\r\n"
                  .encode())
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 4:
            more = s.recv(4096)
            assert more, f"connection closed without a close frame: {data!r}"
            data += more
        head, frame = data.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert frame[0] == 0x88, f"not a close frame: {frame!r}"  # FIN + close
        return int.from_bytes(frame[2:4], "big")


def test_the_page_needs_its_token(tmp_path: Path, driver: Any) -> None:
    tasks, signals, controls = program()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(*tasks)
    with open_scope(tg, signals, controls) as scope:
        base, token = scope.url.split("?token=")
        for url in (base, f"{base}?token=x{token}"):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(url)
            assert info.value.code == 403, url
        assert websocket_refused(base) == 1008  # closed at once: policy violation
        assert urllib.request.urlopen(scope.url).status == 200
        assert scope.url.startswith("http://127.0.0.1:") and len(token) >= 32
        driver.get(base)
        assert "refused" in driver.page_source and "token" in driver.page_source
        assert scope.url in scope._repr_html_()  # what a Jupyter cell shows


def test_local_target_live_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                driver: Any) -> None:
    monkeypatch.chdir(tmp_path)  # recordings started from the page go here
    tasks, signals, controls = program()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(*tasks)
    with open_scope(tg, signals, controls) as scope:
        check_live_page(driver, scope)
        br.screenshot(driver, tmp_path / "scope.png")
    assert (tmp_path / "scope.png").stat().st_size > 10_000


@pytest.mark.parametrize("realtime", [True, False])
def test_local_target_records_every_tick(tmp_path: Path, realtime: bool) -> None:
    """recorded ticks = ticks run, paced or as fast as it runs; the values are the
    program's (count = tick, as LET publishes it)."""
    tasks, signals, controls = program()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(*tasks)
    with open_scope(tg, signals, controls, record=tmp_path / "all.csv",
                    realtime=realtime) as scope:
        br.wait_for("ticks", lambda: scope.core.received > 1500)
        scope.core.stop()
        run = scope.core.drain()
        recorded = scope.recorded
    assert recorded == run >= 1500, "recorded ticks = ticks run"
    table = np.loadtxt(tmp_path / "all.csv", delimiter=",", skiprows=1)
    assert len(table) == run
    np.testing.assert_array_equal(table[:, 0], np.arange(run))
    np.testing.assert_array_equal(table[:, 2], np.arange(run))  # LET: the last period's


@pytest.fixture
def fast_watchdog() -> Iterator[None]:
    native.set_watchdog(10, 0.0, 0.2)
    yield
    native.set_watchdog()


def test_local_target_faulted_banner(monkeypatch: pytest.MonkeyPatch, driver: Any,
                                     fast_watchdog: None) -> None:
    real = native.load_native
    monkeypatch.setattr(loader, "load_native", lambda image, own_code=False: real(
        inject(image, 1, "SIGSEGV", HOST), own_code=False, allow_code=True))
    tasks, signals, controls = program(faulty=True)
    tg = cp.LocalTarget(HOST, tick=1e-3)  # the snippets overwrite this table's code
    tg.deploy(*tasks)
    with open_scope(tg, signals, controls) as scope:
        check_faulted(driver, scope, "SIGSEGV")


def runner_scenario(d: Any, address: str, arch_kind: str, key: bytes | None = None) -> None:
    """The live page, then FAULTED after a faulty upload, on the runner at ``address``."""
    with cp.SerialTarget(address, key=key) as tg:
        tasks, signals, controls = program()
        tg.deploy(*tasks)  # stopped: the page's start button starts it
        with open_scope(tg, signals, controls, record="all.csv") as scope:
            check_live_page(d, scope, started=False, page_record=False)
            tg.stop()
            run = scope.core.drain()
            recorded = scope.recorded
        assert recorded == run > 500, "recorded ticks = ticks run"
        ticks = np.loadtxt("all.csv", delimiter=",", skiprows=1, usecols=0)
        assert len(ticks) == run and (np.diff(ticks) == 1).all()
        tasks, signals, controls = program(faulty=True)
        waiter = FaultWaiter(tg)
        deploy_faulty(tg, tasks, 1, arch_kind, tg.arch)
        with open_scope(tg, signals, controls) as scope:
            tg.start()
            waiter.wait(10)
            check_faulted(d, scope, arch_kind)


def test_host_runner_live_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               driver: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with runner_process("--pty", "--no-rt") as (address, proc):
        runner_scenario(driver, address, "SIGSEGV")
        tasks, signals, controls = program()
        with cp.SerialTarget(address) as tg:
            tg.deploy(*tasks, start=True)
            with open_scope(tg, signals, controls) as scope:
                br.open_page(driver, scope.url)
                br.wait_for("banner 'running'", lambda: br.banner(driver) == "running")
                proc.kill()  # the runner goes away
                br.wait_for("banner 'link lost'",
                            lambda: br.banner(driver).startswith("link lost"))


@pytest.mark.firmware
def test_zephyr_firmware_live_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   driver: Any) -> None:
    zr.require_zephyr()
    monkeypatch.chdir(tmp_path)
    with zr.qemu_runner() as address:
        kind = "UsageFault" if "UsageFault" in SNIPPETS.get("cortex-m7", {}) else "HardFault"
        runner_scenario(driver, address, kind)


def test_bench_scope_records_every_tick(tmp_path: Path) -> None:
    """benchmarks/bench_scope.py keeps working (a few seconds instead of 10 minutes): every
    tick the runner ran is recorded, none missing from the stream, the page updates."""
    out = tmp_path / "scope.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(cp.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scope.py"),
                           "--seconds", "3", "--json", str(out)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["recorded"] == result["ticks_run"] >= 2500 and result["gaps"] == 0
    assert result["page_updates_per_s"] > 0 and result["jitter_with_scope"]["ticks"] > 0
    assert "recorded ticks" in proc.stdout and "jitter ratio" in proc.stdout


def test_copapy_scope_on_a_runner_records_every_tick(tmp_path: Path) -> None:
    """``copapy scope PORT --image F --record run.csv``: uploads and starts the program, serves
    the page (its URL printed), and records consecutive ticks until it closes."""
    tasks, _signals, _controls = program()
    tg = cp.LocalTarget(tick=1e-3)
    tg.deploy(*tasks)
    tg.save(str(tmp_path / "prog.cpimg"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(cp.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    with runner_process("--pty", "--no-rt") as (address, _proc):
        proc = subprocess.run([sys.executable, "-m", "copapy", "scope", address, "--image",
                               str(tmp_path / "prog.cpimg"), "--control", "gain=0:2",
                               "--record", str(tmp_path / "run.csv"), "--seconds", "2",
                               "--no-browser"], capture_output=True, text=True, env=env,
                              timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "copapy scope: http://127.0.0.1:" in proc.stdout and "?token=" in proc.stdout
    table = np.loadtxt(tmp_path / "run.csv", delimiter=",", skiprows=1)
    assert len(table) > 1000 and (np.diff(table[:, 0]) == 1).all()
    outputs = cp.load(str(tmp_path / "prog.cpimg")).names("output")
    assert open(tmp_path / "run.csv").readline().strip() == ",".join(
        ["tick", "time_s", *outputs, "lost_before"])
    assert (table[:, -1] == 0).all()  # no tick lost
    assert f"recorded {len(table)} ticks" in proc.stderr
