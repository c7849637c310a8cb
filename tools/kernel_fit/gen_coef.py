import sys
from multiprocessing import Pool

sys.path.insert(0, __import__('os').path.dirname(__file__))
from fits import fitone
from remez import cfmt, mp

JOBS = [('sin','f',3),('cos','f',2),('tan','f',6),('asin','f',5),('atan','f',4),('tanh','f',4),
        ('exp','f',5),('log','f',2),('log2','f',2),
        ('sin','d',6),('cos','d',5),('tan','d',15),('asin','d',12),('atan','d',11),
        ('tanh','d',10),('exp','d',10),('log','d',6),('log2','d',7)]
def run(j):
    name, kind, n = j
    _c, cr, e, e2 = fitone(name, n, kind)
    pre = name.upper() + ('F' if kind=='f' else 'D')
    lines = [f'/* {pre}: degree {n:d}, minimax rel. err 2^{float(mp.log(e,2)):.2f} '
             f'(after rounding coeffs 2^{float(mp.log(e2,2)):.2f}) */']
    for i, v in enumerate(cr):
        lines.append(f'#define {pre}{i:d} {cfmt(v, kind)}')
    return '\n'.join(lines)
if __name__ == '__main__':
    with Pool(2) as p:
        out = p.map(run, JOBS)
    open('coefs.h','w').write('\n'.join(out)+'\n')
