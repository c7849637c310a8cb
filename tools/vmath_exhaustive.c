/* Every float32 argument through the branch-free lane forms of sin and cos (the fused loops'
 * and block forms' fast path, stencils/math/trig.c) against the scalar kernels: wherever the
 * lane form does not ask for the scalar kernel (bad), its result must be the scalar kernel's,
 * bit for bit. Prints the first mismatches and the counts; exit status 1 on a mismatch.
 *
 * Built with the stencils' compiler (tools/build_stencils.py's clang_command: ziglang's clang
 * with its own resource directory) for each x86-64 level whose table has fused loops, e.g.
 *   Z="python -m ziglang clang -resource-dir=<ziglang>/lib --target=x86_64-none-elf \
 *      -ffreestanding -O2 -std=c11 -ffp-contract=off -fno-math-errno -Wall \
 *      -Wno-unused-function -Istencils/include"
 *   $Z -march=x86-64-v3 -DFAST=cp_vk_sinf -DSCALAR=cp_sinf -c tools/vmath_exhaustive.c -o e.o
 *   cc -no-pie e.o -o e && ./e        # about a minute per function and level
 * (-march=x86-64, x86-64-v3, x86-64-v4; FAST/SCALAR cp_vk_sinf/cp_sinf, cp_vk_cosf/cp_cosf).
 */
#include "../stencils/math/trig.c"

int printf(const char *fmt, ...);

#define N 4096u
#define CP_STR_(x) #x
#define CP_STR(x) CP_STR_(x)

int main(void)
{
    static float a[N], y[N];
    static uint32_t bad[N];
    unsigned long long mismatches = 0, slow = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += N) {
        for (uint32_t i = 0; i < N; i++) a[i] = cp_u2f((uint32_t)(base + i));
        for (uint32_t i = 0; i < N; i++) { /* vectorised like the block forms */
            uint32_t b;
            y[i] = FAST(a[i], &b);
            bad[i] = b;
        }
        for (uint32_t i = 0; i < N; i++) {
            if (bad[i]) { slow++; continue; }
            uint32_t want = cp_f2u(SCALAR(a[i])), got = cp_f2u(y[i]);
            if (got != want && mismatches++ < 10)
                printf("x=%08x lane form %08x scalar %08x\n", cp_f2u(a[i]), got, want);
        }
    }
    printf("%s: %llu mismatches, %llu arguments to the scalar kernel\n", CP_STR(FAST), mismatches,
           slow);
    return mismatches != 0;
}
