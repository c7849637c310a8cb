/* Host platform on POSIX systems: the region is mmap'd read-write, its code part is switched to
 * read-execute after patching (never writable and executable at once); and the POSIX half of
 * fault containment (the guard, its signal handlers and the budget supervisor; design notes
 * in copapy/platform_posix.h). */
#if defined(__unix__) || defined(__APPLE__)

/* MAP_ANONYMOUS, sigaltstack, REG_RIP and pthread_getcpuclockid are not all in ISO C or
 * POSIX.1-2008 as -std=c11 sees them; these expose them. */
#define _GNU_SOURCE 1
#define _DEFAULT_SOURCE 1
#define _DARWIN_C_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
/* Darwin: the machine context without the deprecated ucontext routines, the threads' CPU
 * time through Mach (no pthread_getcpuclockid) */
#include <mach/mach.h>
#include <sys/ucontext.h>
#else
#include <ucontext.h>
#endif

#include "copapy/platform_posix.h"
#include "cpu_state.h"
#include "guard_common.h"
#include "internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif

#if defined(__x86_64__)
#define HOST_ARCH CP_ARCH_X86_64
#elif defined(__i386__)
#define HOST_ARCH CP_ARCH_X86
#elif defined(__aarch64__)
#define HOST_ARCH CP_ARCH_AARCH64
#elif defined(__riscv) && defined(__riscv_xlen) && __riscv_xlen == 64
#define HOST_ARCH CP_ARCH_RV64
#elif defined(__riscv) && defined(__riscv_xlen) && __riscv_xlen == 32
#define HOST_ARCH CP_ARCH_RV32
#elif defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7 && \
    defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'A'
#define HOST_ARCH CP_ARCH_ARMV7A
#elif defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH == 6
#define HOST_ARCH CP_ARCH_ARMV6
#else
#define HOST_ARCH 0 /* no image can match: every load fails with ARCH */
#endif

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096u;
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Apple silicon executes only MAP_JIT code that this process writes: the region is mapped
 * RWX with MAP_JIT and the loading thread writes it with its JIT write protection off
 * (pthread_jit_write_protect_np, per thread); sealing turns the protection on again and
 * remaps the data part as an ordinary read-write mapping (a MAP_JIT page is writable only
 * by a thread that has the protection off, and chains write their data). */
#if defined(__APPLE__) && defined(__aarch64__)
#define REGION_PROT (PROT_READ | PROT_WRITE | PROT_EXEC)
#define REGION_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_JIT)
#else
#define REGION_PROT (PROT_READ | PROT_WRITE)
#define REGION_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS)
#endif

static void *map_region(size_t len)
{
    void *p = mmap(NULL, len, REGION_PROT, REGION_FLAGS, -1, 0);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* a large region (a jitted function's arguments and results: issue 31) on transparent
     * huge pages where the kernel offers them on request: the loader's first read of its
     * zeros maps the huge zero page, 512 pages per fault (4.4 s of faults at 1e8 elements) */
    if (p != MAP_FAILED && len >= ((size_t)4 << 20)) {
        (void)madvise(p, len, MADV_HUGEPAGE);
    }
#endif
#if defined(__APPLE__) && defined(__aarch64__)
    if (p != MAP_FAILED) {
        pthread_jit_write_protect_np(0); /* this thread loads the program */
    }
#endif
    return p;
}

static void *posix_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    size_t page = page_size();
    if (size == 0 || align == 0 || (align & (align - 1)) != 0 || size > SIZE_MAX / 2) {
        return NULL;
    }
    size_t len = round_up(size, page);
    if (align <= page) {
        void *p = map_region(len);
        return p == MAP_FAILED ? NULL : p;
    }
    /* over-map by `align`, then give back the misaligned head and the unused tail */
    size_t span = len + align;
    uint8_t *raw = map_region(span);
    if ((void *)raw == MAP_FAILED) {
        return NULL;
    }
    size_t head = (size_t)((align - (uintptr_t)raw % align) % align);
    if (head > 0) {
        munmap(raw, head);
    }
    size_t tail = span - head - len;
    if (tail > 0) {
        munmap(raw + head + len, tail);
    }
    return raw + head;
}

static int posix_seal(void *ctx, void *base, size_t code_len, size_t size)
{
    (void)ctx;
    size_t page = page_size();
    size_t len = round_up(code_len, page);
    /* rounding past code_len would make data or the task table non-writable */
    if (len != code_len || len > round_up(size, page)) {
        return -1;
    }
    if (len == 0) {
        return 0;
    }
    __builtin___clear_cache((char *)base, (char *)base + len);
#if defined(__APPLE__) && defined(__aarch64__)
    size_t rest = round_up(size, page) - len;
    uint8_t *tail = (uint8_t *)base + len;
    uint8_t *copy = rest > 0 ? malloc(rest) : NULL;
    if (rest > 0 && copy == NULL) {
        return -1;
    }
    if (rest > 0) {
        memcpy(copy, tail, rest);
        void *p = mmap(tail, rest, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                       -1, 0);
        if (p != MAP_FAILED) {
            memcpy(tail, copy, rest);
        }
        free(copy);
        if (p == MAP_FAILED) {
            return -1;
        }
    }
    pthread_jit_write_protect_np(1);
    return 0;
#else
    return mprotect(base, len, PROT_READ | PROT_EXEC) == 0 ? 0 : -1;
#endif
}

static void posix_free(void *ctx, void *base, size_t size)
{
    (void)ctx;
    if (base != NULL) {
        munmap(base, round_up(size, page_size()));
    }
}

static const cp_platform posix_platform = {
    .struct_size = sizeof(cp_platform),
    .abi_version = CP_RUNNER_ABI_VERSION,
    .arch = HOST_ARCH,
    .reserved = 0,
    .ctx = NULL,
    .region_alloc = posix_alloc,
    .region_seal = posix_seal,
    .region_free = posix_free,
    .max_region_size = 0,
    .memory_option = NULL,
    .cpu_features = cp_posix_cpu_features,
};

const cp_platform *cp_platform_posix(void)
{
    return &posix_platform;
}

/* ---- fault containment: the guard */

enum {
    GUARD_SLOTS = 64,              /* threads that may run guarded code at the same time */
    ALT_STACK_SIZE = 64 * 1024,
    DEFAULT_POLL_NS = 50000000 /* in-process: budgets are >= 1 s there */
};

/* One per thread that runs guarded code. `seq` is odd while a job runs; the supervisor reads
 * it, `budget` and the thread's CPU clock; `kill_seq` is the job it interrupted. */
typedef struct guard_slot {
    sigjmp_buf env;
    volatile sig_atomic_t active;  /* the chain is running: a fault is ours */
    volatile sig_atomic_t lean;    /* in cp_posix_guard_jobs's lean loop: a chain runs (and a
                                    * fault is ours) while seq is odd */
    int in_use;                    /* atomic: claimed by a thread */
    uint64_t seq;                  /* atomic */
    uint64_t budget_ns;            /* atomic */
    uint64_t kill_seq;             /* atomic */
    pthread_t thread;
#if defined(__APPLE__)
    mach_port_t cpu_clock;         /* the Mach thread: its CPU time by thread_info */
#else
    clockid_t cpu_clock;
#endif
    int have_cpu_clock;
    void *alt_stack;               /* ours, or NULL if the thread had one */
    cp_fault fault;                /* filled by the signal handler */
    cp_fault *out;                 /* the caller's fault record */
    cp_cpu_saved cpu;              /* the caller's FP control state while a chain runs */
    uint8_t check_signals;         /* the guard's policy (cp_posix_guard_policy) */
    uint8_t check_cpu;             /* a job of a run checks the CPU state (not keeps_cpu_state) */
    uint32_t *jobs_at;             /* cp_posix_guard_jobs's `at` while its lean loop runs */
    uint64_t jobs_seq;             /* seq before that loop's first job */
    cp_guard_watch watch;          /* supervisor only */
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static _Thread_local guard_slot *tls_slot;
static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static int handlers_installed;

/* the synchronous signals a chain can cause, then the supervisor's (last: signal_index) */
static const int fault_signals[] = {SIGSEGV, SIGILL, SIGBUS, SIGFPE, SIGTRAP,
#ifdef SIGSYS
                                    SIGSYS, /* a system call a seccomp filter forbids */
#endif
                                    CP_POSIX_WATCHDOG_SIGNAL};
#define FAULT_SIGNALS (sizeof(fault_signals) / sizeof(fault_signals[0]))
static struct sigaction previous[FAULT_SIGNALS];
/* si_errno of a fault passed on along the chain of handlers (ASCII "CPCH") */
#define CHAIN_MARK 0x48435043

static uint64_t ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static uint64_t interrupted_pc(const void *uctx)
{
#if defined(__linux__) && defined(__x86_64__)
    return (uint64_t)((const ucontext_t *)uctx)->uc_mcontext.gregs[REG_RIP];
#elif defined(__linux__) && defined(__i386__)
    return (uint64_t)(uint32_t)((const ucontext_t *)uctx)->uc_mcontext.gregs[REG_EIP];
#elif defined(__linux__) && defined(__aarch64__)
    return (uint64_t)((const ucontext_t *)uctx)->uc_mcontext.pc;
#elif defined(__linux__) && defined(__arm__)
    return (uint64_t)((const ucontext_t *)uctx)->uc_mcontext.arm_pc;
#elif defined(__APPLE__) && defined(__x86_64__)
    return (uint64_t)((const ucontext_t *)uctx)->uc_mcontext->__ss.__rip;
#elif defined(__APPLE__) && defined(__aarch64__)
    return (uint64_t)((const ucontext_t *)uctx)->uc_mcontext->__ss.__pc;
#else
    (void)uctx;
    return 0;
#endif
}

static uint32_t fault_kind(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return CP_FAULT_SIGSEGV;
    case SIGILL:
        return CP_FAULT_SIGILL;
    case SIGBUS:
        return CP_FAULT_SIGBUS;
    case SIGFPE:
        return CP_FAULT_SIGFPE;
    case SIGTRAP:
        return CP_FAULT_SIGTRAP;
#ifdef SIGSYS
    case SIGSYS:
        return CP_FAULT_SIGSYS;
#endif
    default:
        return CP_FAULT_TIMEOUT;
    }
}

/* cp_fault.code: the si_code, or for SIGSYS from a seccomp filter the system call's number
 * (what the filter refused names the problem better than SYS_SECCOMP does). */
static uint32_t fault_code(int sig, const siginfo_t *si)
{
#if defined(__linux__) && defined(SIGSYS)
    if (sig == SIGSYS) {
        return (uint32_t)si->si_syscall;
    }
#else
    (void)sig;
#endif
    return si->si_code >= 0 ? (uint32_t)si->si_code : 0u;
}

static size_t signal_index(int sig)
{
    size_t i = 0;
    while (i < FAULT_SIGNALS - 1 && fault_signals[i] != sig) {
        i++;
    }
    return i;
}

/* EFLAGS.AC (alignment check) of the faulting code is still set in the handler (the kernel
 * keeps it): any unaligned access before it is cleared would be a second, fatal SIGBUS. */
static inline void clear_alignment_check(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__ volatile("pushfq\n\tandq $~0x40000, (%%rsp)\n\tpopfq" ::: "memory", "cc");
#elif defined(__i386__) && (defined(__GNUC__) || defined(__clang__))
    __asm__ volatile("pushfl\n\tandl $~0x40000, (%%esp)\n\tpopfl" ::: "memory", "cc");
#endif
}

#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize("address", "undefined")))
#endif
static void on_fault(int sig, siginfo_t *si, void *uctx)
{
    clear_alignment_check();
    guard_slot *g = tls_slot;
    int watchdog = sig == CP_POSIX_WATCHDOG_SIGNAL;
    int running = g != NULL && (g->active || (g->lean && (__atomic_load_n(&g->seq,
                                                                          __ATOMIC_RELAXED) &
                                                          1u)));
    if (running &&
        (!watchdog || __atomic_load_n(&g->kill_seq, __ATOMIC_RELAXED) ==
                          __atomic_load_n(&g->seq, __ATOMIC_RELAXED))) {
        g->active = 0;
        g->lean = 0;
        g->fault.kind = fault_kind(sig);
        g->fault.address = watchdog ? 0u : (uint64_t)(uintptr_t)si->si_addr;
        g->fault.pc = interrupted_pc(uctx);
        g->fault.code = fault_code(sig, si);
        siglongjmp(g->env, sig);
    }
    if (watchdog && running) {
        return; /* late: the job it was meant for has finished */
    }
    /* Not ours. A handler installed before is called directly, staying installed: it may be
     * another copy of this core in the process (the Python module and libcopapy each link
     * one), whose guarded job this is; it jumps out if so. The siginfo is marked on the way,
     * so a chain that comes back to a copy it passed (each copy took the other as the
     * previous handler) ends here instead of going round. */
    const struct sigaction *prev = &previous[signal_index(sig)];
    int cycle = si->si_errno == CHAIN_MARK;
    int callable = (prev->sa_flags & SA_SIGINFO) != 0
                       ? prev->sa_sigaction != NULL
                       : prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN;
    if (!cycle && callable) {
        si->si_errno = CHAIN_MARK;
        if ((prev->sa_flags & SA_SIGINFO) != 0) {
            prev->sa_sigaction(sig, si, uctx);
        } else {
            prev->sa_handler(sig);
        }
        return;
    }
    if (watchdog) {
        return; /* nobody's job: never the default action (a core dump) for it */
    }
    /* the end of the chain: the default action (or the ignored signal). Returning re-executes
     * the faulting instruction under that disposition; a signal that was sent rather than
     * caused is raised again. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, cycle ? &dfl : prev, NULL);
    if (si->si_code <= 0) {
        raise(sig);
    }
}

/* The fault handler's disposition: the siginfo, on the alternate stack. */
static void our_action(struct sigaction *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sa_sigaction = on_fault;
    sa->sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa->sa_mask);
}

int cp_posix_guard_install(void)
{
    pthread_mutex_lock(&install_lock);
    int rc = 0;
    for (size_t i = 0; i < FAULT_SIGNALS; i++) {
        struct sigaction sa, old;
        our_action(&sa);
        if (sigaction(fault_signals[i], &sa, &old) != 0) {
            rc = -1;
            continue;
        }
        if (old.sa_sigaction != on_fault) {
            previous[i] = old; /* keep the first foreign handler to chain to */
        }
    }
    __atomic_store_n(&handlers_installed, rc == 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&install_lock);
    return rc;
}

/* What a chain may have done with system calls to the containment itself: blocked a fault
 * signal (the next fault would kill the process) or reset a handler. Both are put back;
 * returns the CP_CPU_CHANGED_SIGNAL_* bits. Eight system calls (~3 us): the price of a job on
 * the host, where an image comes from outside the process. */
static uint32_t repair_signals(void)
{
    uint32_t changed = 0;
    sigset_t cur, fault_set;
    sigemptyset(&fault_set);
    for (size_t i = 0; i < FAULT_SIGNALS; i++) {
        sigaddset(&fault_set, fault_signals[i]);
    }
    if (pthread_sigmask(SIG_SETMASK, NULL, &cur) == 0) {
        for (size_t i = 0; i < FAULT_SIGNALS; i++) {
            if (sigismember(&cur, fault_signals[i]) == 1) {
                changed |= CP_CPU_CHANGED_SIGNAL_MASK;
            }
        }
        if (changed != 0) {
            pthread_sigmask(SIG_UNBLOCK, &fault_set, NULL);
        }
    }
    /* Another copy of this core in the process (the Python module and libcopapy) installs its
     * own handler over ours and chains back to it: any handler that takes the siginfo on the
     * alternate stack may stay; the default action, ignoring or a one-shot handler may not. */
    for (size_t i = 0; i < FAULT_SIGNALS; i++) {
        struct sigaction now;
        if (sigaction(fault_signals[i], NULL, &now) == 0 &&
            ((now.sa_flags & (SA_SIGINFO | SA_ONSTACK | SA_RESETHAND)) !=
                 (SA_SIGINFO | SA_ONSTACK) ||
             now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN)) {
            changed |= CP_CPU_CHANGED_SIGNAL_HANDLER;
            struct sigaction sa; /* ours again; the handler it chains to stays as it was */
            our_action(&sa);
            (void)sigaction(fault_signals[i], &sa, NULL);
        }
    }
    return changed;
}

/* Thread exit: give the slot back (and our alternate stack). */
static void release_slot(void *arg)
{
    guard_slot *g = arg;
    if (g->alt_stack != NULL) {
        stack_t off;
        memset(&off, 0, sizeof(off));
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, NULL);
        munmap(g->alt_stack, ALT_STACK_SIZE);
        g->alt_stack = NULL;
    }
    __atomic_store_n(&g->seq, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&g->in_use, 0, __ATOMIC_RELEASE);
}

static int watchdog_running;
static pthread_mutex_t watchdog_lock = PTHREAD_MUTEX_INITIALIZER;

/* A forked child has only the forking thread and no supervisor: every slot is free again
 * (the forking thread claims one at its next guarded call, keeping its alternate stack). */
static void after_fork_child(void)
{
    for (size_t i = 0; i < GUARD_SLOTS; i++) {
        slots[i].in_use = 0;
        slots[i].seq = 0;
        slots[i].active = 0;
    }
    tls_slot = NULL;
    watchdog_running = 0;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER; /* another thread may have held them */
    watchdog_lock = fresh;
    install_lock = fresh;
}

static void make_slot_key(void)
{
    (void)pthread_key_create(&slot_key, release_slot);
    (void)pthread_atfork(NULL, NULL, after_fork_child);
}

/* The calling thread's slot (own_slot), claimed with an alternate signal stack at its first
 * use (claim_slot, kept out of own_slot's frame). Neither is inlined into cp_posix_guard:
 * nothing of them must live across the sigsetjmp. */
__attribute__((noinline)) static guard_slot *claim_slot(void)
{
    pthread_once(&slot_key_once, make_slot_key);
    if (!__atomic_load_n(&handlers_installed, __ATOMIC_ACQUIRE) && cp_posix_guard_install() != 0) {
        return NULL;
    }
    for (size_t i = 0; i < GUARD_SLOTS; i++) {
        int free_slot = 0;
        if (__atomic_compare_exchange_n(&slots[i].in_use, &free_slot, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            guard_slot *g = &slots[i];
            g->active = 0;
            g->lean = 0;
            g->thread = pthread_self();
#if defined(__APPLE__)
            g->cpu_clock = pthread_mach_thread_np(g->thread);
            g->have_cpu_clock = g->cpu_clock != MACH_PORT_NULL;
#else
            g->have_cpu_clock = pthread_getcpuclockid(g->thread, &g->cpu_clock) == 0;
#endif
            g->alt_stack = NULL;
            g->watch.seen_seq = 0;
            stack_t cur;
            if (sigaltstack(NULL, &cur) == 0 && (cur.ss_flags & SS_DISABLE) != 0) {
                void *mem = mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (mem != MAP_FAILED) {
                    stack_t st;
                    memset(&st, 0, sizeof(st));
                    st.ss_sp = mem;
                    st.ss_size = ALT_STACK_SIZE;
                    if (sigaltstack(&st, NULL) == 0) {
                        g->alt_stack = mem;
                    } else {
                        munmap(mem, ALT_STACK_SIZE);
                    }
                }
            }
            (void)pthread_setspecific(slot_key, g);
            tls_slot = g;
            return g;
        }
    }
    return NULL;
}

__attribute__((noinline)) static guard_slot *own_slot(void)
{
    guard_slot *g = tls_slot;
    return g != NULL ? g : claim_slot();
}

/* After a jump out of the handler: the signal is still blocked (sigsetjmp saved no mask, to
 * keep the system call off the hot path). */
static void recover(int sig)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    clear_alignment_check();
}


/* The way back from a jump out of the handler: the job is over (seq even again), the signal
 * unblocked, the fault copied to the caller's record. Only memory is trusted after the jump:
 * the slot is found again through the TLS. */
static int jumped_back(int sig)
{
    guard_slot *j = tls_slot;
    uint64_t seq = __atomic_load_n(&j->seq, __ATOMIC_RELAXED);
    if (j->jobs_at != NULL) { /* the job of a lean cp_posix_guard_jobs loop: seq says which */
        *j->jobs_at = (uint32_t)((seq - j->jobs_seq - 1u) / 2u);
        j->jobs_at = NULL;
    }
    __atomic_store_n(&j->seq, seq + 1u, __ATOMIC_RELEASE);
    recover(sig);
    cp_cpu_restore(&j->cpu);
    (void)repair_signals();
    return cp_guard_report(j->out, &j->fault);
}

/* One job under an armed slot: seq is odd and the fault is ours while the chain runs; the
 * chain starts in the defined CPU state and the caller's comes back after it. Returns the
 * CP_CPU_CHANGED_* bits of what the chain left changed; *fp_left the FP control word. */
CP_CALLS_LOADED_CODE
static inline uint32_t run_armed(guard_slot *g, cp_chain_fn entry, uint32_t *fp_left)
{
    cp_cpu_enter(&g->cpu); /* saved before a fault can jump back to restore it */
    __atomic_store_n(&g->seq, __atomic_load_n(&g->seq, __ATOMIC_RELAXED) + 1u,
                     __ATOMIC_RELEASE);
    g->active = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    entry();
    uint32_t changed = cp_cpu_leave(&g->cpu, fp_left);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g->active = 0;
    __atomic_store_n(&g->seq, __atomic_load_n(&g->seq, __ATOMIC_RELAXED) + 1u,
                     __ATOMIC_RELEASE);
    return changed | (g->check_signals ? repair_signals() : 0u);
}

const cp_posix_guard_policy cp_posix_own_code = {0, 0};
const cp_posix_guard_policy cp_posix_verified = {1, 1};
const cp_posix_guard_policy cp_posix_own_verified_code = {0, 1};

static uint8_t checks_signals(const void *ctx)
{
    return ctx == NULL || ((const cp_posix_guard_policy *)ctx)->check_signals != 0;
}

/* Whether a job of a run checks the CPU state: unless the policy says the chains are stencils
 * of a table whose proof record says it keeps that state (cp_table.keeps_cpu_state, set by
 * tools/gen_runner_tables.py from tools/stencil_cpu_state.py's record; not i386's). */
static uint8_t checks_cpu(const void *ctx)
{
    return ctx == NULL || ((const cp_posix_guard_policy *)ctx)->keeps_cpu_state == 0;
}

static inline void need_watchdog(uint64_t budget_ns)
{
    if (budget_ns != 0 && !__atomic_load_n(&watchdog_running, __ATOMIC_ACQUIRE)) {
        (void)cp_posix_watchdog_start(0, 0);
    }
}

CP_CALLS_LOADED_CODE
int cp_posix_guard(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault)
{
    guard_slot *g = own_slot();
    if (g == NULL) {
        entry(); /* no slot left (more than GUARD_SLOTS threads at once): unguarded */
        return 0;
    }
    need_watchdog(budget_ns);
    g->out = fault;
    g->check_signals = checks_signals(ctx);
    /* before the sigsetjmp: a 32-bit CPU holds budget_ns in two registers, which GCC says
     * the jump may clobber (the supervisor reads it only once seq is odd) */
    __atomic_store_n(&g->budget_ns, budget_ns, __ATOMIC_RELAXED);
    int sig = sigsetjmp(g->env, 0);
    if (sig != 0) {
        return jumped_back(sig);
    }
    uint32_t fp_left = 0;
    uint32_t changed = run_armed(g, entry, &fp_left);
    return changed != 0 ? cp_guard_changed_state(fault, changed, fp_left) : 0;
}

/* A job of a run: the slot is armed already and its budget stored by the caller, so a job is
 * the two seq stores around its chain (`seq`: the slot's seq before it, which only this
 * thread writes); a fault
 * jumps back into cp_posix_guard_run, never returns here. `checks` 0: the caller knows that
 * nothing is checked after a chain and that the supervisor runs. Returns what the chain left
 * changed. */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE uint32_t armed_chain(guard_slot *g, uint64_t seq, cp_chain_fn entry,
                                             uint64_t budget_ns, uint32_t *fp_left, int checks)
{
    if (checks) {
        need_watchdog(budget_ns);
    }
    /* the run entered the defined CPU state once (cp_posix_guard_run); a job only checks what
     * it left, and the caller's state comes back when the run ends */
    __atomic_store_n(&g->seq, seq + 1u, __ATOMIC_RELEASE);
    if (checks) { /* (the lean loop: seq odd says it, g->lean) */
        g->active = 1;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    entry();
    /* the chains are stencils of a table proven to keep the CPU state (keeps_cpu_state) */
    /* the vector registers' upper halves are cleared either way (cpu_state.h); unchecked jobs
     * of one run (checks 0) run back to back, and the run's end clears them */
    uint32_t changed = 0u;
    if (checks && g->check_cpu) {
        changed = cp_cpu_check(fp_left);
    } else if (checks) {
        cp_cpu_clear_upper();
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (checks) {
        g->active = 0;
    }
    __atomic_store_n(&g->seq, seq + 2u, __ATOMIC_RELEASE);
    return checks && g->check_signals ? changed | repair_signals() : changed;
}

/* The job function of cp_posix_guard_run (ctx: the armed slot). */
CP_CALLS_LOADED_CODE
static int armed_job(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault)
{
    guard_slot *g = ctx; /* a signal's fault: filled through cp_posix_guard_run's record */
    uint32_t fp_left = 0;
    __atomic_store_n(&g->budget_ns, budget_ns, __ATOMIC_RELAXED);
    uint32_t changed = armed_chain(g, __atomic_load_n(&g->seq, __ATOMIC_RELAXED), entry,
                                   budget_ns, &fp_left, 1);
    return changed != 0 ? cp_guard_changed_state(fault, changed, fp_left) : 0;
}

/* cp_posix_guard_jobs's walk (guard_common.h) of one list: its slot, the seq before the next
 * job and the first's, the budgets (NULL: one for every job, stored before the walk) and
 * the caller's `at`. */
typedef struct armed_walk {
    guard_slot *g;
    uint64_t seq;
    uint64_t first;
    const cp_task_entry *tasks;
    const uint64_t *budget_ns;
    uint64_t budget;
    uint32_t *at;
} armed_walk;

/* A job of the walk (`checks` as armed_chain's): *at is its index over the call before it
 * starts (checks), or found through jobs_seq and jobs_at after a jump back (the lean loop,
 * checks 0). Its budget is stored before it unless every job has the same one. */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE int armed_walk_job(armed_walk *w, uint32_t task, cp_fault *fault,
                                           int checks)
{
    guard_slot *g = w->g;
    uint32_t fp_left = 0;
    uint64_t budget = w->budget_ns != NULL ? w->budget_ns[task] : w->budget;
    if (checks) {
        *w->at = (uint32_t)((w->seq - w->first) / 2u);
    }
    if (w->budget_ns != NULL) {
        __atomic_store_n(&g->budget_ns, budget, __ATOMIC_RELAXED);
    }
    uint32_t changed = armed_chain(g, w->seq, w->tasks[task].entry, budget, &fp_left, checks);
    w->seq += 2u;
    return checks && changed != 0 ? cp_guard_changed_state(fault, changed, fp_left) : 0;
}

CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE int checked_job(void *ctx, uint32_t task, uint32_t n, cp_fault *fault)
{
    (void)n;
    return armed_walk_job(ctx, task, fault, 1);
}

CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE int lean_job(void *ctx, uint32_t task, uint32_t n, cp_fault *fault)
{
    (void)n;
    return armed_walk_job(ctx, task, fault, 0);
}

/* The walk (`checks` as armed_chain's; `one_budget`: the list's budget_ns is NULL, a constant
 * here so that no job tests it). */
CP_CALLS_LOADED_CODE
static CP_ALWAYS_INLINE int armed_jobs(guard_slot *g, const cp_guard_job_list *list,
                                       uint32_t *at, cp_fault *fault, int checks,
                                       int one_budget)
{
    armed_walk w;
    w.g = g;
    w.seq = __atomic_load_n(&g->seq, __ATOMIC_RELAXED);
    w.first = w.seq;
    w.tasks = list->tasks;
    w.budget_ns = one_budget ? NULL : list->budget_ns;
    w.budget = list->budget;
    w.at = at;
    if (w.budget_ns == NULL) {
        __atomic_store_n(&g->budget_ns, list->budget, __ATOMIC_RELAXED);
    }
    return cp_jobs_walk(list, checks ? checked_job : lean_job, &w, fault);
}

CP_CALLS_LOADED_CODE
int cp_posix_guard_jobs(void *job_ctx, const cp_guard_job_list *list, uint32_t *at,
                        cp_fault *fault)
{
    guard_slot *g = job_ctx;
    if (g->check_cpu || g->check_signals ||
        !__atomic_load_n(&watchdog_running, __ATOMIC_ACQUIRE)) {
        return armed_jobs(g, list, at, fault, 1, 0);
    }
    /* the common case: nothing to check after a chain and the supervisor runs, so a job is
     * its seq and active stores (and its budget's, unless all are the same); a fault's jump
     * back finds its index from seq */
    g->jobs_seq = __atomic_load_n(&g->seq, __ATOMIC_RELAXED);
    g->jobs_at = at;
    g->lean = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (list->budget_ns == NULL) { /* (one loop each: no test per job) */
        (void)armed_jobs(g, list, at, fault, 0, 1);
    } else {
        (void)armed_jobs(g, list, at, fault, 0, 0);
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    g->lean = 0;
    g->jobs_at = NULL;
    return 0;
}

int cp_posix_guard_run(void *ctx, cp_guard_body_fn body, void *arg, cp_fault *fault)
{
    guard_slot *g = own_slot();
    if (g == NULL) {
        return body(arg, NULL, NULL); /* no slot left: unguarded, as cp_posix_guard */
    }
    g->out = fault;
    g->check_signals = checks_signals(ctx);
    g->check_cpu = checks_cpu(ctx);
    /* saved before a fault can jump back to restore it; the body's own code (the scheduler
     * between jobs) runs in the defined state too */
    cp_cpu_enter(&g->cpu);
    int sig = sigsetjmp(g->env, 0);
    if (sig != 0) {
        return jumped_back(sig);
    }
    int result = body(arg, armed_job, g);
    cp_cpu_restore(&g->cpu);
    return result;
}

/* ---- fault containment: the budget supervisor */

static uint64_t poll_interval_ns = DEFAULT_POLL_NS;

static uint64_t thread_cpu_ns(const guard_slot *g, uint64_t wall)
{
#if defined(__APPLE__)
    thread_basic_info_data_t info;
    mach_msg_type_number_t count = THREAD_BASIC_INFO_COUNT;
    if (g->have_cpu_clock &&
        thread_info(g->cpu_clock, THREAD_BASIC_INFO, (thread_info_t)&info, &count) ==
            KERN_SUCCESS) {
        return ((uint64_t)info.user_time.seconds + (uint64_t)info.system_time.seconds) *
                   1000000000u +
               ((uint64_t)info.user_time.microseconds + (uint64_t)info.system_time.microseconds) *
                   1000u;
    }
#else
    struct timespec ts;
    if (g->have_cpu_clock && clock_gettime(g->cpu_clock, &ts) == 0) {
        return ts_ns(&ts);
    }
#endif
    return wall; /* no CPU clock for that thread: wall time */
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {(time_t)(poll_interval_ns / 1000000000u),
                              (long)(poll_interval_ns % 1000000000u)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        uint64_t wall = cp_posix_monotonic_ns();
        for (size_t i = 0; i < GUARD_SLOTS; i++) {
            guard_slot *g = &slots[i];
            if (!__atomic_load_n(&g->in_use, __ATOMIC_ACQUIRE)) {
                continue;
            }
            uint64_t seq = __atomic_load_n(&g->seq, __ATOMIC_ACQUIRE);
            uint64_t budget = __atomic_load_n(&g->budget_ns, __ATOMIC_RELAXED);
            if ((seq & 1u) == 0 || budget == 0) {
                g->watch.seen_seq = 0;
                continue;
            }
            int fired = __atomic_load_n(&g->kill_seq, __ATOMIC_RELAXED) == seq;
            if (cp_guard_watch_due(&g->watch, seq, budget, thread_cpu_ns(g, wall), wall, fired)) {
                __atomic_store_n(&g->kill_seq, seq, __ATOMIC_RELEASE);
                pthread_kill(g->thread, CP_POSIX_WATCHDOG_SIGNAL);
            }
        }
    }
    return NULL;
}

int cp_posix_watchdog_start(uint64_t poll_ns, int rt_priority)
{
    pthread_mutex_lock(&watchdog_lock);
    if (watchdog_running) {
        pthread_mutex_unlock(&watchdog_lock);
        return 0;
    }
    if (poll_ns != 0) {
        poll_interval_ns = poll_ns;
    }
    if (!__atomic_load_n(&handlers_installed, __ATOMIC_ACQUIRE)) {
        (void)cp_posix_guard_install();
    }
    /* the supervisor itself must never take a fault signal meant for a guarded thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    int rc = EINVAL;
    if (rt_priority > 0) {
        struct sched_param sp;
        memset(&sp, 0, sizeof(sp));
        sp.sched_priority = rt_priority;
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
        pthread_attr_setschedparam(&attr, &sp);
        rc = pthread_create(&t, &attr, watchdog_main, NULL);
        pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
    }
    if (rc != 0) {
        rc = pthread_create(&t, &attr, watchdog_main, NULL);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    __atomic_store_n(&watchdog_running, rc == 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&watchdog_lock);
    return rc;
}

/* ---- the job clock: a calibrated cycle counter where one is invariant (design notes in
 * copapy/platform_posix.h) */

#if (defined(__x86_64__) || defined(__aarch64__)) && (defined(__GNUC__) || defined(__clang__)) && \
    defined(__SIZEOF_INT128__)
#define HAVE_COUNTER 1
#else
#define HAVE_COUNTER 0
#endif

enum {
    CAL_NS = 2000000,     /* calibration interval (doubled while too uncertain) */
    CAL_TRIES = 7,        /* 2, 4, .. 128 ms before falling back to CLOCK_MONOTONIC */
    CAL_PAIRS = 16,       /* counter/CLOCK_MONOTONIC pairs per end point, the tightest kept */
    CAL_ERROR_PPM = 200   /* the two end points' uncertainty may be at most this of the span */
};

/* What cp_posix_clock_ns reads: set once (clock_once), published by the release store of
 * clock_kind, never changed after. ns = base_ns + ((count - base_count) * mult) >> 32. */
static struct {
    uint64_t base_count;
    uint64_t base_ns;
    uint64_t mult;  /* ns per count, 32.32 fixed point */
    uint64_t hz;    /* counts per second (for reports) */
} job_clock;
static int clock_kind; /* atomic: 0 until chosen, then a CP_POSIX_CLOCK_* value */
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

uint64_t cp_posix_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts_ns(&ts);
}

#if HAVE_COUNTER
static inline uint64_t read_counter(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
#else
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#endif
}

#if defined(__x86_64__)
/* 1 if the kernel names `want` as its clock source, or says nothing (no sysfs): it has
 * checked the counter (synchronised across CPUs, steady) and would have switched away from
 * it otherwise. */
static int kernel_clocksource_is(const char *want)
{
#if defined(__linux__)
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 1;
    }
    char buf[32];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 1;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) {
        n--;
    }
    buf[n] = '\0';
    return strcmp(buf, want) == 0;
#else
    (void)want;
    return 1;
#endif
}
#endif

/* 1 if the counter ticks at a constant rate, also through sleep states, on every CPU. */
static int counter_invariant(void)
{
#if defined(__x86_64__)
    /* CPUID 0x80000007 EDX bit 8: invariant TSC (Linux: constant_tsc + nonstop_tsc) */
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u ||
        __get_cpuid(0x80000007u, &a, &b, &c, &d) == 0 || (d & (1u << 8)) == 0) {
        return 0;
    }
    return kernel_clocksource_is("tsc");
#else
    /* the Arm generic timer's system counter has a fixed frequency and is one counter for
     * all CPUs by architecture; Linux gives EL0 access to it (or traps and emulates it) */
    return 1;
#endif
}

/* One (count, ns) pair: a CLOCK_MONOTONIC read between two counter reads, from the tightest
 * of CAL_PAIRS tries (a preemption only widens a try). Returns the bracket's width. */
static uint64_t clock_pair(uint64_t *count, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < CAL_PAIRS; k++) {
        uint64_t c0 = read_counter();
        uint64_t t = cp_posix_monotonic_ns();
        uint64_t c1 = read_counter();
        if (c1 >= c0 && c1 - c0 < best) {
            best = c1 - c0;
            *count = c0 + (c1 - c0) / 2;
            *ns = t;
        }
    }
    return best;
}

/* The counter's rate from two pairs CAL_NS apart, or further apart while their uncertainty is
 * not small against the span (a preempted or an emulated CPU, where each read is slow): the
 * second pair is taken again after twice the wait, up to CAL_TRIES times (~0.25 s in all).
 * 0 if that never fits, or if the counter does not behave like a clock of 1 MHz to 100 GHz. */
static int calibrate(void)
{
    uint64_t c0 = 0, t0 = 0, c1 = 0, t1 = 0;
    uint64_t w0 = clock_pair(&c0, &t0);
    uint64_t wait_ns = CAL_NS;
    for (int attempt = 0; attempt < CAL_TRIES && w0 != UINT64_MAX; attempt++, wait_ns *= 2) {
        struct timespec nap = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {
        }
        uint64_t w1 = clock_pair(&c1, &t1);
        if (w1 == UINT64_MAX || c1 <= c0 || t1 <= t0) {
            return 0; /* the counter does not advance (or the clock does not) */
        }
        uint64_t span = c1 - c0;
        if ((unsigned __int128)(w0 + w1) * 1000000u > (unsigned __int128)span * CAL_ERROR_PPM) {
            continue; /* too uncertain for this span: wait longer */
        }
        unsigned __int128 mult = ((unsigned __int128)(t1 - t0) << 32) / span;
        /* 1 MHz .. 100 GHz: 1000 ns .. 0.01 ns per count */
        if (mult > (unsigned __int128)1000u << 32 || mult < ((unsigned __int128)1 << 32) / 100u) {
            return 0;
        }
        job_clock.base_count = c1;
        job_clock.base_ns = t1;
        job_clock.mult = (uint64_t)mult;
        job_clock.hz = (uint64_t)(((unsigned __int128)span * 1000000000u) / (t1 - t0));
        return 1;
    }
    return 0;
}
#endif

static void choose_clock(void)
{
    int kind = CP_POSIX_CLOCK_MONOTONIC;
    const char *force = getenv("COPAPY_CLOCK");
    int allowed = force == NULL || strcmp(force, "monotonic") != 0;
#if HAVE_COUNTER
    if (allowed && counter_invariant() && calibrate()) {
        kind = CP_POSIX_CLOCK_COUNTER;
    }
#else
    (void)allowed;
#endif
    __atomic_store_n(&clock_kind, kind, __ATOMIC_RELEASE);
}

int cp_posix_clock_init(void)
{
    int kind = __atomic_load_n(&clock_kind, __ATOMIC_ACQUIRE);
    if (kind == 0) {
        pthread_once(&clock_once, choose_clock);
        kind = __atomic_load_n(&clock_kind, __ATOMIC_ACQUIRE);
    }
    return kind;
}

uint64_t cp_posix_clock_ns(void *ctx)
{
    (void)ctx;
#if HAVE_COUNTER
    int kind = __atomic_load_n(&clock_kind, __ATOMIC_ACQUIRE);
    if (__builtin_expect(kind == 0, 0)) {
        kind = cp_posix_clock_init();
    }
    if (kind == CP_POSIX_CLOCK_COUNTER) {
        uint64_t d = read_counter() - job_clock.base_count;
        if (d > UINT64_MAX / 2) {
            return job_clock.base_ns; /* a CPU a few counts behind the one that calibrated */
        }
        return job_clock.base_ns + (uint64_t)(((unsigned __int128)d * job_clock.mult) >> 32);
    }
#endif
    return cp_posix_monotonic_ns();
}

const char *cp_posix_clock_name(void)
{
    switch (cp_posix_clock_init()) {
    case CP_POSIX_CLOCK_COUNTER:
#if defined(__x86_64__)
        return "tsc";
#else
        return "cntvct";
#endif
    default:
        return "monotonic";
    }
}

uint64_t cp_posix_clock_hz(void)
{
    return cp_posix_clock_init() == CP_POSIX_CLOCK_COUNTER ? job_clock.hz : 1000000000u;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int cp_platform_posix_unavailable;

#endif
