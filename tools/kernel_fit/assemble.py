import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, '..', '..')
def clean(s):
    s = re.sub(r'(0x1\.[0-9a-f]*?)0+p', r'\1p', s)
    s = s.replace('0x1.p', '0x1p')
    return s
coefs = clean(open(os.path.join(HERE, 'coefs.h')).read())
tabs = clean(open(os.path.join(HERE, 'tables.h')).read())
# split into blocks
def blocks(text):
    out = {}
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r'#define (\w+) ', line)
        if m:
            out[m.group(1)] = line
            i += 1
            continue
        m = re.match(r'static const \w+ (\w+)\[', line)
        if m:
            j = i
            while not lines[j].startswith('};'):
                j += 1
            out[m.group(1)] = '\n'.join(lines[i:j+1])
            i = j+1
            continue
        m = re.match(r'/\* (\w+): degree', line)
        if m:
            out['#'+m.group(1)] = line
        i += 1
    return out
B = blocks(coefs)
B.update(blocks(tabs))
for fn in sys.argv[1:]:
    src = open(os.path.join(HERE, 'templates', fn + '.in')).read()
    def rep(m):
        names = m.group(1).split()
        res = []
        for n in names:
            if n.endswith('*'):
                pre = n[:-1]
                if '#'+pre in B:
                    res.append(B['#'+pre])
                ks = sorted([k for k in B if re.fullmatch(re.escape(pre)+r'\d+', k)],
                            key=lambda k: int(k[len(pre):]))
                res += [B[k] for k in ks]
            else:
                res.append(B[n])
        return '\n'.join(res)
    src = re.sub(r'@@([^@]*)@@', rep, src)
    open(os.path.join(ROOT, 'stencils', 'math', fn), 'w').write(src)
print('ok')
