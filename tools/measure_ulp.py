#!/usr/bin/env python3
"""Accuracy / special-value / speed / cross-target checks for the copapy
deterministic math kernels (stencils/math/*.c, stencils/include/cp_math.h).

  python tools/measure_ulp.py                  # full ulp table (several minutes)
  python tools/measure_ulp.py --quick          # small sample, a few seconds
  python tools/measure_ulp.py --speed          # ns/call vs. host libm (glibc)
  python tools/measure_ulp.py --check-targets  # cross-compile for all targets,
                                               # list undefined symbols per kernel
  python tools/measure_ulp.py --cross-run      # same result bits on x86/ARM/RISC-V (qemu-user)
  python tools/measure_ulp.py --write-doc      # (with a full run) update docs/math.md

float32 kernels are compared with the numpy float64 value (error in ulps of
the float32 result), float64 kernels with mpmath at 120 bits (error in ulps
of the float64 result).  Exact kernels (floor, ceil, trunc, round, fmod,
sqrt) must match bit for bit.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_stencils
import host_build

from copapy.arch.targets import host_arch, targets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATH_DIR = os.path.join(ROOT, "stencils", "math")
INC_DIR = os.path.join(ROOT, "stencils", "include")
HARNESS = os.path.join(ROOT, "tools", "ulp_harness.c")
DOC = os.path.join(ROOT, "docs", "math.md")

KERNEL_FLAGS = ["-O2", "-ffreestanding", "-fno-builtin", "-fno-math-errno", "-ffp-contract=off",
                "-ffunction-sections", "-fdata-sections", "-std=c11", "-Wall", "-Wextra", "-Werror"]
# --check-targets compiles with the stencil build's own flags (tools/build_stencils.py,
# targets/*.toml); float64 kernels may call the compiler's soft-double helpers on the targets
# without FP64 (float64 = false)
SOFT_HELPER_RE = re.compile(r"^(__aeabi_[a-z0-9]+|__(add|sub|mul|div|neg)[sd]f3"
                            r"|__(eq|ne|lt|le|gt|ge|un|cmp)[sd]f2"
                            r"|__fix(uns)?[sd]f[sd]i|__float(un)?[sd]i[sd]f"
                            r"|__extendsfdf2|__truncdfsf2)$")



def kernel_list():
    """[(name, arity, accuracy)] of the kernels, from CP_KERNELS in cp_math.h."""
    with open(os.path.join(INC_DIR, "cp_math.h")) as f:
        text = f.read()
    block = text[text.index("#define CP_KERNELS(X)"):]
    block = block[:block.index("\n\n")]
    lines = re.findall(r"X\((\w+), ([12]), (exact|approx)\)", block)
    return [(n, int(a), acc) for n, a, acc in lines]


NAMES = [n for n, _, _ in kernel_list()]
BINARY = {n for n, a, _ in kernel_list() if a == 2}
EXACT = {n for n, _, acc in kernel_list() if acc == "exact"}
# accuracy goals (ulp)
BOUND_F32 = 2.0
BOUND_F64 = 4.0


# --------------------------------------------------------------------------- build
def kernel_sources():
    return sorted(os.path.join(MATH_DIR, f) for f in os.listdir(MATH_DIR) if f.endswith(".c"))


_LIB = None


def build(verbose=False):
    """Compile kernels + harness into a host shared library (tools/host_build.py) and load it."""
    global _LIB
    if _LIB is not None:
        return _LIB
    flags = [*KERNEL_FLAGS, "-fPIC", f"-I{INC_DIR}"]
    so = host_build.build_shared(
        "cpmath_harness", [(Path(s), flags) for s in [*kernel_sources(), HARNESS]],
        depends=sorted(Path(INC_DIR).glob("*.h")), link_flags=["-lm"], verbose=verbose)
    _LIB = ctypes.CDLL(str(so))
    return _LIB


def _fn(prefix, name, dtype, binary):
    lib = build()
    f = getattr(lib, prefix + name)
    P = ctypes.c_void_p
    f.argtypes = [P, P, P, ctypes.c_size_t] if binary else [P, P, ctypes.c_size_t]
    f.restype = None
    return f


def evaluate(name, *args, libm=False):
    """Evaluate kernel cp_<name> (name with 'f' suffix = float32) elementwise."""
    dtype = np.float32 if (name.endswith("f") or name == "sqrtf_soft") else np.float64
    arrs = [np.ascontiguousarray(np.asarray(a, dtype=dtype)) for a in args]
    arrs = np.broadcast_arrays(*arrs)
    arrs = [np.ascontiguousarray(a) for a in arrs]
    out = np.empty_like(arrs[0])
    f = _fn("libm_" if libm else "eval_", name, dtype, len(arrs) == 2)
    f(*[a.ctypes.data for a in arrs], out.ctypes.data, out.size)
    return out


# --------------------------------------------------------------------------- references
# numpy's name of a kernel where it differs
NP_ALIAS = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2",
            "pow": "power"}
NP_REF = {n: getattr(np, NP_ALIAS.get(n, n)) for n in NAMES}


def ulp32(ref):
    """ulp of the float32 number nearest to ref (float64 array)."""
    a = np.abs(ref)
    _, e = np.frexp(a)
    e = np.maximum(e - 1, -126)
    return np.ldexp(1.0, e - 23)


def err_f32(y, ref):
    """ulp error of float32 results y against float64 reference values."""
    y = y.astype(np.float64)
    with np.errstate(all="ignore"):
        r32 = ref.astype(np.float32).astype(np.float64)
        err = np.abs(y - ref) / ulp32(ref)
    same = (y == r32) | (np.isnan(y) & np.isnan(ref))
    inf_ref = np.isinf(r32)
    err = np.where(inf_ref | np.isnan(ref) | np.isnan(y) | np.isinf(y),
                   np.where(same, 0.0, np.inf), err)
    # results that differ from the nearest float32 but where ref overflowed in float32
    return np.where(same, np.minimum(err, 0.5), err)


def f32_ref(name, *args):
    with np.errstate(all="ignore"):
        return NP_REF[name](*[np.asarray(a, np.float32).astype(np.float64) for a in args])


import mpmath as mp  # noqa: E402


def _mp_pow(x, y):
    if abs(x) == 1 and mp.isinf(y):
        return mp.mpf(1)
    if mp.isinf(y):
        return mp.power(abs(x), y)
    if x < 0:
        yi = int(y)
        r = mp.power(-x, y)
        return -r if yi % 2 else r
    return mp.power(x, y)


# mpmath references of the kernels measured against mpmath (the approximated ones and sqrt)
MP_REF = {n: _mp_pow if n == "pow" else getattr(mp, n) for n in NAMES
          if n not in EXACT or n == "sqrt"}


def _mp_err_chunk(args):
    name, xs, ys = args
    mp.mp.prec = 120
    f = MP_REF[name]
    out = np.empty(len(ys))
    for i in range(len(ys)):
        y = ys[i]
        a = [mp.mpf(float(v[i])) for v in xs]
        ref = f(*a)
        if not math.isfinite(y) or mp.isnan(ref) or mp.isinf(ref):
            rf = float(ref) if not mp.isnan(ref) else float("nan")
            ok = (math.isnan(y) and math.isnan(rf)) or y == rf
            out[i] = 0.0 if ok else np.inf
            continue
        if ref == 0:
            out[i] = 0.0 if y == 0 else np.inf
            continue
        e = int(mp.floor(mp.log(abs(ref), 2)))
        if e > 1023:       # overflow: must be inf
            out[i] = np.inf
            continue
        u = mp.ldexp(1, max(e, -1022) - 52)
        out[i] = float(abs(mp.mpf(y) - ref) / u)
    return out


def err_f64_mp(name, args, y, workers=1):
    n = len(y)
    if workers > 1 and n > 20000:
        import multiprocessing as mpr
        k = workers * 4
        idx = np.array_split(np.arange(n), k)
        jobs = [(name, [a[i] for a in args], y[i]) for i in idx]
        with mpr.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_mp_err_chunk, jobs)
        return np.concatenate(parts)
    return _mp_err_chunk((name, args, y))


# --------------------------------------------------------------------------- samplers
def _bits_uniform(rng, lo, hi, n, dtype):
    """Floats with bit patterns uniform in [bits(lo), bits(hi)] (lo, hi >= 0):
    log-uniform, every binade in the range covered."""
    it = np.uint32 if dtype == np.float32 else np.uint64
    blo = int(np.array(lo, dtype).view(it))
    bhi = int(np.array(hi, dtype).view(it))
    b = rng.integers(blo, bhi, size=n, endpoint=True, dtype=np.uint64).astype(it)
    return b.view(dtype)


def sample_sym(rng, lo_abs, hi_abs, n, dtype, linear_frac=0.5):
    """Symmetric sample on [-hi, -lo] u [lo, hi]: log-uniform + linear uniform."""
    nl = int(n * linear_frac)
    a = _bits_uniform(rng, lo_abs, hi_abs, n - nl, dtype)
    b = rng.uniform(lo_abs, hi_abs, nl).astype(dtype)
    x = np.concatenate([a, b])
    s = rng.integers(0, 2, size=n).astype(bool)
    return np.where(s, -x, x).astype(dtype)


def domains(prec):
    """name -> (label, sampler(rng, n) -> tuple of arrays)."""
    f = prec == 32
    dt = np.float32 if f else np.float64
    tiny = np.finfo(dt).tiny * np.finfo(dt).eps   # smallest subnormal
    big = float(np.finfo(dt).max)
    trig = 1e5 if f else 1e9
    exp_lo, exp_hi = (-104.0, 89.0) if f else (-746.0, 710.0)
    zmax = (150.0, 128.0) if f else (1075.0, 1024.0)

    def s_trig(rng, n):
        x = sample_sym(rng, tiny, trig, n, dt)
        # edge: near multiples of pi/2
        m = n // 10
        k = rng.integers(1, int(trig / 1.6), size=m)
        x[:m] = (k * (np.pi / 2)).astype(dt)
        return (x,)

    def s_trig_small(rng, n):
        return (_bits_uniform(rng, 0.0, 100.0, n, dt),)

    def s_trig_large(rng, n):
        return (sample_sym(rng, trig, big, n, dt, 0.2),)

    def s_unit(rng, n):
        x = sample_sym(rng, tiny, 1.0, n, dt, 0.6)
        m = n // 10
        x[:m] = (np.sign(x[:m]) * (1 - _bits_uniform(rng, tiny, 0.5, m, dt))).astype(dt)
        return (x,)

    def s_all(rng, n):
        return (sample_sym(rng, tiny, big, n, dt, 0.1),)

    def s_exp(rng, n):
        x = rng.uniform(exp_lo, exp_hi, n).astype(dt)
        m = n // 4
        x[:m] = sample_sym(rng, tiny, 1.0, m, dt, 0.0)
        return (x,)

    def s_log(rng, n):
        x = _bits_uniform(rng, tiny, big, n, dt)
        m = n // 4
        x[:m] = (1 + sample_sym(rng, tiny, 0.1, m, dt, 0.3)).astype(dt)
        return (x,)

    def s_tanh(rng, n):
        x = sample_sym(rng, tiny, big, n, dt, 0.0)
        m = n // 2
        x[:m] = rng.uniform(-25, 25, m).astype(dt)
        return (x,)

    def s_atan2(rng, n):
        y = sample_sym(rng, tiny, big, n, dt, 0.0)
        x = sample_sym(rng, tiny, big, n, dt, 0.0)
        m = n // 2
        y[:m] = rng.uniform(-10, 10, m).astype(dt)
        x[:m] = rng.uniform(-10, 10, m).astype(dt)
        return (y, x)

    def s_pow(rng, n):
        x = _bits_uniform(rng, tiny, big, n, dt)
        with np.errstate(all="ignore"):
            l2 = np.log2(x.astype(np.float64))
            z = rng.uniform(-zmax[0], zmax[1], n)
            y = np.where(np.abs(l2) > 1e-30, z / l2, 1.0)
        y = y.astype(dt)
        m = n // 4   # x near 1, large y
        xm = (1 + sample_sym(rng, tiny, 0.01, m, dt, 0.0)).astype(dt)
        with np.errstate(all="ignore"):
            ym = rng.uniform(-zmax[0], zmax[1], m) / np.log2(xm.astype(np.float64))
        x[:m] = xm
        y[:m] = np.where(np.isfinite(ym), ym, 3.0).astype(dt)
        q = n // 8   # negative x, integer y
        ix = rng.integers(-60, 60, size=q).astype(dt)
        xn = -rng.uniform(0.5, 2.0, q).astype(dt)
        x[m:m + q] = xn
        y[m:m + q] = ix
        return (x, y)

    def s_sqrt(rng, n):
        return (_bits_uniform(rng, 0.0, big, n, dt),)

    def s_round(rng, n):
        x = sample_sym(rng, tiny, big, n, dt, 0.0)
        m = n // 2
        x[:m] = (rng.integers(-2000, 2000, m) / 4.0).astype(dt)   # halves/quarters
        return (x,)

    def s_fmod(rng, n):
        x = sample_sym(rng, tiny, big, n, dt, 0.0)
        y = sample_sym(rng, tiny, big, n, dt, 0.0)
        m = n // 2
        x[:m] = sample_sym(rng, 1e-3, 1e6, m, dt, 0.3)
        y[:m] = sample_sym(rng, 1e-3, 1e3, m, dt, 0.3)
        return (x, y)

    def s_hypot(rng, n):
        y, x = s_atan2(rng, n)
        m = n // 8   # one operand much smaller than the other (exponents up to ~70 apart)
        x[:m] = (y[:m] * (2.0 ** rng.uniform(-70, 0, m))).astype(dt)
        return (x, y)

    def s_log1p(rng, n):
        x = _bits_uniform(rng, tiny, big, n, dt)
        m = n // 4   # near 0 (both signs), in (-1, 0), and next to -1
        x[:m] = sample_sym(rng, tiny, 0.5, m, dt, 0.2)
        x[m:2 * m] = -rng.uniform(0.0, 1.0, m).astype(dt)
        x[2 * m:2 * m + m // 4] = (-1 + _bits_uniform(rng, tiny, 0.01, m // 4, dt)).astype(dt)
        return (np.where(x <= -1, dt(-0.5), x).astype(dt),)

    def s_expm1(rng, n):
        x = rng.uniform(-40.0 if f else -80.0, exp_hi, n).astype(dt)
        m = n // 2   # near 0 (both signs), where exp(x) - 1 cancels
        x[:m] = sample_sym(rng, tiny, 1.0, m, dt, 0.2)
        return (x,)

    tl = f"|x|<={trig:g}"
    return {
        "sin": (tl, s_trig), "cos": (tl, s_trig), "tan": (tl, s_trig),
        "sin_small": ("[0,100]", s_trig_small), "cos_small": ("[0,100]", s_trig_small),
        "tan_small": ("[0,100]", s_trig_small),
        "sin_large": (f"|x|>{trig:g}", s_trig_large), "cos_large": (f"|x|>{trig:g}", s_trig_large),
        "tan_large": (f"|x|>{trig:g}", s_trig_large),
        "asin": ("[-1,1]", s_unit), "acos": ("[-1,1]", s_unit), "atan": ("all", s_all),
        "atan2": ("all pairs", s_atan2), "exp": (f"[{exp_lo:g},{exp_hi:g}]", s_exp),
        "log": ("(0,inf)", s_log), "pow": ("finite results", s_pow), "tanh": ("all", s_tanh),
        "hypot": ("all pairs", s_hypot), "log1p": ("(-1,inf)", s_log1p),
        "expm1": (f"[{-40 if f else -80},{exp_hi:g}]", s_expm1),
        "sqrt": ("[0,inf]", s_sqrt), "floor": ("all", s_round), "ceil": ("all", s_round),
        "round": ("all", s_round), "trunc": ("all", s_round), "fmod": ("all pairs", s_fmod),
    }




def _rows():
    """The measured rows: per kernel of cp_math.h its domain (same name), then the narrower
    ones (name_small, name_large); every kernel needs a domain."""
    doms = domains(32)
    missing = [n for n in NAMES if n not in doms]
    if missing:
        raise KeyError(f"kernels without a measurement domain in measure_ulp.domains: {missing}")
    return [r for n in NAMES for r in doms if r == n or r.startswith(n + "_")]


ROWS = _rows()
EXHAUSTIVE_F32 = {"sqrt", "floor", "ceil", "round", "trunc"}
EXHAUSTIVE_RANGE_F32 = {"sin_small": (0.0, 100.0), "cos_small": (0.0, 100.0),
                        "tan_small": (0.0, 100.0)}


def all_f32_chunks(chunk=1 << 24):
    for start in range(0, 1 << 32, chunk):
        yield np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)


def measure_f32(row, n, rng, exhaustive=False):
    name = row.split("_")[0]
    label, sampler = domains(32)[row]
    if exhaustive and row in EXHAUSTIVE_F32:
        worst, arg, cnt = 0.0, None, 0
        for x in all_f32_chunks():
            if name == "sqrt":
                x = x[~np.signbit(x)]
            y = evaluate(name + "f", x)
            with np.errstate(all="ignore"):
                ref = NP_REF[name](x)      # float32 numpy: exact for these
            bad = ~((y.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(y) & np.isnan(ref)))
            cnt += x.size
            if bad.any():
                worst, arg = np.inf, (float(x[bad][0]),)
        return dict(name=name + "f", domain=label + " (every float32)", points=cnt, max=worst,
                    arg=arg)
    if exhaustive and row in EXHAUSTIVE_RANGE_F32:
        lo, hi = EXHAUSTIVE_RANGE_F32[row]
        b0 = int(np.float32(lo).view(np.uint32))
        b1 = int(np.float32(hi).view(np.uint32))
        worst, arg, cnt = -1.0, None, 0
        for start in range(b0, b1 + 1, 1 << 24):
            x = (np.arange(start, min(start + (1 << 24), b1 + 1), dtype=np.uint64)
                 .astype(np.uint32).view(np.float32))
            err = err_f32(evaluate(name + "f", x), f32_ref(name, x))
            cnt += x.size
            i = int(np.argmax(err))
            if err[i] > worst:
                worst, arg = float(err[i]), (float(x[i]),)
        return dict(name=name + "f", domain=label + " (every float32)", points=cnt, max=worst,
                    arg=arg)
    args = sampler(rng, n)
    y = evaluate(name + "f", *args)
    ref = f32_ref(name, *args)
    if name in EXACT:
        r32 = ref.astype(np.float32)
        good = (y.view(np.uint32) == r32.view(np.uint32)) | (np.isnan(y) & np.isnan(r32))
        err = np.where(good, 0.0, np.inf)
    else:
        err = err_f32(y, ref)
    i = int(np.argmax(err))
    return dict(name=name + "f", domain=label, points=len(y), max=float(err[i]),
                arg=tuple(float(a[i]) for a in args))


def measure_f64(row, n, rng, workers=1):
    name = row.split("_")[0]
    label, sampler = domains(64)[row]
    args = sampler(rng, n)
    y = evaluate(name, *args)
    if name in EXACT and name != "sqrt":
        with np.errstate(all="ignore"):
            ref = NP_REF[name](*args)
        good = (y.view(np.uint64) == ref.view(np.uint64)) | (np.isnan(y) & np.isnan(ref))
        err = np.where(good, 0.0, np.inf)
    else:
        err = err_f64_mp(name, args, y, workers)
    i = int(np.argmax(err))
    return dict(name=name, domain=label, points=len(y), max=float(err[i]),
                arg=tuple(float(a[i]) for a in args))


# --------------------------------------------------------------------------- special values
def _nan_ok(y, dtype):
    it = np.uint32 if dtype == np.float32 else np.uint64
    canon = 0x7fc00000 if dtype == np.float32 else 0x7ff8000000000000
    return int(np.asarray(y, dtype).view(it)) == canon


SPECIAL_1 = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 2.0,
             -2.0, 3.0, 1e-45, -1e-45, 1e-300, 1e30, -1e30, 1e300, 0.49999997, 100.0, -100.0, 710.0,
             -750.0, 89.0, -104.0, 1.0000001, 0.99999994, 1e-40, 7.0, -7.5]


def special_values(prec):
    """Compare every kernel on special inputs (and all pairs of them for the
    binary kernels) with numpy's C99-conforming results.  Returns a list of
    failure strings; NaN results must be the canonical quiet NaN."""
    dt = np.float32 if prec == 32 else np.float64
    it = np.uint32 if prec == 32 else np.uint64
    bound = BOUND_F32 if prec == 32 else BOUND_F64
    with np.errstate(all="ignore"):
        sv = np.array(SPECIAL_1, dtype=np.float64).astype(dt)
    fails = []
    for name in NAMES:
        kn = name + ("f" if prec == 32 else "")
        if name in BINARY:
            a, b = np.meshgrid(sv, sv, indexing="ij")
            args = (a.ravel(), b.ravel())
        else:
            args = (sv,)
        y = evaluate(kn, *args)
        with np.errstate(all="ignore"):
            ref = NP_REF[name](*[x.astype(np.float64) for x in args])
        with np.errstate(all="ignore"):
            r = ref.astype(dt)
        for i in range(len(y)):
            yi, ri = y[i], r[i]
            desc = (f"{kn}({', '.join(repr(float(x[i])) for x in args)}) = {float(yi)!r}, "
                    f"expected {float(ri)!r}")
            if np.isnan(ri):
                if not _nan_ok(yi, dt):
                    fails.append(desc + " (canonical NaN)")
                continue
            if np.isnan(yi):
                fails.append(desc)
                continue
            ordinary = all(np.isfinite(x[i]) and x[i] != 0 for x in args)
            if (np.isinf(ri) or ri == 0 or name in EXACT or np.isinf(yi) or yi == 0
                    or not ordinary):
                if yi.view(it) != ri.view(it):
                    # allow correctly rounded-to-zero/overflow decisions only when exactly equal
                    fails.append(desc)
                continue
            if prec == 32:
                e = err_f32(np.array([yi]), np.array([ref[i]]))[0]
            else:
                e = _mp_err_chunk((name, [np.array([x[i]]) for x in args],
                                   np.array([float(yi)])))[0]
            if e > bound:
                fails.append(desc + f" ({e:.2f} ulp)")
    return fails


# --------------------------------------------------------------------------- speed
SPEED_F32 = ["sinf", "cosf", "tanf", "expf", "logf", "powf", "atanf", "atan2f", "asinf", "tanhf"]
SPEED_F64 = ["sin", "exp", "log", "pow", "atan", "tanh"]


def speed(n=1 << 20, reps=5):
    rng = np.random.default_rng(1)
    rows = []
    for kn in SPEED_F32 + SPEED_F64:
        dt = np.float32 if kn in SPEED_F32 else np.float64
        name = kn[:-1] if kn in SPEED_F32 else kn
        if name in ("asin", "acos"):
            args = (rng.uniform(-1, 1, n).astype(dt),)
        elif name == "pow":
            args = (rng.uniform(0.01, 10, n).astype(dt), rng.uniform(-8, 8, n).astype(dt))
        elif name == "atan2":
            args = (rng.uniform(-10, 10, n).astype(dt), rng.uniform(-10, 10, n).astype(dt))
        elif name == "log":
            args = (rng.uniform(0.001, 1000, n).astype(dt),)
        else:
            args = (rng.uniform(-10, 10, n).astype(dt),)
        t = {}
        for lm in (False, True):
            best = 1e9
            for _ in range(reps):
                t0 = time.perf_counter()
                evaluate(kn, *args, libm=lm)
                best = min(best, time.perf_counter() - t0)
            t[lm] = best / n * 1e9
        rows.append((kn, t[False], t[True], t[False] / t[True]))
    return rows


# --------------------------------------------------------------------------- targets
def _tool(*names):
    for nm in names:
        p = shutil.which(nm)
        if p:
            return p
    return None


def check_targets(verbose=True, targets=None):
    """Cross-compile every kernel file for every target (or those in ``targets``) with the
    flags of the stencil build (tools/build_stencils.py: COMMON_FLAGS and the target's
    targets/*.toml); per kernel (function section) list undefined symbols.
    Returns (ok, report)."""
    cc = build_stencils.clang_command()
    objdump = _tool("llvm-objdump-19", "llvm-objdump")
    nm = _tool("llvm-nm-19", "llvm-nm")
    if objdump is None or nm is None:
        raise RuntimeError("llvm-objdump / llvm-nm not found: apt-get install llvm-19")
    ok = True
    lines = []
    tmp = tempfile.mkdtemp(prefix="cp_math_targets_")
    names = build_stencils.clang_targets()
    if targets is not None:
        unknown = set(targets) - set(names)
        if unknown:
            raise ValueError(f"no C stencil target {sorted(unknown)} (known: {names})")
        names = [n for n in names if n in targets]
    for tname in names:
        target = build_stencils.load_target(tname)
        soft_double = not target.get("float64", True)
        per_func = {}
        for src in kernel_sources():
            obj = os.path.join(tmp, tname + "_" + os.path.basename(src) + ".o")
            cmd = [*cc, *build_stencils.target_flags(target), f"-I{INC_DIR}", src, "-o", obj]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                ok = False
                lines.append(f"{tname}: COMPILE ERROR {os.path.basename(src)}\n{r.stderr}")
                continue
            und = set(subprocess.run([nm, "-u", obj], capture_output=True,
                                     text=True).stdout.split()) - {"U"}
            defined = set()
            for ln in subprocess.run([nm, "--defined-only", obj], capture_output=True,
                                     text=True).stdout.splitlines():
                parts = ln.split()
                if len(parts) == 3 and parts[1] in "Tt":
                    defined.add(parts[2])
            out = subprocess.run([objdump, "-r", obj], capture_output=True, text=True).stdout
            sec = None
            for ln in out.splitlines():
                m = re.match(r"RELOCATION RECORDS FOR \[(.*)\]:", ln)
                if m:
                    sec = m.group(1)
                    continue
                parts = ln.split()
                if (sec and sec.startswith((".rel.text.", ".rela.text.", ".text."))
                        and len(parts) >= 3):
                    sym = re.split(r"[+-]0x", parts[2])[0]
                    fn = sec.split(".text.", 1)[1]
                    if sym.startswith("."):
                        continue        # local labels / section symbols (data, pc-relative pairs)
                    if sym in und or (sym in defined and sym != fn):
                        per_func.setdefault(fn, set()).add(sym)
            for fn in defined:
                per_func.setdefault(fn, set())
        bad = []
        helpers = set()
        for fn, syms in sorted(per_func.items()):
            if not fn.startswith("cp_"):
                continue
            is_f32 = fn.endswith("f") or fn == "cp_sqrtf_soft"
            for s in syms:
                if not is_f32 and soft_double and SOFT_HELPER_RE.match(s):
                    helpers.add(s)
                    continue
                bad.append(f"{fn} -> {s}")
        status = "OK" if not bad else "FAIL"
        if bad:
            ok = False
        f32_note = "" if not any(b.split()[0].endswith("f") for b in bad) else " VIOLATED"
        f64_note = ("soft-float helpers only: " + " ".join(sorted(helpers))) if helpers else "none"
        lines.append(f"{tname:<11} {status:<4} f32 kernels: no undefined symbols{f32_note}; "
                     f"f64 kernels: {f64_note}")
        for b in bad:
            lines.append("      unexpected: " + b)
    shutil.rmtree(tmp, ignore_errors=True)
    if verbose:
        print("\n".join(lines))
    return ok, "\n".join(lines)



# --------------------------------------------------------------------------- cross-architecture run
# A small static Linux program hashing 200k results of every kernel (FNV-1a
# over the result bits, inputs from a fixed xorshift stream: random bit
# patterns incl. NaN/inf/subnormals and values in [-215, 215]).  Built with
# zig cc for several linux-musl targets and run natively / under qemu-user;
# all hashes must agree.
CROSS_C = r"""#include <stdio.h>
#include <stdint.h>
#include "cp_math.h"
static uint64_t s = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
typedef union { float f; uint32_t u; } U32; typedef union { double f; uint64_t u; } U64;
static float rf(int i) {
  U32 v; uint64_t r = rnd();
  if (i & 1) { v.u = (uint32_t)r; return v.f; }
  return (float)((int32_t)(uint32_t)r) * 1e-7f;
}
static double rd(int i) {
  U64 v; uint64_t r = rnd();
  if (i & 1) { v.u = r; return v.f; }
  return (double)((int32_t)(uint32_t)r) * 1e-7;
}
#define N 200000
#define H(h, b) h = (h ^ (b)) * 0x100000001b3ull
#define T1F(fn) { uint64_t h = 0xcbf29ce484222325ull; s = 1234; \
  for (int i = 0; i < N; i++) { U32 v; v.f = fn(rf(i)); H(h, v.u); } \
  printf("%-8s %016llx\n", #fn, (unsigned long long)h); }
#define T2F(fn) { uint64_t h = 0xcbf29ce484222325ull; s = 1234; \
  for (int i = 0; i < N; i++) { float a = rf(i); U32 v; v.f = fn(a, rf(i >> 1)); H(h, v.u); } \
  printf("%-8s %016llx\n", #fn, (unsigned long long)h); }
#define T1D(fn) { uint64_t h = 0xcbf29ce484222325ull; s = 1234; \
  for (int i = 0; i < N; i++) { U64 v; v.f = fn(rd(i)); H(h, v.u); } \
  printf("%-8s %016llx\n", #fn, (unsigned long long)h); }
#define T2D(fn) { uint64_t h = 0xcbf29ce484222325ull; s = 1234; \
  for (int i = 0; i < N; i++) { double a = rd(i); U64 v; v.f = fn(a, rd(i >> 1)); H(h, v.u); } \
  printf("%-8s %016llx\n", #fn, (unsigned long long)h); }
#define TF(name, arity, accuracy) T##arity##F(cp_##name##f)
#define TD(name, arity, accuracy) T##arity##D(cp_##name)
int main(void) {
  CP_KERNELS(TF) T1F(cp_sqrtf_soft)
  CP_KERNELS(TD) T1D(cp_sqrt_soft)
  return 0;
}
"""
def cross_targets():
    """(name, zig cc flags, runner command) of every target with a [linux] table in its toml;
    the host's own architecture runs directly, the others on qemu-user."""
    host = host_arch()
    return [(t.name, ["-target", t.linux.triple, *t.linux.cflags],
             [] if t.name == host else [t.linux.qemu_user])
            for t in targets() if t.linux is not None]


def cross_run(verbose=True):
    """Build the hash program for each linux target and run it (qemu-user
    where needed).  Returns (all_equal, {target: output or error})."""
    build_stencils.clang_command()  # ziglang (zig cc), or a SystemExit naming the install
    tmp = tempfile.mkdtemp(prefix="cp_math_cross_")
    src = os.path.join(tmp, "det.c")
    with open(src, "w") as f:
        f.write(CROSS_C)
    outs = {}
    for name, flags, runner in cross_targets():
        exe = os.path.join(tmp, "det_" + name)
        cmd = [sys.executable, "-m", "ziglang", "cc", *flags, "-O2", "-fno-builtin",
               "-fno-math-errno", "-ffp-contract=off", "-std=c11", "-static", "-I", INC_DIR,
               *kernel_sources(), src, "-o", exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            outs[name] = "BUILD FAILED: " + r.stderr[-300:]
            continue
        if runner and shutil.which(runner[0]) is None:
            outs[name] = f"SKIPPED ({runner[0]} not installed; apt-get install qemu-user)"
            continue
        r = subprocess.run([*runner, exe], capture_output=True, text=True, timeout=900)
        outs[name] = r.stdout if r.returncode == 0 else f"RUN FAILED rc={r.returncode:d}"
    shutil.rmtree(tmp, ignore_errors=True)
    ran = {k: v for k, v in outs.items() if not v.startswith(("BUILD", "SKIPPED", "RUN"))}
    ref = next(iter(ran.values()), None)
    equal = ref is not None and all(v == ref for v in ran.values())
    if verbose:
        for k, v in outs.items():
            tag = v if v.startswith(("BUILD", "SKIPPED", "RUN")) else (
                f"hash of all outputs {hashlib.sha1(v.encode()).hexdigest()[:12]} "
                f"{'== reference' if v == ref else 'DIFFERS'}")
            print(f"{k:<8} {tag}")
        if ref:
            print(ref)
    return equal, outs

# --------------------------------------------------------------------------- driver
def run_table(quick=False, seed=12345, n32=None, n64=None, workers=2, exhaustive=True, log=print,
              rows=None):
    """Measure every row (one random stream in ROWS order), or only ``rows`` (each with its
    own stream, seeded by the seed and the row's name)."""
    rng = np.random.default_rng(seed)
    n32 = n32 or (200_000 if quick else 20_000_000)
    n64 = n64 or (3_000 if quick else 200_000)
    res = {}
    for row in rows or ROWS:
        if rows:
            rng = np.random.default_rng([seed, sum(row.encode())])
        t0 = time.time()
        r32 = measure_f32(row, n32, rng, exhaustive=exhaustive and not quick)
        t1 = time.time()
        r64 = measure_f64(row, n64, rng, workers=1 if quick else workers)
        res[row] = (r32, r64)
        log(f"{row:<10} {r32['domain']:<22} {r32['points']:10d} {r32['max']:9.3f}   "
            f"{_fmt_arg(r32['arg']):<26} | {r64['points']:8d} {r64['max']:9.3f}   "
            f"{_fmt_arg(r64['arg']):<30}  ({t1 - t0:.0f}s+{time.time() - t1:.0f}s)")
    return res


def _fmt_arg(a):
    if a is None:
        return "-"
    return ", ".join(f"{v:.9g}" for v in a)


def _label(row):
    return row.replace("_large", " (large)").replace("_small", " (small)")


def table_markdown(res, old=None):
    """The accuracy table of the rows in ``res``; with ``old`` (the table in docs/math.md), its
    lines of the rows not measured now are kept. Rows in ROWS order."""
    out = ["| function | domain (f32 / f64) | points f32 | max ulp f32 | argmax f32 | points f64 "
           "| max ulp f64 | argmax f64 |",
           "|---|---|---:|---:|---|---:|---:|---|"]
    kept = {}
    for line in (old or "").splitlines()[2:]:
        kept[line.split("|")[1].strip()] = line
    for row in ROWS:
        if row not in res:
            if _label(row) in kept:
                out.append(kept[_label(row)])
            continue
        r32, r64 = res[row]
        dom = (r32["domain"] if r32["domain"] == r64["domain"]
               else f"{r32['domain']} / {r64['domain']}")
        dom = dom.replace("|", "\\|")
        out.append(
            f"| {_label(row)} | {dom} "
            f"| {r32['points']:d} | {r32['max']:.3f} | {_fmt_arg(r32['arg'])} "
            f"| {r64['points']:d} | {r64['max']:.3f} | {_fmt_arg(r64['arg'])} |")
    return "\n".join(out)


def doc_section(marker):
    with open(DOC) as f:
        doc = f.read()
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    return doc[doc.index(begin) + len(begin):doc.index(end)].strip()


def write_doc_section(marker, text):
    with open(DOC) as f:
        doc = f.read()
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    i, j = doc.index(begin) + len(begin), doc.index(end)
    doc = doc[:i] + "\n" + text + "\n" + doc[j:]
    with open(DOC, "w") as f:
        f.write(doc)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small samples (a few seconds)")
    ap.add_argument("--speed", action="store_true", help="ns/call against host libm")
    ap.add_argument("--check-targets", action="store_true",
                    help="cross-compile + undefined symbols")
    ap.add_argument("--cross-run", action="store_true",
                    help="run a result-hash program on x86, AArch64, ARMv6/7, RV32/64 (qemu-user) "
                         "and compare")
    ap.add_argument("--no-exhaustive", action="store_true",
                    help="do not sweep every float32 for the exact kernels")
    ap.add_argument("--write-doc", action="store_true", help="write the results into docs/math.md")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--rows", help="measure only these rows (comma-separated, e.g. hypot,log1p); "
                                   "--write-doc then replaces just their lines")
    a = ap.parse_args(argv)
    rows = a.rows.split(",") if a.rows else None
    unknown = sorted(set(rows or ()) - set(ROWS))
    if unknown:
        ap.error(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    rc = 0
    if a.cross_run:
        eq, _ = cross_run()
        print("cross-architecture results bit-identical:", eq)
        return 0 if eq else 1
    if a.check_targets:
        ok, rep = check_targets()
        if a.write_doc:
            write_doc_section("targets", "```\n" + rep + "\n```")
        rc |= 0 if ok else 1
        if not (a.quick or a.speed):
            return rc
    if a.speed:
        rows = speed()
        lines = ["| kernel | cp_math ns/call | glibc ns/call | ratio |", "|---|---:|---:|---:|"]
        for kn, t0, t1, q in rows:
            lines.append(f"| {kn} | {t0:.1f} | {t1:.1f} | {q:.2f} |")
        print("\n".join(lines))
        if a.write_doc:
            write_doc_section("speed", "\n".join(lines))
        if not a.quick:
            return rc
    print("compiler:", host_build.host_compiler()[1])
    build(verbose=True)
    fails = special_values(32) + special_values(64)
    print(f"special values: {len(fails):d} failures")
    for f in fails[:50]:
        print("  ", f)
    print(f"{'function':<10} {'domain f32':<22} {'points':>10} {'max f32':>9}   {'argmax':<26} "
          f"| {'points':>8} {'max f64':>9}   argmax")
    res = run_table(quick=a.quick, seed=a.seed, workers=a.workers, exhaustive=not a.no_exhaustive,
                    rows=rows)
    md = table_markdown(res, doc_section("ulp") if rows else None)
    print()
    print(md)
    viol = [(row, r) for row in res for r, b in zip(res[row], (BOUND_F32, BOUND_F64), strict=True)
            if r["max"] > b]
    if viol or fails:
        rc |= 2
        for row, r in viol:
            print("bound exceeded:", row, r)
    if a.write_doc and not a.quick:
        write_doc_section("ulp", md)
    return rc


if __name__ == "__main__":
    sys.exit(main())
