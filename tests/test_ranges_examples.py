"""The range check finds nothing false in the repository's examples and the guide's code
(issue 35): every python block of docs/index.md and docs/guide/ and every example script runs
with the range analysis on each compile (tests/support/range_audit.py); a domain error it
reports must be listed in EXPLAINED with the reason it is not a false report. Findings that
depend on inputs without a declared range (which cp.check reports only with strict=True) and
unbounded signal states are collected and printed, not failures."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.range_audit import audit, findings, run_path
from tests.test_guide import PAGES, ROOT, _scratch, blocks

#: (page or example, block line, reported source, kind) -> why it is not a false report
#: (``<string>:N``: line N of the block)
EXPLAINED: dict[tuple[str, int, str, str], str] = {
    ("signals.md", 9, "<string>:23", "division by zero"):
        "cp.integrate_rotation renormalises q by its length, which interval analysis cannot keep "
        "away from 0 (the product of two unit quaternions has length 1 only by algebra the "
        "intervals do not see); copapy's own code at the user's line, not the user's error",
}

EXAMPLES = [("demo.py", []), ("motor_pid.py", ["--save", "pid.cpimg"]),
            ("ekf_attitude.py", []), ("lqr_cartpole.py", []), ("mpc_cartpole.py", [])]
#: examples that compile something with a finding (reported, assumed or an unbounded state)
#: when run: the audit must see them (the others compile only what has none)
FINDINGS = {"motor_pid.py", "ekf_attitude.py", "mpc_cartpole.py"}


def _check(where: str, line: int, out: Path) -> list[str]:
    bad = []
    for kind, source, what in findings(out):
        if kind == "report" and (where, line, source.split(": ", 1)[-1], what) not in EXPLAINED:
            bad.append(f"{where}:{line}: {what} at {source}")
        elif kind != "report":
            print(f"{where}:{line}: {kind} {what} at {source}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT / "docs")) for p in PAGES])
def test_guide_code_has_no_false_range_reports(page: Path, tmp_path: Path) -> None:
    env = _scratch(tmp_path)
    bad: list[str] = []
    for k, b in enumerate(blocks(page)):
        if b.mark:
            continue
        out = tmp_path / f"audit{k}.txt"
        if b.lang == "python":
            proc = audit([], b.body, tmp_path, env, out)
        else:
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", b.body], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=600,
                                  start_new_session=True)
        assert proc.returncode == 0, (f"{page.name}:{b.line} failed:\n{proc.stdout[-2000:]}\n"
                                      f"{proc.stderr[-2000:]}")
        bad += _check(page.name, b.line, out)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name, args", EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_examples_have_no_false_range_reports(name: str, args: list[str],
                                              tmp_path: Path) -> None:
    env = _scratch(tmp_path)
    out = tmp_path / "audit.txt"
    proc = run_path(ROOT / "examples" / name, args, tmp_path, env, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # motor_pid's integrals are unbounded states; the EKF's jitted step divides by its
    # undeclared inputs; the MPC's FISTA loop body is analysed with its state at every
    # float, so sqrt(1 + 4 t t) may be NaN to intervals (all assumed: reported only when
    # strict)
    assert bool(findings(out)) == (name in FINDINGS), findings(out)
    bad = _check(name, 0, out)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("compile_line", [
    "tg = cp.LocalTarget()\ntg.compile(cp.log(x))\n",
    # cp.jit compiles through copapy.jit's compile_program (the audit missed it: `import
    # copapy.jit as m` is the function cp.jit)
    "cp.jit(lambda y: cp.log(y + x))(0.0)\n",
    "cp.save('p.cpimg', cp.log(x))\n",
], ids=["LocalTarget", "jit", "save"])
def test_the_audit_sees_a_report(compile_line: str, tmp_path: Path) -> None:
    """The harness itself: a program with a fault produces a report line, whichever entry
    point compiles it."""
    code = "import copapy as cp\nx = cp.value(0.5, range=(-1.0, 1.0))\n" + compile_line
    out = tmp_path / "a.txt"
    proc = audit([], code, tmp_path, {**os.environ, "PYTHONPATH": str(ROOT / "src")}, out)
    assert proc.returncode == 0, proc.stderr
    assert [w for _, _, w in findings(out)] == ["domain error"]
