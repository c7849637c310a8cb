"""Run code with the range analysis on every compile: what cp.check would report.

``PREAMBLE`` wraps the compiler's two entry points where the targets, cp.save and cp.jit
import them; each compile analyses its outputs (graph/ranges.py) and, at exit, appends one
line per finding to the file ``$RANGE_AUDIT``: ``report|<file:line: source>|<kind>`` for a
domain error (``assumed|...`` when it depends on an input without a declared range, which
cp.check reports only when strict), ``unbounded|<file:line: source>|state`` for an unbounded
signal state.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PREAMBLE = '''
import atexit as _atexit, os as _os, sys as _sys
import copapy.graph.ranges as _gr
import copapy.jit, copapy.local_target, copapy.saved
# (the modules by name: `import copapy.jit as m` gives the function cp.jit, which the
# package's attribute of that name is)
_jt, _lt, _sv = (_sys.modules[f"copapy.{_n}"] for _n in ("jit", "local_target", "saved"))
_found = []
def _audit(nodes):
    a = _gr.analyse(list(nodes))
    _found.extend(f"{'assumed' if r.assumed else 'report'}|{r.location}|{r.finding.kind}"
                  for r in a.reports)
    _found.extend(f"unbounded|{_gr.describe(s)}|state" for s in a.unbounded)
def _program(fn):
    def compile_program(outputs, *args, **kw):
        _audit(outputs)
        return fn(outputs, *args, **kw)
    return compile_program
def _tasks(fn):
    def compile_tasks(tasks, *args, **kw):
        _audit([n for t in tasks for n in t.outputs])
        return fn(tasks, *args, **kw)
    return compile_tasks
# every entry point must be there (an AttributeError otherwise: a compile the audit missed
# would pass as one without findings)
for _m in (_jt, _lt, _sv):
    _m.compile_program = _program(_m.compile_program)
for _m in (_lt, _sv):
    _m.compile_tasks = _tasks(_m.compile_tasks)
def _write():
    with open(_os.environ["RANGE_AUDIT"], "a") as f:
        f.write("".join(line.replace("\\n", " ") + "\\n" for line in _found))
_atexit.register(_write)
'''


def audit(argv_tail: list[str], code: str, cwd: Path, env: dict[str, str],
          out: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (after the preamble) with ``argv_tail`` as sys.argv[1:]."""
    env = {**env, "RANGE_AUDIT": str(out)}
    return subprocess.run([sys.executable, "-c", PREAMBLE + code, *argv_tail], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600,
                          start_new_session=True)


#: lines the preamble puts before the audited code
PREAMBLE_LINES = PREAMBLE.count("\n")


def findings(out: Path) -> list[tuple[str, str, str]]:
    """(kind, source, what) per finding; a source in code run by :func:`audit`
    (``<string>:N``) names the line of that code, not counting the preamble."""
    if not out.exists():
        return []
    return [(kind, re.sub(r"^<string>:(\d+)", lambda m: f"<string>:{int(m[1]) - PREAMBLE_LINES}",
                          source), what)
            for kind, source, what in (line.split("|", 2) for line in
                                       out.read_text().splitlines() if line)]


def run_path(path: Path, args: list[str], cwd: Path, env: dict[str, str],
             out: Path) -> subprocess.CompletedProcess[str]:
    """A script as ``python path args`` with the preamble first."""
    code = (f"import runpy, sys\nsys.argv = [{str(path)!r}, *sys.argv[1:]]\n"
            f"runpy.run_path({str(path)!r}, run_name='__main__')\n")
    return audit(args, code, cwd, {**os.environ, **env}, out)
