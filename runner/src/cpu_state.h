/* The CPU state a job starts in and must leave (docs/realtime.md, "Faults and the safe state"):
 * the FP control state the stencils were compiled for (round to nearest, every exception
 * masked, no flush-to-zero) and, on x86, EFLAGS.DF/AC/TF clear and an empty x87 stack. The
 * guard calls cp_cpu_enter before a chain and cp_cpu_leave right after it returns: a chain
 * that changed any of it is a fault (CP_FAULT_CPU_STATE), and the caller's own FP control
 * state is put back either way, so neither a later program nor the host process (NumPy
 * in-process) computes under a state a program left behind. No system call: a few
 * instructions per job. Architectures without an FP control register here (a soft-float ARM)
 * check nothing. */
#ifndef COPAPY_CPU_STATE_H
#define COPAPY_CPU_STATE_H

#include <stdint.h>

/* what a job changed (cp_fault.code of a CP_FAULT_CPU_STATE fault; cp_fault.address holds the
 * FP control word the job left) */
enum {
    CP_CPU_CHANGED_FP_CONTROL = 1, /* MXCSR / x87 CW / FPCR / FPSCR / fcsr.frm */
    CP_CPU_CHANGED_FLAGS = 2,      /* EFLAGS.DF, AC or TF */
    CP_CPU_CHANGED_X87_STACK = 4,  /* x87 registers left on the stack */
    CP_CPU_CHANGED_SIGNAL_MASK = 8,   /* a fault signal blocked (platform_posix.c) */
    CP_CPU_CHANGED_SIGNAL_HANDLER = 16 /* a fault signal's handler replaced (platform_posix.c) */
};

/* the caller's FP control state, saved on entry, put back on exit */
typedef struct cp_cpu_saved {
    uint32_t fp;  /* MXCSR, FPCR, FPSCR or fcsr */
    uint32_t x87; /* x87 control word (x86) */
} cp_cpu_saved;

/* A chain of AVX stencils (the fused loops of the x86_64-v3 and -v4 tables hand their blocks
 * from stencil to stencil in ymm/zmm registers, so they cannot end with vzeroupper) returns
 * with the upper halves of the vector registers in use. Until a vzeroupper, every legacy SSE
 * instruction of the host (this runner, Python, NumPy) merges those halves: Program.run of a
 * jitted fused loop on 8 elements took 154 ns, 43 ns with a vzeroupper after the chain
 * (docs/decisions/2026-12-04-sin-floor-avx2.md). cp_cpu_leave and cp_cpu_check clear
 * them where the CPU executes vzeroupper (AVX with the OS saving the ymm state: CPUID once
 * per translation unit, cached; without AVX no chain can have left them in use). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

static inline int cp_cpu_detect_avx(void)
{
    uint32_t a, b, c, d;
    if (__get_cpuid(1u, &a, &b, &c, &d) == 0 || (c & (3u << 27)) != (3u << 27)) {
        return 0; /* no OSXSAVE or no AVX */
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    return (lo & 6u) == 6u; /* the OS saves the SSE and ymm state */
}

static inline void cp_cpu_clear_upper(void)
{
    static int8_t avx = -1; /* -1: not asked yet; a race asks twice and stores the same */
    int8_t known = __atomic_load_n(&avx, __ATOMIC_RELAXED);
    if (known < 0) {
        known = (int8_t)cp_cpu_detect_avx();
        __atomic_store_n(&avx, known, __ATOMIC_RELAXED);
    }
    if (known) {
        __asm__ volatile("vzeroupper" ::: "memory");
    }
}
#else
static inline void cp_cpu_clear_upper(void)
{
}
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define CP_CPU_MXCSR 0x1f80u      /* round to nearest, all exceptions masked, no FTZ/DAZ */
#define CP_CPU_MXCSR_FLAGS 0x3fu  /* the sticky exception flags a job may set */
#define CP_CPU_X87_CW 0x037fu     /* all masked, extended precision, round to nearest */
#define CP_CPU_X87_CW_MASK 0x0f3fu /* masks, precision and rounding (bit 6 reads 1 anyway) */
#define CP_CPU_EFLAGS_BAD 0x40500u /* AC (18), DF (10), TF (8) */
#if defined(__x86_64__) || defined(__SSE__)
#define CP_CPU_HAS_MXCSR 1
#endif


/* Enter and leave write a control register only when its value differs: fldcw, ldmxcsr and
 * popf are serialising or close to it (~20 ns a guard run here), and a caller usually is in
 * the defined state already (the same value is the same state; the sticky MXCSR flags are the
 * caller's and come back on leave). */
static inline void cp_cpu_enter(cp_cpu_saved *saved)
{
    uint16_t cw = 0;
    const uint16_t want = CP_CPU_X87_CW;
    __asm__ volatile("fnstcw %0\n\tcld" : "=m"(cw) : : "memory", "cc");
    if (cw != want) {
        __asm__ volatile("fldcw %0" : : "m"(want) : "memory");
    }
    saved->x87 = cw;
#ifdef CP_CPU_HAS_MXCSR
    uint32_t mx = 0;
    const uint32_t mx_want = CP_CPU_MXCSR;
    __asm__ volatile("stmxcsr %0" : "=m"(mx) : : "memory");
    if ((mx & ~CP_CPU_MXCSR_FLAGS) != mx_want) { /* the flags: no stencil reads them */
        __asm__ volatile("ldmxcsr %0" : : "m"(mx_want) : "memory");
    }
    saved->fp = mx;
#else
    saved->fp = 0;
#endif
}

/* What the x87 unit was left with: a control word other than the defined one, or values on
 * its stack (TOP is not 0). Writes the control word to *fp_left; changes nothing. */
static inline uint32_t cp_cpu_x87_changed(uint32_t *fp_left)
{
    uint16_t cw = 0, sw = 0;
    __asm__ volatile("fnstcw %0\n\tfnstsw %1" : "=m"(cw), "=m"(sw) : : "memory");
    *fp_left = cw;
    uint32_t changed = 0;
    if ((cw & CP_CPU_X87_CW_MASK) != (CP_CPU_X87_CW & CP_CPU_X87_CW_MASK)) {
        changed |= CP_CPU_CHANGED_FP_CONTROL;
    }
    if ((sw & 0x3800u) != 0) {
        changed |= CP_CPU_CHANGED_X87_STACK;
    }
    return changed;
}

/* Clears DF, AC and TF first (before the compiler's code may touch memory unaligned or copy
 * backwards), then checks and puts back the FP state. Returns the CP_CPU_CHANGED_* bits. */
static inline uint32_t cp_cpu_leave(const cp_cpu_saved *saved, uint32_t *fp_left)
{
    cp_cpu_clear_upper();
    uintptr_t flags;
#if defined(__x86_64__)
    __asm__ volatile("pushfq\n\tpopq %0\n\ttestq %1, %0\n\tjz 1f\n\t"
                     "pushq %0\n\tandq %2, (%%rsp)\n\tpopfq\n1:"
                     : "=&r"(flags) : "i"((long)CP_CPU_EFLAGS_BAD), "i"(~(long)CP_CPU_EFLAGS_BAD)
                     : "memory", "cc");
#else
    __asm__ volatile("pushfl\n\tpopl %0\n\ttestl %1, %0\n\tjz 1f\n\t"
                     "pushl %0\n\tandl %2, (%%esp)\n\tpopfl\n1:"
                     : "=&r"(flags) : "i"((long)CP_CPU_EFLAGS_BAD), "i"(~(long)CP_CPU_EFLAGS_BAD)
                     : "memory", "cc");
#endif
    uint32_t changed = (flags & CP_CPU_EFLAGS_BAD) != 0 ? (uint32_t)CP_CPU_CHANGED_FLAGS : 0u;
    changed |= cp_cpu_x87_changed(fp_left);
    const uint16_t back = (uint16_t)saved->x87;
    if ((changed & (CP_CPU_CHANGED_FP_CONTROL | CP_CPU_CHANGED_X87_STACK)) != 0) {
        __asm__ volatile("fninit" ::: "memory"); /* empty stack, pending exceptions cleared */
        __asm__ volatile("fldcw %0" : : "m"(back) : "memory");
    } else if ((uint16_t)*fp_left != back) { /* the defined word, entered from another one */
        __asm__ volatile("fldcw %0" : : "m"(back) : "memory");
    }
#ifdef CP_CPU_HAS_MXCSR
    uint32_t mx = 0;
    __asm__ volatile("stmxcsr %0" : "=m"(mx) : : "memory");
    if ((mx & ~CP_CPU_MXCSR_FLAGS) != CP_CPU_MXCSR) {
        changed |= CP_CPU_CHANGED_FP_CONTROL;
        *fp_left = mx;
    }
    const uint32_t mx_back = saved->fp;
    if (mx != mx_back) { /* most often the flags a job set: the caller's come back */
        __asm__ volatile("ldmxcsr %0" : : "m"(mx_back) : "memory");
    }
#endif
    return changed;
}

/* After a fault jumped out of a chain: the caller's FP state back, DF and AC clear (the
 * kernel cleared TF and DF for the handler). */
static inline void cp_cpu_restore(const cp_cpu_saved *saved)
{
    uint32_t ignored;
    (void)cp_cpu_leave(saved, &ignored);
}

/* Between two jobs of one armed run (cp_cpu_enter before the first, cp_cpu_leave after the
 * last): what the job just finished changed, read without a write on the common path. ldmxcsr,
 * fldcw and popf cost ~20 ns a job here against ~9 ns for a 10-stencil chain, reads a few
 * cycles (docs/decisions/2026-12-04-simulation-loop-in-c.md). A changed state is put back to
 * the defined one (DF, AC and TF first, before the compiler's code copies memory): the job
 * faults, and cp_cpu_leave then gives the caller's state back. Not called for a verified
 * (format-2) program of a table whose stencils provably keep this state (cp_posix_guard_policy
 * keeps_cpu_state; tools/stencil_cpu_state.py). */
static inline uint32_t cp_cpu_check(uint32_t *fp_left)
{
    cp_cpu_clear_upper();
    uintptr_t flags;
#if defined(__x86_64__)
    __asm__ volatile("pushfq\n\tpopq %0\n\ttestq %1, %0\n\tjz 1f\n\t"
                     "pushq %0\n\tandq %2, (%%rsp)\n\tpopfq\n1:"
                     : "=&r"(flags) : "i"((long)CP_CPU_EFLAGS_BAD), "i"(~(long)CP_CPU_EFLAGS_BAD)
                     : "memory", "cc");
#else
    __asm__ volatile("pushfl\n\tpopl %0\n\ttestl %1, %0\n\tjz 1f\n\t"
                     "pushl %0\n\tandl %2, (%%esp)\n\tpopfl\n1:"
                     : "=&r"(flags) : "i"((long)CP_CPU_EFLAGS_BAD), "i"(~(long)CP_CPU_EFLAGS_BAD)
                     : "memory", "cc");
#endif
    uint32_t changed = (flags & CP_CPU_EFLAGS_BAD) != 0 ? (uint32_t)CP_CPU_CHANGED_FLAGS : 0u;
    changed |= cp_cpu_x87_changed(fp_left);
    if ((changed & (CP_CPU_CHANGED_FP_CONTROL | CP_CPU_CHANGED_X87_STACK)) != 0) {
        const uint16_t want = CP_CPU_X87_CW;
        __asm__ volatile("fninit\n\tfldcw %0" : : "m"(want) : "memory");
    }
#ifdef CP_CPU_HAS_MXCSR
    uint32_t mx = 0;
    __asm__ volatile("stmxcsr %0" : "=m"(mx) : : "memory");
    if ((mx & ~CP_CPU_MXCSR_FLAGS) != CP_CPU_MXCSR) {
        changed |= CP_CPU_CHANGED_FP_CONTROL;
        *fp_left = mx;
        const uint32_t mx_want = CP_CPU_MXCSR;
        __asm__ volatile("ldmxcsr %0" : : "m"(mx_want) : "memory");
    }
#endif
    return changed;
}

#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
/* FPCR: RMode (23:22), FZ (24), DN (25), AHP (26), FZ16 (19) and the trap enables (15, 12:8)
 * all 0 is round to nearest, IEEE behaviour, no traps */
#define CP_CPU_FPCR_MASK 0x07c89f00u

static inline void cp_cpu_enter(cp_cpu_saved *saved)
{
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    saved->fp = (uint32_t)fpcr;
    saved->x87 = 0;
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr & ~(uint64_t)CP_CPU_FPCR_MASK) : "memory");
}

static inline uint32_t cp_cpu_leave(const cp_cpu_saved *saved, uint32_t *fp_left)
{
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    *fp_left = (uint32_t)fpcr;
    __asm__ volatile("msr fpcr, %0" : : "r"((uint64_t)saved->fp) : "memory");
    return (fpcr & CP_CPU_FPCR_MASK) != 0 ? (uint32_t)CP_CPU_CHANGED_FP_CONTROL : 0u;
}

static inline void cp_cpu_restore(const cp_cpu_saved *saved)
{
    __asm__ volatile("msr fpcr, %0" : : "r"((uint64_t)saved->fp) : "memory");
}

static inline uint32_t cp_cpu_check(uint32_t *fp_left)
{
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    *fp_left = (uint32_t)fpcr;
    if ((fpcr & CP_CPU_FPCR_MASK) == 0) {
        return 0;
    }
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr & ~(uint64_t)CP_CPU_FPCR_MASK) : "memory");
    return CP_CPU_CHANGED_FP_CONTROL;
}

#elif defined(__arm__) && defined(__ARM_FP) && !defined(__SOFTFP__) && \
    (defined(__GNUC__) || defined(__clang__))
/* FPSCR: AHP (26), DN (25), FZ (24), RMode (23:22), Stride/Len (21:16) and the trap enables
 * (15, 12:8) all 0 */
#define CP_CPU_FPSCR_MASK 0x07ff9f00u

static inline void cp_cpu_enter(cp_cpu_saved *saved)
{
    uint32_t fpscr;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(fpscr));
    saved->fp = fpscr;
    saved->x87 = 0;
    __asm__ volatile("vmsr fpscr, %0" : : "r"(fpscr & ~CP_CPU_FPSCR_MASK) : "memory");
}

static inline uint32_t cp_cpu_leave(const cp_cpu_saved *saved, uint32_t *fp_left)
{
    uint32_t fpscr;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(fpscr));
    *fp_left = fpscr;
    __asm__ volatile("vmsr fpscr, %0" : : "r"(saved->fp) : "memory");
    return (fpscr & CP_CPU_FPSCR_MASK) != 0 ? (uint32_t)CP_CPU_CHANGED_FP_CONTROL : 0u;
}

static inline void cp_cpu_restore(const cp_cpu_saved *saved)
{
    __asm__ volatile("vmsr fpscr, %0" : : "r"(saved->fp) : "memory");
}

static inline uint32_t cp_cpu_check(uint32_t *fp_left)
{
    uint32_t fpscr;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(fpscr));
    *fp_left = fpscr;
    if ((fpscr & CP_CPU_FPSCR_MASK) == 0) {
        return 0;
    }
    __asm__ volatile("vmsr fpscr, %0" : : "r"(fpscr & ~CP_CPU_FPSCR_MASK) : "memory");
    return CP_CPU_CHANGED_FP_CONTROL;
}

#elif defined(__riscv) && defined(__riscv_flen) && (defined(__GNUC__) || defined(__clang__))
/* fcsr.frm (7:5) 0 is round to nearest, ties to even; RISC-V has no FP traps */
static inline void cp_cpu_enter(cp_cpu_saved *saved)
{
    uint32_t frm;
    __asm__ volatile("frrm %0" : "=r"(frm));
    saved->fp = frm;
    saved->x87 = 0;
    __asm__ volatile("fsrm zero" ::: "memory");
}

static inline uint32_t cp_cpu_leave(const cp_cpu_saved *saved, uint32_t *fp_left)
{
    uint32_t frm;
    __asm__ volatile("frrm %0" : "=r"(frm));
    *fp_left = frm;
    __asm__ volatile("fsrm %0" : : "r"(saved->fp) : "memory");
    return frm != 0 ? (uint32_t)CP_CPU_CHANGED_FP_CONTROL : 0u;
}

static inline void cp_cpu_restore(const cp_cpu_saved *saved)
{
    __asm__ volatile("fsrm %0" : : "r"(saved->fp) : "memory");
}

static inline uint32_t cp_cpu_check(uint32_t *fp_left)
{
    uint32_t frm;
    __asm__ volatile("frrm %0" : "=r"(frm));
    *fp_left = frm;
    if (frm == 0) {
        return 0;
    }
    __asm__ volatile("fsrm zero" ::: "memory");
    return CP_CPU_CHANGED_FP_CONTROL;
}

#else
static inline void cp_cpu_enter(cp_cpu_saved *saved)
{
    saved->fp = 0;
    saved->x87 = 0;
}

static inline uint32_t cp_cpu_leave(const cp_cpu_saved *saved, uint32_t *fp_left)
{
    (void)saved;
    *fp_left = 0;
    return 0;
}

static inline void cp_cpu_restore(const cp_cpu_saved *saved)
{
    (void)saved;
}

static inline uint32_t cp_cpu_check(uint32_t *fp_left)
{
    *fp_left = 0;
    return 0;
}
#endif

#endif /* COPAPY_CPU_STATE_H */
