"""A copapy program as a ros2_control controller (README.md beside this file).

The controller package ``copapy_ros2_control`` (``package/`` beside this file: C++, CMake,
package.xml) holds two ``controller_interface::ControllerInterface`` plugins:
``CopapyController`` runs a saved copapy image through libcopapy in ``update()``;
``PassthroughController`` is the trivial controller of the same shape. This module

* finds a ROS 2 + ros2_control install (``COPAPY_ROS2_SETUP``: a script to source),
* builds the package in a colcon workspace outside the repository (:func:`build_package`),
* runs a controller in the real ``controller_manager`` (``ros2_control_node`` with
  mock_components/GenericSystem) and collects its record and the wake-up latencies of the
  node's loop (:func:`run_controller_manager`),
* and, without ROS, runs the same controller code in a loop that reproduces
  ``ros2_control_node``'s timing (:func:`run_emulated`).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cppyy_tools import Built, build_shared, import_cppyy, load_kit, nogil
from ..errors import KitError
from ..paths import KIT_SOURCES, include_dir, kit_include_dir, library_path

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from ..._lazy import numpy as np

__all__ = ["ControllerRun", "build_package", "package_dir", "ros2_setup", "run_controller_manager",
           "run_emulated", "skip_reason"]

DOC = "docs/kits.md"
PACKAGE = "copapy_ros2_control"


def package_dir() -> Path:
    """The controller package's source directory (a colcon workspace's src/ links to it)."""
    return KIT_SOURCES / "ros2_control" / "package" / PACKAGE


def ros2_setup() -> Path | None:
    """The script that sets up ROS 2 + ros2_control ($COPAPY_ROS2_SETUP), if it exists."""
    env = os.environ.get("COPAPY_ROS2_SETUP")
    return Path(env) if env and Path(env).is_file() else None


def skip_reason() -> str:
    return (f"no ROS 2 + ros2_control install (set COPAPY_ROS2_SETUP to its setup script): "
            f"see {DOC}")


def _ros_bash(command: str, *, extra_prefix: Path | None = None, env: dict[str, str] | None = None,
              **kw: Any) -> subprocess.CompletedProcess[str]:
    setup = ros2_setup()
    if setup is None:
        raise KitError(skip_reason())
    e = dict(os.environ if env is None else env)
    if extra_prefix is not None:
        e["COPAPY_ROS2_EXTRA_PREFIX"] = str(extra_prefix)
    return subprocess.run(["bash", "-c", f". {shlex.quote(str(setup))} && {command}"], env=e,
                          text=True, **kw)


def default_workspace() -> Path:
    """$COPAPY_ROS2_WS, else ~/.cache/copapy/ros2_ws (outside any checkout)."""
    env = os.environ.get("COPAPY_ROS2_WS")
    return Path(env) if env else Path.home() / ".cache" / "copapy" / "ros2_ws"


def build_package(workspace: Path | None = None) -> Path:
    """colcon-builds copapy_ros2_control (linked into ``workspace``/src) against this copapy's
    libcopapy; returns the merged install prefix (for COPAPY_ROS2_EXTRA_PREFIX). Incremental:
    a rebuild with nothing changed takes seconds."""
    ws = workspace or default_workspace()
    src = ws / "src"
    src.mkdir(parents=True, exist_ok=True)
    link = src / PACKAGE
    if link.is_symlink() or link.exists():
        if link.resolve() != package_dir().resolve():
            if link.is_symlink():
                link.unlink()
            else:
                shutil.rmtree(link)
    if not link.exists():
        link.symlink_to(package_dir(), target_is_directory=True)
    args = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF",
            f"-DCOPAPY_LIBRARY={library_path()}", f"-DCOPAPY_INCLUDE_DIR={include_dir()}"]
    cmd = (f"cd {shlex.quote(str(ws))} && nice -n 10 colcon build --merge-install "
           f"--packages-select {PACKAGE} --cmake-args {shlex.join(args)}")
    proc = _ros_bash(cmd, capture_output=True)
    if proc.returncode != 0:
        raise KitError(f"colcon build of {PACKAGE} failed:\n{proc.stdout[-4000:]}\n"
                       f"{proc.stderr[-4000:]}")
    return ws / "install"


@dataclass
class ControllerRun:
    """What one controller run gives: its per-cycle record (states, commands, the monotonic
    time and exec time of each update), the loop's wake-up latencies (ns) and the log."""

    controller: str
    latencies_ns: NDArray[np.int64]
    t_mono_ns: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    period_ns: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    exec_ns: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    states: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    commands: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 0)))
    fifo: bool = False
    real: bool = False
    log: str = ""
    updates: int = 0
    #: the copapy program's fault ("" if none): the runner core's guard caught it, the
    #: controller went on commanding the safe values
    fault: str = ""


def read_record(path: Path, run: ControllerRun) -> None:
    """Parses a controller record (CSV, doubles as C99 hex floats) into ``run``."""
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    ns = sum(1 for h in header if h.startswith("s"))
    rows = [line.split(",") for line in lines[1:] if line]
    run.t_mono_ns = np.array([int(r[1]) for r in rows], dtype=np.int64)
    run.period_ns = np.array([int(r[2]) for r in rows], dtype=np.int64)
    run.exec_ns = np.array([int(r[3]) for r in rows], dtype=np.int64)
    values = np.array([[float.fromhex(v) for v in r[4:]] for r in rows]).reshape(len(rows), -1)
    run.states, run.commands = values[:, :ns], values[:, ns:]
    run.updates = len(rows)


# ---- without ROS: the emulated ros2_control_node loop --------------------------------------

_emulation_lock = threading.Lock()
_emulation: Built | None = None


def emulation_kit() -> Any:
    """cppyy's copapy_kit namespace with Ros2ControlEmulation (compiled once, cached)."""
    global _emulation
    with _emulation_lock:
        if _emulation is None:
            _emulation = load_kit(
                "copapy_ros2_emulation", ["copapy_kit/ros2_control_emulation.hpp"],
                [KIT_SOURCES / "cpp" / "ros2_control_emulation.cpp"],
                include_dirs=[kit_include_dir(), package_dir() / "include"])
            nogil(import_cppyy().gbl.copapy_kit.Ros2ControlEmulation.run)
        return import_cppyy().gbl.copapy_kit


def run_emulated(joints: int, cycles: int, *, image: Path | None = None,
                 state_ports: list[str] | None = None, command_ports: list[str] | None = None,
                 update_rate: int = 1000, thread_priority: int = 50, lock_memory: bool = True,
                 gain: float = 0.01, target: float = 1.0, record: bool = True,
                 allow_code: bool = False) -> ControllerRun:
    """The copapy controller (``image`` given) or the trivial one, in the loop that reproduces
    ros2_control_node's timing, on a mock system of ``joints`` position joints. ``allow_code``:
    also a format-1 image, which carries machine code (fault-containment tests only)."""
    k = emulation_kit()
    emu = k.Ros2ControlEmulation(joints, 0.0)
    if image is not None:
        if not emu.use_copapy(str(image), ",".join(state_ports or []),
                              ",".join(command_ports or []), 1_000_000_000 // update_rate,
                              allow_code):
            raise KitError(str(emu.error()))
        name = "copapy"
    else:
        emu.use_passthrough(gain, target)
        name = "passthrough"
    opt = k.Ros2EmulationOptions()
    opt.update_rate, opt.thread_priority = update_rate, thread_priority
    opt.lock_memory = lock_memory
    opt.cycles, opt.record_cycles = cycles, cycles if record else 0
    if emu.run(opt) != 0:
        raise KitError(str(emu.error()))
    lat = np.zeros(cycles, dtype=np.int64)
    got = int(emu.latencies(lat, cycles))
    run = ControllerRun(name, lat[1:got], fifo=int(emu.policy()) == 1,  # the first never slept
                        fault=str(emu.fault()))
    if record:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "record.csv"
            emu.save_record(str(path))
            read_record(path, run)
    return run


# ---- with ROS: the real controller_manager --------------------------------------------------

def sleep_probe() -> Path:
    """The LD_PRELOAD library that records nanosleep wake-up latencies per thread."""
    return build_shared("copapy_sleep_probe", [KIT_SOURCES / "cpp" / "sleep_probe.cpp"],
                        flags=["-ldl"]).path


def read_sleep_probe(path: Path) -> dict[int, NDArray[np.int64]]:
    """Per thread id: an (n, 2) array of (monotonic wake time, wake-up latency) in ns."""
    raw = np.fromfile(path, dtype=np.int64) if path.is_file() else np.zeros(0, np.int64)
    out, at = {}, 0
    while at + 2 <= raw.size:
        tid, n = int(raw[at]), int(raw[at + 1])
        out[tid] = raw[at + 2:at + 2 + 2 * n].reshape(n, 2).copy()
        at += 2 + 2 * n
    return out


def mock_urdf(joints: int) -> str:
    parts = ['<?xml version="1.0"?>', '<robot name="copapy_mock">', '  <link name="world"/>']
    for i in range(joints):
        parent = "world" if i == 0 else f"link{i}"
        parts += [f'  <link name="link{i + 1}"/>',
                  f'  <joint name="joint{i + 1}" type="revolute"><parent link="{parent}"/>'
                  f'<child link="link{i + 1}"/><axis xyz="0 0 1"/>'
                  f'<limit lower="-3" upper="3" effort="100" velocity="100"/></joint>']
    parts.append('  <ros2_control name="MockSystem" type="system">')
    parts.append('    <hardware><plugin>mock_components/GenericSystem</plugin></hardware>')
    for i in range(joints):
        parts += [f'    <joint name="joint{i + 1}"><command_interface name="position"/>'
                  '<state_interface name="position"><param name="initial_value">0.0</param>'
                  '</state_interface></joint>']
    parts += ["  </ros2_control>", "</robot>", ""]
    return "\n".join(parts)


def _yaml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def run_controller_manager(joints: int, seconds: float, *, prefix: Path,
                           image: Path | None = None, state_ports: list[str] | None = None,
                           command_ports: list[str] | None = None,
                           safe_commands: list[float] | None = None, update_rate: int = 1000,
                           thread_priority: int = 50, gain: float = 0.01, target: float = 1.0,
                           workdir: Path | None = None, allow_code: bool = False) -> ControllerRun:
    """Runs ``ros2_control_node`` (mock_components/GenericSystem with ``joints`` position
    joints, ``update_rate`` Hz, ``thread_priority``: 50 = the node's default FIFO priority, 0 =
    SCHED_OTHER) with the copapy controller (``image``; ``safe_commands``: what it commands
    once the program has faulted, default 0) or the trivial one for ``seconds``. ``prefix``:
    the install prefix of copapy_ros2_control (:func:`build_package`). ``allow_code``: also a
    format-1 image, which carries machine code (fault-containment tests only)."""
    node_exe = os.environ.get("COPAPY_ROS2_CONTROL_NODE", "ros2_control_node")
    name = "copapy" if image is not None else "passthrough"
    cycles = int(seconds * update_rate * 1.5) + 1000
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="copapy_ros2_")) if own else workdir
    assert wd is not None
    interfaces_s = [f"joint{i + 1}/position" for i in range(joints)]
    record = wd / f"{name}.csv"
    probe_out = wd / f"{name}.sleeps"
    common = (f"    state_interfaces: {_yaml_list(interfaces_s)}\n"
              f"    command_interfaces: {_yaml_list(interfaces_s)}\n"
              f"    record_path: {json.dumps(str(record))}\n"
              f"    record_cycles: {cycles}\n")
    if image is not None:
        specific = (f"    image: {json.dumps(str(image))}\n"
                    f"    state_ports: {_yaml_list(state_ports or [])}\n"
                    f"    command_ports: {_yaml_list(command_ports or [])}\n")
        if safe_commands:
            specific += f"    safe_commands: {json.dumps([float(v) for v in safe_commands])}\n"
        if allow_code:
            specific += "    allow_code: true\n"
        kind = f"{PACKAGE}/CopapyController"
    else:
        specific = f"    gain: {gain}\n    target: {target}\n"
        kind = f"{PACKAGE}/PassthroughController"
    (wd / "controllers.yaml").write_text(
        "controller_manager:\n  ros__parameters:\n"
        f"    update_rate: {update_rate}\n    lock_memory: true\n"
        f"    thread_priority: {thread_priority}\n"
        f"    {name}:\n      type: {kind}\n\n"
        f"{name}:\n  ros__parameters:\n{common}{specific}")
    (wd / "robot.urdf").write_text(mock_urdf(joints))
    env = dict(os.environ, ROS_DOMAIN_ID=str(random.randint(100, 200)),
               COPAPY_SLEEPPROBE_OUT=str(probe_out),
               COPAPY_SLEEPPROBE_MAX_NS=str(2 * 1_000_000_000 // update_rate))
    probe = sleep_probe()
    node_log = wd / "node.log"
    with open(node_log, "w") as log:
        node = subprocess.Popen(
            ["bash", "-c", f". {shlex.quote(str(ros2_setup()))} && "
             f"LD_PRELOAD={shlex.quote(str(probe))} exec {shlex.quote(node_exe)} "
             f"--ros-args --params-file {shlex.quote(str(wd / 'controllers.yaml'))}"],
            env=dict(env, COPAPY_ROS2_EXTRA_PREFIX=str(prefix)), stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        drive = _ros_bash(f"python {shlex.quote(str(Path(__file__).with_name('drive.py')))} "
                          f"{shlex.quote(str(wd / 'robot.urdf'))} {name} {seconds}",
                          extra_prefix=prefix, env=env, capture_output=True, timeout=300)
    finally:
        node.send_signal(signal.SIGINT)
        try:
            node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
    text = node_log.read_text(errors="replace")
    report: dict[str, Any] = {}
    for line in reversed(drive.stdout.splitlines()):
        if line.startswith("{"):
            report = json.loads(line)
            break
    # the verdict is the driver's report: rclpy may still fail while shutting down
    if not report.get("ok"):
        raise KitError(f"driving the controller_manager failed:\n{drive.stdout}\n"
                       f"{drive.stderr[-3000:]}\nnode log:\n{text[-3000:]}")
    sleeps = read_sleep_probe(probe_out)
    # the controller_manager's thread is the one that slept most often
    cm = max(sleeps.values(), key=len) if sleeps else np.zeros((0, 2), np.int64)
    faulted = [line for line in text.splitlines() if "the copapy program faulted" in line]
    run = ControllerRun(name, cm[:, 1], fifo="Successful set up FIFO RT scheduling" in text,
                        real=True, log=text,
                        fault=faulted[0].split("faulted: ", 1)[1].split("; commanding")[0]
                        if faulted else "")
    if record.is_file():
        read_record(record, run)
        # only the wake-ups while the controller was active (its first to its last update)
        if run.t_mono_ns.size:
            active = (cm[:, 0] > run.t_mono_ns[0]) & (cm[:, 0] <= run.t_mono_ns[-1])
            run.latencies_ns = cm[active, 1]
    if own:
        shutil.rmtree(wd, ignore_errors=True)
    return run
