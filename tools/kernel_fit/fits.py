import sys

sys.path.insert(0, __import__('os').path.dirname(__file__))
from remez import check, mp, remez, rnd

S = mp.sqrt
LN2 = mp.log(2)
FITS = {
 'sin': (lambda t: (mp.sin(S(t))-S(t))/S(t)**3, lambda t: S(t)**3/mp.sin(S(t)), 1e-12, 0.786**2),
 'cos': (lambda t: (mp.cos(S(t))-1+t/2)/t**2, lambda t: t**2/mp.cos(S(t)), 1e-12, 0.786**2),
 'tan': (lambda t: (mp.tan(S(t))-S(t))/S(t)**3, lambda t: S(t)**3/mp.tan(S(t)), 1e-12, 0.786**2),
 'asin': (lambda t: (mp.asin(S(t))-S(t))/S(t)**3, lambda t: S(t)**3/mp.asin(S(t)), 1e-12, 0.25),
 'atan': (lambda t: (mp.atan(S(t))-S(t))/S(t)**3, lambda t: S(t)**3/mp.atan(S(t)), 1e-12,
          (7/16.)**2),
 'tanh': (lambda t: (mp.tanh(S(t))-S(t))/S(t)**3, lambda t: S(t)**3/mp.tanh(S(t)), 1e-12, 0.55**2),
 'exp': (lambda r: (mp.expm1(r)-r)/r**2, lambda r: r**2/abs(mp.expm1(r)), -0.3467, 0.3467),
 'log': (lambda r: (mp.log1p(r)-r+r**2/2)/r**3, lambda r: abs(r**3/mp.log1p(r)), -0.0135, 0.0135),
 'log2': (lambda r: (mp.log1p(r)/LN2-(r-r**2/2)/LN2)/r**3,
          lambda r: abs(r**3/(mp.log1p(r)/LN2)), -0.0135, 0.0135),
}
def fitone(name, n, kind):
    f, w, a, b = FITS[name]
    if a < 0 < b:
        # avoid r=0 singular evaluation: shift grid endpoints fine; f at 0 evaluated by limit
        # -> nudge
        f0 = f
        def f(r, f0=f0):
            return f0(r if r != 0 else mp.mpf('1e-30'))
        w0 = w
        def w(r, w0=w0):
            return w0(r if r != 0 else mp.mpf('1e-30'))
    c, e = remez(f, w, a, b, n)
    cr = rnd(c, kind)
    e2 = check(cr, f, w, a, b, 4000)
    return c, cr, e, e2
if __name__ == '__main__':
    name = sys.argv[1]
    kind = sys.argv[2]
    for n in map(int, sys.argv[3:]):
        c, cr, e, e2 = fitone(name, n, kind)
        print(name, kind, n, f'remez err 2^{float(mp.log(e,2)):.2f}',
              f'rounded 2^{float(mp.log(e2,2)):.2f}')
