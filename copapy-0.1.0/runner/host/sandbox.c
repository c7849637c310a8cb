/* The tick thread's seccomp filter: a hand-written classic BPF program (no libseccomp), see
 * sandbox.h. What the tick thread calls, and why:
 *   clock_nanosleep, clock_gettime   the tick's absolute sleep, the clocks (vDSO fallback)
 *   futex                            the server's priority-inheritance mutex, the condition
 *   write (listed descriptors only)  the wake pipe, /dev/cpu_dma_latency, --verbose's stderr
 *   rt_sigprocmask (unblock, query)  the guard unblocks the fault signal after a jump back
 *                                    and checks the mask after a job
 *   rt_sigaction (query only)        the guard checks the fault handlers after a job
 *   sigaltstack (query only)         glibc's fortified longjmp may ask
 *   rt_sigreturn, restart_syscall    the return from a signal handler, a restarted sleep
 *   sched_getaffinity                a query: the sanitizer runtime's longjmp asks
 * Nothing else: no exit (the thread parks at shutdown), no mmap, mprotect, open, kill (the
 * AddressSanitizer build also allows mmap, munmap and madvise, for its shadow memory). */
#define _GNU_SOURCE 1

#include "sandbox.h"

#include <errno.h>

#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SANDBOX_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SANDBOX_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define SANDBOX_ARCH AUDIT_ARCH_I386
#elif defined(__arm__) && defined(__ARMEL__)
#define SANDBOX_ARCH AUDIT_ARCH_ARM
#elif defined(__riscv) && defined(__riscv_xlen) && __riscv_xlen == 64
#define SANDBOX_ARCH AUDIT_ARCH_RISCV64
#endif
#endif

#if defined(__linux__) && defined(SANDBOX_ARCH)

enum {
    MAX_INSNS = 128,
    TO_ALLOW = 0x100, /* jump targets resolved when the program is finished */
    TO_TRAP = 0x101,
    NEXT = 0
};

typedef struct {
    struct sock_filter insn[MAX_INSNS];
    unsigned jt[MAX_INSNS], jf[MAX_INSNS]; /* NEXT, TO_ALLOW, TO_TRAP or a relative skip */
    unsigned n;
} program;

static void emit(program *p, uint16_t code, uint32_t k, unsigned jt, unsigned jf)
{
    if (p->n < MAX_INSNS) {
        p->insn[p->n] = (struct sock_filter)BPF_STMT(code, k);
        p->jt[p->n] = jt;
        p->jf[p->n] = jf;
    }
    p->n++;
}

static void load(program *p, uint32_t offset)
{
    emit(p, BPF_LD | BPF_W | BPF_ABS, offset, NEXT, NEXT);
}

/* A system call's argument `i`, low or high 32-bit word (little- or big-endian host). */
static uint32_t arg_word(unsigned i, int high)
{
    uint32_t at = (uint32_t)offsetof(struct seccomp_data, args) + 8u * i;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return at + (high ? 4u : 0u);
#else
    return at + (high ? 0u : 4u);
#endif
}

static void load_nr(program *p)
{
    load(p, (uint32_t)offsetof(struct seccomp_data, nr));
}

/* if nr == `nr`: allow */
static void allow(program *p, long nr)
{
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, TO_ALLOW, NEXT);
}

/* if nr == `nr`: allow when argument `i` (all 64 bits) is 0, else trap (the accumulator
 * still holds nr when nr differs) */
static void allow_if_arg_null(program *p, long nr, unsigned i)
{
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, NEXT, 4); /* 4: past this test */
    load(p, arg_word(i, 0));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, NEXT, TO_TRAP);
    load(p, arg_word(i, 1));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, TO_ALLOW, TO_TRAP);
}

/* Ends the program (a call no test allowed is trapped) and resolves TO_ALLOW and TO_TRAP into
 * relative jumps to the two return instructions, which come last. */
static int finish(program *p)
{
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_TRAP, NEXT, NEXT);
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, NEXT, NEXT);
    if (p->n > MAX_INSNS) {
        return -1;
    }
    unsigned trap = p->n - 2, allowed = p->n - 1;
    for (unsigned i = 0; i < p->n; i++) {
        unsigned t[2] = {p->jt[i], p->jf[i]};
        for (int k = 0; k < 2; k++) {
            unsigned to = t[k] == TO_ALLOW ? allowed : t[k] == TO_TRAP ? trap : i + 1 + t[k];
            if (to <= i || to - i - 1 > 255) {
                return -1;
            }
            t[k] = to - i - 1;
        }
        p->insn[i].jt = (uint8_t)t[0];
        p->insn[i].jf = (uint8_t)t[1];
    }
    return 0;
}

static void build(program *p, const int *write_fds, int count)
{
    p->n = 0;
    /* another ABI (int 0x80 on x86_64 is i386's): its numbers mean other calls */
    load(p, (uint32_t)offsetof(struct seccomp_data, arch));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, SANDBOX_ARCH, NEXT, TO_TRAP);
    load_nr(p);
#if defined(__x86_64__)
    emit(p, BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, TO_TRAP, NEXT); /* x32 */
#endif
    allow(p, SYS_clock_nanosleep);
    allow(p, SYS_clock_gettime);
    allow(p, SYS_futex);
#ifdef SYS_futex_time64
    allow(p, SYS_futex_time64);
#endif
#ifdef SYS_clock_nanosleep_time64
    allow(p, SYS_clock_nanosleep_time64);
#endif
#ifdef SYS_clock_gettime64
    allow(p, SYS_clock_gettime64);
#endif
    allow(p, SYS_rt_sigreturn);
    allow(p, SYS_restart_syscall);
    allow(p, SYS_sched_getaffinity); /* a query; the sanitizers' longjmp asks (stack bounds) */
#if defined(__SANITIZE_ADDRESS__)
    /* the AddressSanitizer build (make host-asan, for fuzzing): its runtime maps and releases
     * shadow memory in the fault path (unpoisoning the stack a longjmp left) */
    allow(p, SYS_mmap);
    allow(p, SYS_munmap);
    allow(p, SYS_madvise);
#endif
    allow_if_arg_null(p, SYS_rt_sigaction, 1);
    allow_if_arg_null(p, SYS_sigaltstack, 0);
    /* rt_sigprocmask: SIG_UNBLOCK, or a query (set NULL) */
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)SYS_rt_sigprocmask, NEXT, 6);
    load(p, arg_word(0, 0));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, SIG_UNBLOCK, TO_ALLOW, NEXT);
    load(p, arg_word(1, 0));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, NEXT, TO_TRAP);
    load(p, arg_word(1, 1));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, TO_ALLOW, TO_TRAP);
    /* write: the listed descriptors (the kernel reads the low 32 bits of fd) */
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)SYS_write, NEXT, TO_TRAP);
    load(p, arg_word(0, 0));
    for (int i = 0; i < count && i < SANDBOX_MAX_WRITE_FDS; i++) {
        if (write_fds[i] >= 0) {
            emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)write_fds[i], TO_ALLOW, NEXT);
        }
    }
}

int sandbox_tick_thread(const int *write_fds, int count)
{
    static program p; /* the tick thread's, built once before the filter applies */
    build(&p, write_fds, count);
    if (finish(&p) != 0) {
        return E2BIG;
    }
    struct sock_fprog prog = {(unsigned short)p.n, p.insn};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) != 0) {
        return errno;
    }
    /* without SECCOMP_FILTER_FLAG_TSYNC: this thread (and any it creates) only. SPEC_ALLOW:
     * a kernel booted with spec_store_bypass_disable=seccomp would otherwise switch the
     * speculative store bypass mitigation on for the thread, slowing every chain, for nothing:
     * a task can read the process's memory directly, it needs no side channel */
    unsigned flags = 0;
#ifdef SECCOMP_FILTER_FLAG_SPEC_ALLOW
    flags = SECCOMP_FILTER_FLAG_SPEC_ALLOW;
#endif
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    if (rc != 0 && errno == EINVAL && flags != 0) {
        rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0u, &prog); /* before Linux 4.17 */
    }
    if (rc != 0) {
        if (errno != ENOSYS) {
            return errno;
        }
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0UL, 0UL) != 0) {
            return errno;
        }
    }
    return 0;
}

#else

int sandbox_tick_thread(const int *write_fds, int count)
{
    (void)write_fds;
    (void)count;
    return ENOSYS;
}

#endif
