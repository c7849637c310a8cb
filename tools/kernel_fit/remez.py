import mpmath as mp
import numpy as np

mp.mp.dps = 80

def remez(f, w, a, b, n, iters=40, grid=4000):
    """minimise max |w(t)*(P(t)-f(t))| over [a,b], P of degree n (n+1 coeffs)."""
    a = mp.mpf(a)
    b = mp.mpf(b)
    m = n + 2
    # initial reference: Chebyshev extrema
    xs = [ (a+b)/2 + (b-a)/2*mp.cos(mp.pi*(m-1-j)/(m-1)) for j in range(m)]
    xs = [x if abs(x) > (b-a)*mp.mpf('1e-9') else x + (b-a)*mp.mpf('1e-3') for x in xs]
    gx = [a + (b-a)*(1-mp.cos(mp.pi*k/(grid-1)))/2 for k in range(grid)]
    fg = [f(x) for x in gx]
    wg = [w(x) for x in gx]
    E = None
    maxe = None
    for _it in range(iters):
        A = mp.matrix(m, m)
        rhs = mp.matrix(m, 1)
        for j, x in enumerate(xs):
            for i in range(n+1):
                A[j, i] = x**i
            wx = w(x)
            A[j, n+1] = (-1)**j / wx
            rhs[j] = f(x)
        sol = mp.lu_solve(A, rhs)
        c = [sol[i] for i in range(n+1)]
        E = sol[n+1]
        # error on grid
        err = []
        for x, fx, wx in zip(gx, fg, wg, strict=True):
            p = mp.mpf(0)
            for ci in reversed(c):
                p = p*x + ci
            err.append(wx*(p - fx))
        # find alternating extrema
        i = 0
        N = len(err)
        # segments of constant sign
        segs = []
        start = 0
        for k in range(1, N+1):
            if k == N or mp.sign(err[k]) != mp.sign(err[start]):
                seg = range(start, k)
                kk = max(seg, key=lambda q: abs(err[q]))
                segs.append(kk)
                start = k
        # reduce to m points keeping largest, preserving alternation
        while len(segs) > m:
            # drop smaller of the ends or merge smallest
            if abs(err[segs[0]]) < abs(err[segs[-1]]):
                segs.pop(0)
            else:
                segs.pop()
        if len(segs) < m:
            break
        newxs = [gx[k] for k in segs]
        maxe = max(abs(e) for e in err)
        xs = newxs
        if abs(maxe - abs(E)) / maxe < 1e-6:
            break
    return c, maxe

def rnd(c, kind):
    if kind == 'f':
        return [float(np.float32(float(x))) for x in c]
    return [float(x) for x in c]

def check(c, f, w, a, b, grid=20000):
    a = mp.mpf(a)
    b = mp.mpf(b)
    mx = 0
    for k in range(grid+1):
        x = a + (b-a)*k/grid
        p = mp.mpf(0)
        for ci in reversed(c):
            p = p*x + mp.mpf(ci)
        mx = max(mx, abs(w(x)*(p - f(x))))
    return mx

def cfmt(v, kind):
    if kind == 'f':
        return float(np.float32(v)).hex() + 'f'
    return float(v).hex()
