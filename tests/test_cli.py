"""The `copapy` command: `python -m copapy` runs it; runner, info, stats and archs work against a
real host runner, and a bad port gives a one-line error, not a traceback."""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from copapy import cli, cli_tools, host_runner
from copapy._contract import IO_KIND_COUNT
from copapy.arch.targets import arch_names
from copapy.bench.jitter_plan import CONDITIONS, POLICIES, VARIANTS, describe
from copapy.runtime.load import host_architecture
from copapy.serial.protocol import RunnerStats

ROOT = Path(__file__).resolve().parent.parent
ENV_PATH = str(ROOT / "src")


def copapy(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "copapy", *args], capture_output=True,
                          text=True, timeout=timeout, env=_env())


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ENV_PATH + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_archs_lists_every_target_with_its_table() -> None:
    out = copapy("archs")
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    names = set(arch_names())
    assert names <= set(lines), f"missing {names - set(lines)}"
    assert "float64: no" in lines["cortex-m4"] and "float64: yes" in lines["cortex-m7"]


def test_runner_info_and_stats_end_to_end() -> None:
    runner = subprocess.Popen([sys.executable, "-m", "copapy", "runner", "--pty", "--no-rt",
                               "--name", "cli-test"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert runner.stdout is not None
        line = runner.stdout.readline().split()
        assert line[:1] == ["PTY"], f"runner did not start: {line}"
        info = copapy("info", line[1])
        assert info.returncode == 0, info.stderr
        fields = dict(row.split(None, 1) for row in info.stdout.splitlines())
        assert fields["name"] == "cli-test" and fields["arch"] == host_architecture()
        stats = copapy("stats", line[1])
        assert stats.returncode == 0, stats.stderr
        assert stats.stdout.startswith("ticks ") and "release jitter p50" in stats.stdout
        assert ("stream events dropped 0: 0 by the event ring, 0 by the link (discarded unread: "
                "0 frames, 0 bytes in 0 discards)") in stats.stdout.splitlines()
    finally:
        runner.kill()
        runner.wait(timeout=5)


def test_stats_names_both_places_stream_events_are_lost() -> None:
    """The event ring's drops and the link's discards, each field in its place, and their sum
    (what a scope sees as tick gaps)."""
    s = RunnerStats(ticks=9000, bad_frames=0, late_ticks=0, jitter_max_ns=0, jitter_p99_ns=0,
                    jitter_p50_ns=0, stream_dropped=12, tasks=[], link_stream_dropped=3400,
                    link_frames_dropped=3401, link_discards=2, link_bytes_dropped=170050)
    assert cli.stream_losses(s) == ("stream events dropped 3412: 12 by the event ring, 3400 by "
                                    "the link (discarded unread: 3401 frames, 170050 bytes in 2 "
                                    "discards)")


def test_bad_port_is_one_clear_line() -> None:
    out = copapy("info", "/dev/does-not-exist")
    assert out.returncode == 1
    assert out.stderr.startswith("copapy info: cannot open '/dev/does-not-exist'")
    assert "Traceback" not in out.stderr


def test_runner_on_a_unix_socket_with_a_key(tmp_path: Path) -> None:
    key = tmp_path / "runner.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    sock = tmp_path / "runner.sock"
    runner = subprocess.Popen([sys.executable, "-m", "copapy", "runner", "--unix", str(sock),
                               "--key-file", str(key), "--no-rt", "--budget-factor", "4",
                               "--max-memory", str(1 << 24)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env())
    try:
        assert runner.stdout is not None
        line = runner.stdout.readline().split()
        assert line == ["UNIX", str(sock)], f"runner did not start: {line}"
        info = copapy("info", f"unix:{sock}", "--key-file", str(key))
        assert info.returncode == 0, info.stderr
        fields = dict(row.split(None, 1) for row in info.stdout.splitlines())
        assert fields["auth_required"] == "True"
        refused = copapy("info", f"unix:{sock}")
        assert refused.returncode == 1 and "AUTH_REQUIRED" in refused.stderr
        assert "--key-file F" in refused.stderr  # the fix on the command line, not only Python
        assert "Traceback" not in refused.stderr
    finally:
        runner.kill()
        runner.wait(timeout=5)


def test_runner_passes_io_file_and_no_seccomp_on(tmp_path: Path) -> None:
    """copapy runner --io-file F --no-seccomp: the runner maps F (16 float64 channels of each
    kind) and forks its supervisor, whose only child it is."""
    io_file = tmp_path / "io"
    runner = subprocess.Popen([sys.executable, "-m", "copapy", "runner", "--pty", "--no-rt",
                               "--io-file", str(io_file), "--no-seccomp"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env())
    try:
        assert runner.stdout is not None
        line = runner.stdout.readline().split()
        assert line[:1] == ["PTY"], f"runner did not start: {line}"
        assert io_file.stat().st_size == IO_KIND_COUNT * 16 * 8
        children = Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text().split()
        assert len(children) == 1
        cmdline = Path(f"/proc/{children[0]}/cmdline").read_bytes().split(b"\0")
        assert b"--no-seccomp" in cmdline and str(io_file).encode() in cmdline
    finally:
        runner.terminate()
        assert runner.wait(timeout=10) == 0


def test_runner_options_are_checked() -> None:
    """`--max-memory -5` was read by strtoul as ULONG_MAX - 4 and accepted (no memory limit);
    a second transport, --start without --image or no transport printed only the synopsis;
    --help exited with status 2."""
    from tests.support.runners import build

    build("host")
    exe = str(ROOT / "runner" / "build" / "copapy-runner")
    for args, says in ((["--pty", "--max-memory", "-5"], "--max-memory needs a size in bytes"),
                       (["--pty", "--max-image", "+100"], "--max-image needs a size"),
                       (["--pty", "--budget-factor", "-0"], "--budget-factor needs a whole"),
                       (["--pty", "--stdio"], "give one transport"),
                       (["--pty", "--start"], "--start needs --image FILE"),
                       ([], "give a transport"),
                       (["--pty", "stray"], "unexpected argument 'stray'"),
                       (["--pty", "--link-timeout", "1e6"],
                        "--link-timeout needs a time in seconds (> 0, at most 86400)")):
        out = subprocess.run([exe, "--no-rt", *args], capture_output=True, text=True,
                             timeout=10, stdin=subprocess.DEVNULL)
        assert out.returncode == 2 and f"copapy-runner: error: {says}" in out.stderr, (args, out)
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and out.stdout.startswith("usage: copapy-runner")


def test_bench_jitter_arguments_are_checked() -> None:
    """--seconds 0 or less and --rounds 0 started the whole benchmark (every cell, for
    nothing) instead of saying the argument is wrong."""
    for args, says in ((("--seconds", "-1"), "--seconds must be > 0"),
                       (("--seconds", "0"), "--seconds must be > 0"),
                       (("--rounds", "0"), "--rounds must be >= 1")):
        out = copapy("bench", "jitter", *args, "--quiet", timeout=30)
        assert out.returncode == 1 and says in out.stderr, (args, out.stderr)


def test_doctor_builds_nothing_to_report_the_host_runner(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor ran `make -C runner host` through runner_executable(): 15 s on a fresh checkout
    (and a build, just to list features). It reports what is there, and that a first use
    builds it."""
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "Makefile").write_text("host:\n\tfalse\n")
    monkeypatch.setattr(host_runner, "repo_root", lambda: tmp_path)

    def no_subprocess(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"doctor started a process: {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    checks = {c.feature: c for c in cli_tools.checks()}
    runner = checks["host runner"]
    assert runner.ok and runner.found.startswith("not built yet: the first use builds it")
    built = tmp_path / "runner" / "build" / "copapy-runner"
    built.parent.mkdir()
    built.write_text("")
    runner = {c.feature: c for c in cli_tools.checks()}["host runner"]
    assert runner.ok and runner.found.startswith(str(built))


def test_bench_jitter_says_what_it_will_run_first(tmp_path: Path) -> None:
    """`copapy bench jitter --seconds 1` (the --help example) ran 54 cells, about 5 minutes with
    CPU stress, without a word first."""
    assert describe(VARIANTS, CONDITIONS, POLICIES, 1.0, 1).startswith(
        "copapy bench jitter: 54 cells (9 variants x 3 conditions x 2 policies) of 1 s each, "
        "about 5 min in all; the 'stress' condition loads every CPU")
    assert "2 rounds" in describe(["c_ctypes"], ["idle"], ["other"], 0.5, 2)
    proc = copapy("bench", "jitter", "--variants", "py_sleep", "--conditions", "idle",
                  "--policies", "other", "--seconds", "0.2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("copapy bench jitter: 1 cell (1 variants x 1 conditions x 1 "
                            "policies) of 0.2 s each, about 5 s in all. Fewer:"), proc.stderr
    assert "stress" not in first
    help_text = copapy("--help").stdout
    assert "bench jitter --variants c_ctypes,cyclictest" in help_text
    assert "about 13 min, with CPU stress" in help_text


CLI_REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "reference" / "cli.md"


def _help(*words: str) -> str:
    """What ``copapy WORDS --help`` prints (argparse's own account of the command)."""
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        cli.main([*words, "--help"])
    return out.getvalue()


def _commands(words: tuple[str, ...] = ()) -> dict[tuple[str, ...], set[str]]:
    """Every command below ``copapy WORDS`` with its options: a command with subcommands
    (``bench``) stands for them (``bench jitter``)."""
    text = _help(*words)
    options = set(re.findall(r"^  (?:-\w, )?(--[a-z][-a-z0-9]*)", text, re.M)) - {"--help"}
    choices = re.search(r"^  \{([-a-z0-9,]+)\}$", text, re.M)
    found = {words: options} if options or not choices else {}
    for name in choices[1].split(",") if choices else ():
        found.update(_commands((*words, name)))
    return found


def test_the_cli_reference_names_every_command_and_option() -> None:
    """docs/guide/reference/cli.md cannot drift from argparse: a row for every command (a
    subcommand added without its row is caught), every option named in its rows."""
    if not CLI_REFERENCE.exists():
        pytest.skip("the docs are not in this tree (the wheel subset runs from the sdist)")
    rows = [line for line in CLI_REFERENCE.read_text().splitlines() if line.startswith("| `copapy")]
    commands = _commands()
    assert ("bench", "jitter") in commands and ("flash",) in commands and () in commands
    missing = []
    for words, options in sorted(commands.items()):
        command = " ".join(("copapy", *words))
        head = re.compile(rf"^\| `{re.escape(command)}(?![-\w])")
        text = " ".join(row for row in rows if head.match(row))
        if not text:
            missing.append(f"{command}: no row")
        missing += [f"{command} {o}" for o in sorted(options)
                    if not re.search(rf"{o}(?![-\w])", text)]
    assert not missing, f"{CLI_REFERENCE.name} leaves out: {missing}"


def test_firmware_export_writes_what_the_wheel_ships() -> None:
    """`copapy firmware export` and the wheel's copapy/_firmware (setup.py) list the same
    sources: runner/tables was missing from the export, so the guide's bare-metal build
    stopped at `No rule to make target '../tables/cortex-m7.c'`."""
    tree = ast.parse((Path(__file__).resolve().parents[1] / "setup.py").read_text())
    shipped = next(ast.literal_eval(node.value) for node in ast.walk(tree)
                   if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "FIRMWARE" for t in node.targets))
    assert list(cli_tools.FIRMWARE) == list(shipped)
