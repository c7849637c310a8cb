import sys; sys.path.insert(0, __import__('os').path.dirname(__file__))
from fits import *
from multiprocessing import Pool
JOBS = [('sin','f',3),('cos','f',2),('tan','f',6),('asin','f',5),('atan','f',4),('tanh','f',4),('exp','f',5),('log','f',2),('log2','f',2),
        ('sin','d',6),('cos','d',5),('tan','d',15),('asin','d',12),('atan','d',11),('tanh','d',10),('exp','d',10),('log','d',6),('log2','d',7)]
def run(j):
    name, kind, n = j
    c, cr, e, e2 = fitone(name, n, kind)
    pre = name.upper() + ('F' if kind=='f' else 'D')
    lines = ['/* %s: degree %d, minimax rel. err 2^%.2f (after rounding coeffs 2^%.2f) */' % (pre, n, float(mp.log(e,2)), float(mp.log(e2,2)))]
    for i, v in enumerate(cr):
        lines.append('#define %s%d %s' % (pre, i, cfmt(v, kind)))
    return '\n'.join(lines)
if __name__ == '__main__':
    with Pool(2) as p:
        out = p.map(run, JOBS)
    open('coefs.h','w').write('\n'.join(out)+'\n')
