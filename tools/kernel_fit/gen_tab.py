import mpmath as mp, numpy as np
mp.mp.dps = 120
def f32(v): return float(np.float32(float(v)))
def fh(v): return float(np.float32(float(v))).hex()+'f'
def dh(v): return float(v).hex()
def split_bits(v, bits):
    # round v to 'bits' significant bits (nearest)
    v = mp.mpf(v); e = int(mp.floor(mp.log(abs(v),2)))
    q = mp.nint(v / mp.mpf(2)**(e-bits+1))
    return q * mp.mpf(2)**(e-bits+1)
out = []
# ---- log tables
invc = []
for j in range(-32, 65):
    c = 1 + mp.mpf(j)/128
    if j >= 0: ic = mp.nint(128/c)/128
    else: ic = mp.nint(64/c)/64
    invc.append(ic)
    # bound check
    lo = max(mp.mpf('0.75'), c - mp.mpf(2)**-8); hi = min(mp.mpf('1.5'), c + mp.mpf(2)**-8)
    rb = max(abs(lo*ic-1), abs(hi*ic-1))
    assert rb < mp.mpf(2)**-6, (j, rb)
maxr = max(max(abs((1+mp.mpf(j)/128 + s*mp.mpf(2)**-8)*invc[j+32]-1) for s in (-1,1)) for j in range(-32,65))
out.append('/* log tables: j=-32..64, c=1+j/128, invc=1/c rounded to 2^-7 (c>=1) or 2^-6 (c<1); max|r|=%.5f */' % float(maxr))
def emit(name, typ, vals, fmt, per=4):
    s = 'static const %s %s[%d] = {\n' % (typ, name, len(vals))
    for i in range(0, len(vals), per):
        s += '    ' + ', '.join(fmt(v) for v in vals[i:i+per]) + ',\n'
    return s + '};'
out.append(emit('cp_log_invcf', 'float', invc, fh, 6))
out.append(emit('cp_log_invc', 'double', invc, dh, 4))
for tag, fn in (('ln', lambda v: -mp.log(v)), ('l2', lambda v: -mp.log(v,2))):
    vals = [fn(v) for v in invc]
    hf = [f32(v) for v in vals]; lf = [f32(v - mp.mpf(h)) for v, h in zip(vals, hf)]
    hd = [float(v) for v in vals]; ld = [float(v - mp.mpf(h)) for v, h in zip(vals, hd)]
    out.append(emit('cp_log_%s_hif' % tag, 'float', hf, lambda v: float(v).hex()+'f'))
    out.append(emit('cp_log_%s_lof' % tag, 'float', lf, lambda v: float(v).hex()+'f'))
    out.append(emit('cp_log_%s_hi' % tag, 'double', hd, lambda v: float(v).hex(), 3))
    out.append(emit('cp_log_%s_lo' % tag, 'double', ld, lambda v: float(v).hex(), 3))
# ---- 2/pi bits
mp.mp.prec = 2000
tp = 2/mp.pi
words = [0]
v = tp
for i in range(40):
    v *= 2**32
    w = int(mp.floor(v)); words.append(w); v -= w
out.append('/* bits of 2/pi, 32 per word, preceded by one zero word */')
out.append(emit('cp_two_over_pi', 'uint32_t', words, lambda w: '0x%08xu' % w, 6))
mp.mp.dps = 120
out.append('#define CP_PIO2_Q62 0x%016xull /* round(pi/2 * 2^62) */' % int(mp.nint(mp.pi/2 * 2**62)))
# ---- scalar constants
def hilo_f(name, v):
    h = f32(v); l = f32(v - mp.mpf(h))
    out.append('#define %s_HI %s\n#define %s_LO %s' % (name, fh(h), name, fh(l)))
def hilo_d(name, v):
    h = float(v); l = float(v - mp.mpf(h))
    out.append('#define %s_HI %s\n#define %s_LO %s' % (name, dh(h), name, dh(l)))
for nm, v in (('PIO2', mp.pi/2), ('PI', mp.pi), ('PIO4', mp.pi/4), ('ATAN0P5', mp.atan(0.5)), ('ATAN1P5', mp.atan(1.5)), ('LN2', mp.log(2)), ('INVLN2', 1/mp.log(2))):
    hilo_f('CPF_'+nm, v); hilo_d('CPD_'+nm, v)
# Cody-Waite ln2 with few bits
l2h16 = split_bits(mp.log(2), 16); 
l2h16 = mp.floor(mp.log(2)*2**16)/2**16  # truncated: 16 fractional bits -> 16 significant bits
out.append('#define CPF_LN2_CW_HI %s /* 16 bits */\n#define CPF_LN2_CW_LO %s' % (fh(l2h16), fh(mp.log(2)-l2h16)))
l2h42 = mp.floor(mp.log(2)*2**42)/2**42
out.append('#define CPD_LN2_CW_HI %s /* 42 bits */\n#define CPD_LN2_CW_LO %s' % (dh(l2h42), dh(mp.log(2)-l2h42)))
out.append('#define CPF_INVLN2 %s\n#define CPD_INVLN2 %s' % (fh(1/mp.log(2)), dh(1/mp.log(2))))
# pi/2 in 23-bit pieces for double Cody-Waite
rest = mp.pi/2; parts = []
for i in range(4):
    p = mp.floor(rest * 2**(22 + 23*i)) / 2**(22 + 23*i)  # truncation to grid 2^-(22+23i)
    parts.append(p); rest -= p
parts.append(rest)
for i, p in enumerate(parts):
    out.append('#define CPD_PIO2_CW%d %s' % (i+1, dh(p)))
    if i < 4: assert mp.mpf(float(p)) == p
out.append('#define CPD_INVPIO2 %s\n#define CPF_INVPIO2 %s' % (dh(2/mp.pi), fh(2/mp.pi)))
open('tables.h','w').write('\n'.join(out)+'\n')
print('ok', float(maxr))
# float Cody-Waite pi/2: two 17-bit parts (exact k*P for k < 2^7) + rounded tail
mp.mp.dps = 60
p = mp.pi/2
p1 = mp.floor(p*2**16)/2**16
p2 = mp.floor((p-p1)*2**33)/2**33
extra = "#define CPF_PIO2_C1 %s\n#define CPF_PIO2_C2 %s\n#define CPF_PIO2_C3 %s\n" % (fh(p1), fh(p2), fh(p-p1-p2))
open('tables.h','a').write(extra)
