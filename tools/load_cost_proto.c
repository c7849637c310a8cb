/* Load-cost prototype of verified loading, proposal (a) (docs/decisions/2026-12-04-verified-loading.md):
 * copy and patch a program from stencil ids with every check. Input: tools/measure_relocs.py dump.
 * Build: gcc -D_POSIX_C_SOURCE=200809L -std=c11 -O2 -Irunner/include -Irunner/src -o /tmp/proto \
 *        tools/load_cost_proto.c runner/src/patch.c runner/src/message.c; run: /tmp/proto FILE REPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"
typedef struct __attribute__((packed)) { uint32_t off; uint16_t len; uint8_t strip, align; uint32_t first; uint16_t n; } fn_t;
typedef struct __attribute__((packed)) { uint16_t off; uint8_t kind, type; int32_t addend; uint16_t tgt; } rl_t;
typedef struct { uint32_t site; uint8_t kind; uint64_t target; } pend_t;
static uint8_t out[1 << 22]; static pend_t pend[1 << 16]; static uint32_t waiting[64];
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb"); static uint8_t buf[1 << 21]; size_t len = fread(buf, 1, sizeof buf, f); fclose(f); (void)len;
    uint32_t *h = (uint32_t *)buf; uint32_t nf = h[0], nr = h[1], nk = h[2], ncode = h[3], nman = h[4], nch = h[5];
    const fn_t *fns = (const fn_t *)(buf + 32); const rl_t *rls = (const rl_t *)(fns + nf);
    const uint8_t *kraw = (const uint8_t *)(rls + nr); const uint8_t *code = kraw + 20 * nk; const uint8_t *man = code + ncode;
    cp_patch_kind kinds[64]; cp_error err;
    for (uint32_t k = 0; k < nk; k++) if (cp_kind_decode(kraw + 20 * k, k, &kinds[k], &err)) { printf("kind %u bad\n", k); }
    uint64_t data_offset = 1 << 20, data_size = 1 << 16, base = (uint64_t)(uintptr_t)out;
    int reps = atoi(argv[2]); uint32_t ops = 0, npatch = 0, fails = 0;
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int rep = 0; rep < reps; rep++) {
        uint32_t pos = 0, at = 0, np = 0, nw = 0; ops = 0; fails = 0;
        uint8_t helper_used[4096] = {0}; uint16_t helpers[256]; uint32_t nh = 0;
        for (uint32_t c = 0; c < nch; c++) {
            uint32_t nseq; memcpy(&nseq, man + pos, 4); pos += 4;
            for (uint32_t s = 0; s < nseq; s++) {
                uint16_t id; uint8_t nslot; memcpy(&id, man + pos, 2); nslot = man[pos + 2]; pos += 3;
                uint32_t slots[8]; memcpy(slots, man + pos, 4u * nslot); pos += 4u * nslot;
                if (id >= nf) { fails++; continue; }                      /* rule: a stencil of the table */
                const fn_t *fn = &fns[id];
                while (at % fn->align) out[at++] = 0x90;
                for (uint32_t w = 0; w < nw; w++) pend[np++] = (pend_t){waiting[w], 0xFF, at};
                nw = 0;
                uint32_t body = fn->len - (s + 1 < nseq ? fn->strip : 0);
                memcpy(out + at, code + fn->off, body);
                for (uint32_t r = 0; r < fn->n; r++) {
                    const rl_t *rl = &rls[fn->first + r];
                    if (rl->off >= body) continue;
                    if (rl->type == 0) {                                   /* rule: slot inside the data */
                        if (rl->tgt >= nslot || (uint64_t)slots[rl->tgt] + 4 > data_size) { fails++; continue; }
                        pend[np++] = (pend_t){at + rl->off, rl->kind, data_offset + slots[rl->tgt] + (int64_t)rl->addend};
                    } else if (rl->type == 1) { waiting[nw++] = at + rl->off; pend[np].kind = rl->kind; }
                    else if (rl->type == 2) { if (!helper_used[rl->tgt % 4096]) { helper_used[rl->tgt % 4096] = 1; helpers[nh++] = rl->tgt; }
                        pend[np++] = (pend_t){at + rl->off, rl->kind, at}; }
                    else pend[np++] = (pend_t){at + rl->off, rl->kind, at};
                }
                at += body; ops++;
            }
        }
        for (uint32_t k = 0; k < nh; k++) { const fn_t *fn = &fns[helpers[k]]; memcpy(out + at, code + fn->off, fn->len); at += fn->len; }
        for (uint32_t p = 0; p < np; p++) {
            if (pend[p].kind == 0xFF) continue;
            uint8_t *w = out + pend[p].site;
            if (cp_patch_apply(&kinds[pend[p].kind], w, base + pend[p].site, base + pend[p].target, p, &err)) fails++;
        }
        npatch = np;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / reps;
    printf("%s ops %u patches %u failed-checks %u: %.0f ns/load, %.1f ns/op\n", argv[1], ops, npatch, fails, ns, ns / ops);
    return 0;
}
