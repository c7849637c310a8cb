"""SerialTarget() finds the runner on USB by its ids; `copapy flash` wraps teensy_loader_cli."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from serial.tools import list_ports_common

from copapy import cli
from copapy.serial import usb
from copapy.serial_target import SerialTarget, SerialTargetError


def fake_port(device: str, vid: int | None, pid: int | None,
              product: str | None) -> list_ports_common.ListPortInfo:
    info = list_ports_common.ListPortInfo(device)
    info.vid, info.pid, info.product, info.serial_number = vid, pid, product, "1234"
    return info


def use_ports(monkeypatch: pytest.MonkeyPatch, ports: list[Any]) -> None:
    monkeypatch.setattr("serial.tools.list_ports.comports", lambda *a, **k: ports)


def test_finds_the_one_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    use_ports(monkeypatch, [
        fake_port("/dev/ttyS0", None, None, None),                 # no USB
        fake_port("/dev/ttyACM0", 0x16C0, 0x0483, "USB Serial"),   # a Teensyduino sketch
        fake_port("/dev/ttyACM1", 0x2FE3, 0x0100, "Zephyr shell"),  # another Zephyr device
        fake_port("/dev/ttyACM2", 0x2FE3, 0x0100, "copapy runner"),
    ])
    assert usb.find_runner() == "/dev/ttyACM2"
    # the product string may be unknown (some platforms): the ids decide
    use_ports(monkeypatch, [fake_port("COM7", 0x2FE3, 0x0100, None)])
    assert usb.find_runner() == "COM7"
    use_ports(monkeypatch, [fake_port("/dev/ttyACM5", 0x1209, 0x0001, "my board")])
    assert usb.find_runner([(0x1209, 0x0001)]) == "/dev/ttyACM5"


def test_none_or_several_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    use_ports(monkeypatch, [fake_port("/dev/ttyACM0", 0x16C0, 0x0483, "USB Serial")])
    with pytest.raises(SerialTargetError, match=r"no copapy runner on USB .*2fe3:0100.*"
                                                r"/dev/ttyACM0 \(16c0:0483"):
        SerialTarget()
    use_ports(monkeypatch, [fake_port("/dev/ttyACM0", 0x2FE3, 0x0100, "copapy runner"),
                            fake_port("/dev/ttyACM1", 0x2FE3, 0x0100, "copapy runner")])
    with pytest.raises(SerialTargetError, match=r"2 copapy runners on USB.*pass the port"):
        SerialTarget()


def test_connects_to_the_port_it_found(monkeypatch: pytest.MonkeyPatch) -> None:
    from .runners import host_runner

    with host_runner() as (pty, _proc):
        use_ports(monkeypatch, [fake_port(pty, 0x2FE3, 0x0100, "copapy runner")])
        with SerialTarget() as tg:
            assert tg.info().arch == "x86_64"


def fake_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int = 0) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "argv"
    exe = bindir / usb.TEENSY_LOADER
    exe.write_text(f"#!/bin/sh\necho \"$@\" > {log}\necho 'Programming.....'\nexit {status}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_flash_runs_teensy_loader_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    log = fake_loader(tmp_path, monkeypatch)
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    assert cli.main(["flash", str(hex_file)]) == 0
    assert log.read_text().split() == ["--mcu=TEENSY41", "-v", "-w", str(hex_file)]
    assert "Programming" in capfd.readouterr().out  # its progress reaches the terminal
    assert cli.main(["flash", "--soft-reboot", "--no-wait", str(hex_file)]) == 0
    assert log.read_text().split() == ["--mcu=TEENSY41", "-v", "-s", str(hex_file)]


def test_flash_errors_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capfd: pytest.CaptureFixture[str]) -> None:
    hex_file = tmp_path / "zephyr.hex"
    hex_file.write_text(":00000001FF\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SystemExit, match="teensy_loader_cli is not installed: apt-get install "
                                         "teensy-loader-cli"):
        cli.main(["flash", str(hex_file)])
    elf = tmp_path / "zephyr.elf"
    elf.write_bytes(b"\x7fELF")
    with pytest.raises(SystemExit, match=r"no Intel hex file: flash build/zephyr/zephyr\.hex"):
        cli.main(["flash", str(elf)])
    with pytest.raises(SystemExit, match="does not exist"):
        cli.main(["flash", str(tmp_path / "missing.hex")])
    fake_loader(tmp_path, monkeypatch, status=1)
    assert cli.main(["flash", str(hex_file)]) == 1
    assert "teensy_loader_cli failed (exit status 1)" in capfd.readouterr().err
