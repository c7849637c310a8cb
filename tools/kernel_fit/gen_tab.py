import mpmath as mp
import numpy as np

mp.mp.dps = 120
def f32(v): return float(np.float32(float(v)))
def fh(v): return float(np.float32(float(v))).hex()+'f'
def dh(v): return float(v).hex()
def split_bits(v, bits):
    # round v to 'bits' significant bits (nearest)
    v = mp.mpf(v)
    e = int(mp.floor(mp.log(abs(v),2)))
    q = mp.nint(v / mp.mpf(2)**(e-bits+1))
    return q * mp.mpf(2)**(e-bits+1)
out = []
# ---- log tables
invc = []
for j in range(-32, 65):
    c = 1 + mp.mpf(j)/128
    if j >= 0:
        ic = mp.nint(128/c)/128
    else:
        ic = mp.nint(64/c)/64
    invc.append(ic)
    # bound check
    lo = max(mp.mpf('0.75'), c - mp.mpf(2)**-8)
    hi = min(mp.mpf('1.5'), c + mp.mpf(2)**-8)
    rb = max(abs(lo*ic-1), abs(hi*ic-1))
    assert rb < mp.mpf(2)**-6, (j, rb)
maxr = max(max(abs((1+mp.mpf(j)/128 + s*mp.mpf(2)**-8)*invc[j+32]-1) for s in (-1,1))
           for j in range(-32,65))
out.append('/* log tables: j=-32..64, c=1+j/128, invc=1/c rounded to 2^-7 (c>=1) or 2^-6 (c<1); '
           f'max|r|={float(maxr):.5f} */')
def emit(name, typ, vals, fmt, per=4):
    s = f'static const {typ} {name}[{len(vals):d}] = {{\n'
    for i in range(0, len(vals), per):
        s += '    ' + ', '.join(fmt(v) for v in vals[i:i+per]) + ',\n'
    return s + '};'
out.append(emit('cp_log_invcf', 'float', invc, fh, 6))
out.append(emit('cp_log_invc', 'double', invc, dh, 4))
for tag, fn in (('ln', lambda v: -mp.log(v)), ('l2', lambda v: -mp.log(v,2))):
    vals = [fn(v) for v in invc]
    hf = [f32(v) for v in vals]
    lf = [f32(v - mp.mpf(h)) for v, h in zip(vals, hf, strict=True)]
    hd = [float(v) for v in vals]
    ld = [float(v - mp.mpf(h)) for v, h in zip(vals, hd, strict=True)]
    out.append(emit(f'cp_log_{tag}_hif', 'float', hf, lambda v: float(v).hex()+'f'))
    out.append(emit(f'cp_log_{tag}_lof', 'float', lf, lambda v: float(v).hex()+'f'))
    out.append(emit(f'cp_log_{tag}_hi', 'double', hd, lambda v: float(v).hex(), 3))
    out.append(emit(f'cp_log_{tag}_lo', 'double', ld, lambda v: float(v).hex(), 3))
# ---- 2/pi bits
mp.mp.prec = 2000
tp = 2/mp.pi
words = [0]
v = tp
for _i in range(40):
    v *= 2**32
    w = int(mp.floor(v))
    words.append(w)
    v -= w
out.append('/* bits of 2/pi, 32 per word, preceded by one zero word */')
out.append(emit('cp_two_over_pi', 'uint32_t', words, lambda w: f'0x{w:08x}u', 6))
mp.mp.dps = 120
out.append(f'#define CP_PIO2_Q62 0x{int(mp.nint(mp.pi/2 * 2**62)):016x}ull '
           '/* round(pi/2 * 2^62) */')
# ---- scalar constants
def hilo_f(name, v):
    h = f32(v)
    lo = f32(v - mp.mpf(h))
    out.append(f'#define {name}_HI {fh(h)}\n#define {name}_LO {fh(lo)}')
def hilo_d(name, v):
    h = float(v)
    lo = float(v - mp.mpf(h))
    out.append(f'#define {name}_HI {dh(h)}\n#define {name}_LO {dh(lo)}')
for nm, v in (('PIO2', mp.pi/2), ('PI', mp.pi), ('PIO4', mp.pi/4), ('ATAN0P5', mp.atan(0.5)),
              ('ATAN1P5', mp.atan(1.5)), ('LN2', mp.log(2)), ('INVLN2', 1/mp.log(2))):
    hilo_f('CPF_'+nm, v)
    hilo_d('CPD_'+nm, v)
# Cody-Waite ln2 with few bits
l2h16 = split_bits(mp.log(2), 16)
l2h16 = mp.floor(mp.log(2)*2**16)/2**16  # truncated: 16 fractional bits -> 16 significant bits
out.append(f'#define CPF_LN2_CW_HI {fh(l2h16)} /* 16 bits */\n'
           f'#define CPF_LN2_CW_LO {fh(mp.log(2)-l2h16)}')
l2h42 = mp.floor(mp.log(2)*2**42)/2**42
out.append(f'#define CPD_LN2_CW_HI {dh(l2h42)} /* 42 bits */\n'
           f'#define CPD_LN2_CW_LO {dh(mp.log(2)-l2h42)}')
out.append(f'#define CPF_INVLN2 {fh(1/mp.log(2))}\n#define CPD_INVLN2 {dh(1/mp.log(2))}')
# pi/2 in 23-bit pieces for double Cody-Waite
rest = mp.pi/2
parts = []
for i in range(4):
    p = mp.floor(rest * 2**(22 + 23*i)) / 2**(22 + 23*i)  # truncation to grid 2^-(22+23i)
    parts.append(p)
    rest -= p
parts.append(rest)
for i, p in enumerate(parts):
    out.append(f'#define CPD_PIO2_CW{i+1:d} {dh(p)}')
    if i < 4:
        assert mp.mpf(float(p)) == p
out.append(f'#define CPD_INVPIO2 {dh(2/mp.pi)}\n#define CPF_INVPIO2 {fh(2/mp.pi)}')
open('tables.h','w').write('\n'.join(out)+'\n')
print('ok', float(maxr))
# float Cody-Waite pi/2: two 17-bit parts (exact k*P for k < 2^7) + rounded tail
mp.mp.dps = 60
p = mp.pi/2
p1 = mp.floor(p*2**16)/2**16
p2 = mp.floor((p-p1)*2**33)/2**33
extra = (f"#define CPF_PIO2_C1 {fh(p1)}\n#define CPF_PIO2_C2 {fh(p2)}\n"
         f"#define CPF_PIO2_C3 {fh(p-p1-p2)}\n")
open('tables.h','a').write(extra)
