/* Host platform on Windows (x86_64): the same interface as the POSIX platform
 * (copapy/platform_posix.h, the host platform's API; its callers do not change), built on
 * Win32. The region is VirtualAlloc'd read-write, its code part switched to read-execute by
 * VirtualProtect after patching (never writable and executable at once). Fault containment:
 * a vectored exception handler takes the exceptions a guarded chain causes (the fault kinds of
 * contract.h, mapped from the exception codes) and resumes the thread in a function that jumps
 * back into the guard; the budget supervisor samples each guarded thread's CPU time
 * (GetThreadTimes) and redirects a thread that overran the same way (SuspendThread,
 * SetThreadContext). Chains are System V functions (CP_CHAIN_ABI, runner.h). The job clock is
 * QueryPerformanceCounter. Design notes: docs/platforms.md. */
#if defined(_WIN32)

#define WIN32_LEAN_AND_MEAN 1
#include <windows.h>
#include <mmsystem.h> /* timeBeginPeriod (winmm) */

#include <stdint.h>
#include <string.h>

#include "copapy/platform_posix.h"
#include "copapy/platform_win32.h"
#include "cpu_state.h"
#include "guard_common.h"
#include "internal.h"

#if defined(__x86_64__)
#define HOST_ARCH CP_ARCH_X86_64
#elif defined(__aarch64__)
#define HOST_ARCH CP_ARCH_AARCH64
#else
#define HOST_ARCH 0 /* no image can match: every load fails with ARCH */
#endif

static size_t page_size(void)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwPageSize > 0 ? (size_t)si.dwPageSize : 4096u;
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static void *win_alloc(void *ctx, size_t size, size_t align)
{
    (void)ctx;
    if (size == 0 || align == 0 || (align & (align - 1)) != 0 || size > SIZE_MAX / 2) {
        return NULL;
    }
    size_t len = round_up(size, page_size());
    void *p = VirtualAlloc(NULL, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (p == NULL || (uintptr_t)p % align == 0) {
        return p; /* allocations start at the 64 KiB granularity */
    }
    /* a larger alignment: find an aligned address in a reservation, then take it (another
     * thread may take it first: try again) */
    VirtualFree(p, 0, MEM_RELEASE);
    for (int attempt = 0; attempt < 8; attempt++) {
        uint8_t *raw = VirtualAlloc(NULL, len + align, MEM_RESERVE, PAGE_NOACCESS);
        if (raw == NULL) {
            return NULL;
        }
        uintptr_t want = ((uintptr_t)raw + align - 1) / align * align;
        VirtualFree(raw, 0, MEM_RELEASE);
        p = VirtualAlloc((void *)want, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
        if (p != NULL) {
            return p;
        }
    }
    return NULL;
}

static int win_seal(void *ctx, void *base, size_t code_len, size_t size)
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
    DWORD old = 0;
    if (!VirtualProtect(base, len, PAGE_EXECUTE_READ, &old)) {
        return -1;
    }
    return FlushInstructionCache(GetCurrentProcess(), base, len) ? 0 : -1;
}

static void win_free(void *ctx, void *base, size_t size)
{
    (void)ctx;
    (void)size;
    if (base != NULL) {
        VirtualFree(base, 0, MEM_RELEASE);
    }
}

static const cp_platform win_platform = {
    .struct_size = sizeof(cp_platform),
    .abi_version = CP_RUNNER_ABI_VERSION,
    .arch = HOST_ARCH,
    .reserved = 0,
    .ctx = NULL,
    .region_alloc = win_alloc,
    .region_seal = win_seal,
    .region_free = win_free,
    .max_region_size = 0,
    .memory_option = NULL,
    .cpu_features = cp_posix_cpu_features,
};

const cp_platform *cp_platform_posix(void)
{
    return &win_platform;
}

/* ---- fault containment: the guard */

enum {
    GUARD_SLOTS = 64,           /* threads that may run guarded code at the same time */
    DEFAULT_POLL_NS = 50000000, /* in-process: budgets are >= 1 s there */
    RED_ZONE = 128              /* System V code may keep data below its stack pointer */
};

/* The guard's way back from a chain: a setjmp that keeps every register the Win64 ABI makes
 * callee-saved (rbx, rbp, rdi, rsi, r12-r15, xmm6-xmm15), the stack pointer and the return
 * address, and a longjmp that puts them back (no unwinding: the chain's frames have no unwind
 * information). Not clang's __builtin_setjmp: on x86_64 Windows it saves llvm.frameaddress,
 * which is RBP minus the frame's offset there, and __builtin_longjmp loads that into RBP, so
 * the landing code restored xmm6-xmm15 from slots 0x80 bytes off (llvm/llvm-project#72908):
 * after a fault or a timeout the guard's caller lost them (a run armed for several ticks:
 * the caller of cp_sched_advance, whose 0.25 for the safe output was in one). */
#if defined(__x86_64__)
typedef struct jump_buf {
    uint64_t gpr[10];    /* return address, rsp after the return, rbx rbp rdi rsi r12-r15 */
    uint8_t xmm[10][16]; /* xmm6-xmm15 */
} jump_buf;
/* 0 when called, 1 when cp_win32_longjmp comes back to it */
__attribute__((returns_twice)) int cp_win32_setjmp(jump_buf *b);
__attribute__((noreturn)) void cp_win32_longjmp(jump_buf *b);
__asm__(".text\n"
        ".globl cp_win32_setjmp\n"
        "cp_win32_setjmp:\n"
        "    movq (%rsp), %rax\n"
        "    movq %rax, 0(%rcx)\n"
        "    leaq 8(%rsp), %rax\n"
        "    movq %rax, 8(%rcx)\n"
        "    movq %rbx, 16(%rcx)\n"
        "    movq %rbp, 24(%rcx)\n"
        "    movq %rdi, 32(%rcx)\n"
        "    movq %rsi, 40(%rcx)\n"
        "    movq %r12, 48(%rcx)\n"
        "    movq %r13, 56(%rcx)\n"
        "    movq %r14, 64(%rcx)\n"
        "    movq %r15, 72(%rcx)\n"
        "    movdqu %xmm6, 80(%rcx)\n"
        "    movdqu %xmm7, 96(%rcx)\n"
        "    movdqu %xmm8, 112(%rcx)\n"
        "    movdqu %xmm9, 128(%rcx)\n"
        "    movdqu %xmm10, 144(%rcx)\n"
        "    movdqu %xmm11, 160(%rcx)\n"
        "    movdqu %xmm12, 176(%rcx)\n"
        "    movdqu %xmm13, 192(%rcx)\n"
        "    movdqu %xmm14, 208(%rcx)\n"
        "    movdqu %xmm15, 224(%rcx)\n"
        "    xorl %eax, %eax\n"
        "    ret\n"
        ".globl cp_win32_longjmp\n"
        "cp_win32_longjmp:\n"
        "    movq 16(%rcx), %rbx\n"
        "    movq 24(%rcx), %rbp\n"
        "    movq 32(%rcx), %rdi\n"
        "    movq 40(%rcx), %rsi\n"
        "    movq 48(%rcx), %r12\n"
        "    movq 56(%rcx), %r13\n"
        "    movq 64(%rcx), %r14\n"
        "    movq 72(%rcx), %r15\n"
        "    movdqu 80(%rcx), %xmm6\n"
        "    movdqu 96(%rcx), %xmm7\n"
        "    movdqu 112(%rcx), %xmm8\n"
        "    movdqu 128(%rcx), %xmm9\n"
        "    movdqu 144(%rcx), %xmm10\n"
        "    movdqu 160(%rcx), %xmm11\n"
        "    movdqu 176(%rcx), %xmm12\n"
        "    movdqu 192(%rcx), %xmm13\n"
        "    movdqu 208(%rcx), %xmm14\n"
        "    movdqu 224(%rcx), %xmm15\n"
        "    movq 8(%rcx), %rsp\n"
        "    movl $1, %eax\n"
        "    jmpq *0(%rcx)\n");
#define GUARD_SETJMP(b) cp_win32_setjmp(&(b))
#define GUARD_LONGJMP(b) cp_win32_longjmp(&(b))
#else
typedef void *jump_buf[5]; /* no Windows guard is tested here but x86_64's */
#define GUARD_SETJMP(b) __builtin_setjmp(b)
#define GUARD_LONGJMP(b) __builtin_longjmp(b, 1)
#endif

/* One per thread that runs guarded code. `seq` is odd while a job runs; the supervisor reads
 * it, `budget_ns` and the thread's CPU time; `kill_seq` is the job it interrupted. */
typedef struct guard_slot {
    jump_buf env;                 /* where a fault or a timeout resumes the guard */
    volatile LONG active;         /* the chain is running: an exception is ours */
    LONG in_use;                  /* atomic: claimed by a thread */
    uint64_t seq;                 /* atomic */
    uint64_t budget_ns;           /* atomic */
    uint64_t kill_seq;            /* atomic */
    HANDLE thread;                /* a real handle of the thread (the supervisor's) */
    cp_fault fault;               /* filled by the handler or the supervisor */
    cp_fault *out;                /* the caller's fault record */
    cp_cpu_saved cpu;             /* the caller's FP control state while a chain runs */
    cp_guard_watch watch;         /* supervisor only */
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static _Thread_local guard_slot *tls_slot;
static DWORD fls_index = FLS_OUT_OF_INDEXES;
static SRWLOCK install_lock = SRWLOCK_INIT;
static PVOID handler_cookie;
static LONG handlers_installed;

const cp_posix_guard_policy cp_posix_own_code = {0, 0};
/* keeps_cpu_state is not used here: this guard checks the CPU state after every job */
const cp_posix_guard_policy cp_posix_verified = {1, 1};
const cp_posix_guard_policy cp_posix_own_verified_code = {0, 1};

static uint32_t fault_kind(DWORD code)
{
    switch (code) {
    case EXCEPTION_ACCESS_VIOLATION:
    case EXCEPTION_IN_PAGE_ERROR:
    case EXCEPTION_ARRAY_BOUNDS_EXCEEDED:
    case EXCEPTION_STACK_OVERFLOW:
    case EXCEPTION_GUARD_PAGE:
        return CP_FAULT_SIGSEGV;
    case EXCEPTION_ILLEGAL_INSTRUCTION:
    case EXCEPTION_PRIV_INSTRUCTION:
        return CP_FAULT_SIGILL;
    case EXCEPTION_DATATYPE_MISALIGNMENT:
        return CP_FAULT_SIGBUS;
    case EXCEPTION_INT_DIVIDE_BY_ZERO:
    case EXCEPTION_INT_OVERFLOW:
    case EXCEPTION_FLT_DIVIDE_BY_ZERO:
    case EXCEPTION_FLT_INVALID_OPERATION:
    case EXCEPTION_FLT_OVERFLOW:
    case EXCEPTION_FLT_UNDERFLOW:
    case EXCEPTION_FLT_INEXACT_RESULT:
    case EXCEPTION_FLT_DENORMAL_OPERAND:
    case EXCEPTION_FLT_STACK_CHECK:
        return CP_FAULT_SIGFPE;
    case EXCEPTION_BREAKPOINT:
    case EXCEPTION_SINGLE_STEP:
        return CP_FAULT_SIGTRAP;
    default:
        return 0; /* not a fault of a chain (e.g. a C++ exception, a debug print) */
    }
}

/* Where a contained thread resumes: back into the guard's GUARD_SETJMP. Only memory is
 * trusted here. */
__attribute__((noreturn, noinline)) static void resume_in_guard(void)
{
    GUARD_LONGJMP(tls_slot->env);
}

/* The thread continues in resume_in_guard, on its own stack below the chain's (and below
 * its red zone), with EFLAGS.AC, DF and TF clear. */
static void redirect(CONTEXT *c)
{
#if defined(__x86_64__)
    uint64_t sp = (c->Rsp - RED_ZONE - 64u) & ~(uint64_t)15u;
    c->Rsp = sp - 8u; /* as after a call: the return slot */
    c->Rip = (DWORD64)(uintptr_t)resume_in_guard;
    c->EFlags &= ~(DWORD)CP_CPU_EFLAGS_BAD;
#else
    (void)c;
#endif
}

static uint64_t context_pc(const CONTEXT *c)
{
#if defined(__x86_64__)
    return (uint64_t)c->Rip;
#else
    (void)c;
    return 0;
#endif
}

static LONG CALLBACK on_exception(EXCEPTION_POINTERS *ep)
{
    guard_slot *g = tls_slot;
    const EXCEPTION_RECORD *r = ep->ExceptionRecord;
    uint32_t kind = fault_kind(r->ExceptionCode);
    if (g == NULL || kind == 0 || !g->active) {
        return EXCEPTION_CONTINUE_SEARCH; /* not ours: a bug in the runner still crashes */
    }
    g->active = 0;
    g->fault.kind = kind;
    g->fault.address = (r->ExceptionCode == EXCEPTION_ACCESS_VIOLATION ||
                        r->ExceptionCode == EXCEPTION_IN_PAGE_ERROR) &&
                               r->NumberParameters >= 2
                           ? (uint64_t)r->ExceptionInformation[1]
                           : (uint64_t)(uintptr_t)r->ExceptionAddress;
    g->fault.pc = context_pc(ep->ContextRecord);
    g->fault.code = (uint32_t)r->ExceptionCode;
    redirect(ep->ContextRecord);
    return EXCEPTION_CONTINUE_EXECUTION;
}

static guard_slot *own_slot(void);

/* Installs the handler and claims the calling thread's slot (the thread that loads a program
 * is the one that runs it, usually): a slot costs a handle duplication, a system call that
 * should not land in the first job's measured time. */
int cp_posix_guard_install(void)
{
    AcquireSRWLockExclusive(&install_lock);
    if (handler_cookie == NULL) {
        /* first in line: a chain's exception is handled before any frame-based handler */
        handler_cookie = AddVectoredExceptionHandler(1, on_exception);
    }
    int rc = handler_cookie != NULL ? 0 : -1;
    InterlockedExchange(&handlers_installed, rc == 0);
    ReleaseSRWLockExclusive(&install_lock);
    if (rc == 0) {
        (void)own_slot();
    }
    return rc;
}

/* Thread exit (the fiber-local storage callback): give the slot back. */
static void WINAPI release_slot(void *arg)
{
    guard_slot *g = arg;
    if (g == NULL) {
        return;
    }
    if (g->thread != NULL) {
        CloseHandle(g->thread);
        g->thread = NULL;
    }
    __atomic_store_n(&g->seq, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&g->in_use, 0, __ATOMIC_RELEASE);
}

static BOOL CALLBACK make_fls(PINIT_ONCE once, PVOID param, PVOID *ctx)
{
    (void)once;
    (void)param;
    (void)ctx;
    fls_index = FlsAlloc(release_slot);
    return TRUE;
}

static INIT_ONCE fls_once = INIT_ONCE_STATIC_INIT;

__attribute__((noinline)) static guard_slot *claim_slot(void)
{
    InitOnceExecuteOnce(&fls_once, make_fls, NULL, NULL);
    if (!__atomic_load_n(&handlers_installed, __ATOMIC_ACQUIRE) && cp_posix_guard_install() != 0) {
        return NULL;
    }
    for (size_t i = 0; i < GUARD_SLOTS; i++) {
        LONG free_slot = 0;
        if (__atomic_compare_exchange_n(&slots[i].in_use, &free_slot, 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            guard_slot *g = &slots[i];
            g->active = 0;
            g->watch.seen_seq = 0;
            HANDLE self = NULL;
            if (!DuplicateHandle(GetCurrentProcess(), GetCurrentThread(), GetCurrentProcess(),
                                 &self, 0, FALSE, DUPLICATE_SAME_ACCESS)) {
                self = NULL; /* no supervision for this thread: faults are still contained */
            }
            g->thread = self;
            if (fls_index != FLS_OUT_OF_INDEXES) {
                (void)FlsSetValue(fls_index, g);
            }
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

/* The way back from a redirected chain: the job is over (seq even again), the caller's FP
 * state back, the fault copied to the caller's record. */
static int jumped_back(void)
{
    guard_slot *j = tls_slot;
    __atomic_store_n(&j->seq, __atomic_load_n(&j->seq, __ATOMIC_RELAXED) + 1u,
                     __ATOMIC_RELEASE);
    cp_cpu_restore(&j->cpu);
    return cp_guard_report(j->out, &j->fault);
}

/* One job under an armed slot: seq is odd and an exception is ours while the chain runs. */
CP_CALLS_LOADED_CODE
static inline uint32_t run_armed(guard_slot *g, cp_chain_fn entry, uint32_t *fp_left)
{
    cp_cpu_enter(&g->cpu);
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
    return changed;
}

static inline void need_watchdog(uint64_t budget_ns)
{
    static LONG started;
    if (budget_ns != 0 && !__atomic_load_n(&started, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
        (void)cp_posix_watchdog_start(0, 0);
    }
}

CP_CALLS_LOADED_CODE
int cp_posix_guard(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault)
{
    (void)ctx; /* no signal state to check: the policy changes nothing here */
    guard_slot *g = own_slot();
    if (g == NULL) {
        entry(); /* no slot left (more than GUARD_SLOTS threads at once): unguarded */
        return 0;
    }
    need_watchdog(budget_ns);
    g->out = fault;
    __atomic_store_n(&g->budget_ns, budget_ns, __ATOMIC_RELAXED);
    if (GUARD_SETJMP(g->env) != 0) {
        return jumped_back();
    }
    uint32_t fp_left = 0;
    uint32_t changed = run_armed(g, entry, &fp_left);
    return changed != 0 ? cp_guard_changed_state(fault, changed, fp_left) : 0;
}

CP_CALLS_LOADED_CODE
static int armed_job(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault)
{
    guard_slot *g = ctx; /* an exception's fault: filled through cp_posix_guard_run's record */
    need_watchdog(budget_ns);
    __atomic_store_n(&g->budget_ns, budget_ns, __ATOMIC_RELAXED);
    uint32_t fp_left = 0;
    uint32_t changed = run_armed(g, entry, &fp_left);
    return changed != 0 ? cp_guard_changed_state(fault, changed, fp_left) : 0;
}

/* A job of cp_posix_guard_jobs's walk (guard_common.h): *at its index over the call, set
 * before it starts. */
typedef struct armed_walk {
    guard_slot *g;
    const cp_guard_job_list *list;
    uint32_t *at;
} armed_walk;

CP_CALLS_LOADED_CODE
static int walk_job(void *ctx, uint32_t task, uint32_t n, cp_fault *fault)
{
    armed_walk *w = ctx;
    const cp_guard_job_list *list = w->list;
    *w->at = n;
    uint64_t budget = list->budget_ns != NULL ? list->budget_ns[task] : list->budget;
    return armed_job(w->g, list->tasks[task].entry, budget, fault);
}

CP_CALLS_LOADED_CODE
int cp_posix_guard_jobs(void *job_ctx, const cp_guard_job_list *list, uint32_t *at,
                        cp_fault *fault)
{
    armed_walk w = {job_ctx, list, at};
    return cp_jobs_walk(list, walk_job, &w, fault);
}

int cp_posix_guard_run(void *ctx, cp_guard_body_fn body, void *arg, cp_fault *fault)
{
    (void)ctx;
    guard_slot *g = own_slot();
    if (g == NULL) {
        return body(arg, NULL, NULL); /* no slot left: unguarded, as cp_posix_guard */
    }
    g->out = fault;
    if (GUARD_SETJMP(g->env) != 0) {
        return jumped_back();
    }
    int result = body(arg, armed_job, g);
    /* never a tail call: the body runs in this frame's GUARD_SETJMP, which must stay live */
    __asm__ volatile("" : "+r"(result) : : "memory");
    return result;
}

/* ---- fault containment: the budget supervisor */

static uint64_t poll_interval_ns = DEFAULT_POLL_NS;
static LONG watchdog_running;
static SRWLOCK watchdog_lock = SRWLOCK_INIT;

static uint64_t thread_cpu_ns(const guard_slot *g, uint64_t wall)
{
    FILETIME created, exited, kernel, user;
    if (g->thread != NULL && GetThreadTimes(g->thread, &created, &exited, &kernel, &user)) {
        uint64_t k = (uint64_t)kernel.dwHighDateTime << 32 | kernel.dwLowDateTime;
        uint64_t u = (uint64_t)user.dwHighDateTime << 32 | user.dwLowDateTime;
        return (k + u) * 100u; /* 100 ns units */
    }
    return wall; /* no CPU time for that thread: wall time */
}

/* Stops the job `seq` of g's thread: suspended, it is redirected into resume_in_guard if it
 * still runs that job's chain (else it has finished in the meantime: left alone). */
static void interrupt(guard_slot *g, uint64_t seq)
{
    if (g->thread == NULL || SuspendThread(g->thread) == (DWORD)-1) {
        return;
    }
    CONTEXT c;
    memset(&c, 0, sizeof(c));
    c.ContextFlags = CONTEXT_CONTROL;
    if (g->active && __atomic_load_n(&g->seq, __ATOMIC_ACQUIRE) == seq &&
        GetThreadContext(g->thread, &c)) {
        g->active = 0;
        g->fault.kind = CP_FAULT_TIMEOUT;
        g->fault.address = 0;
        g->fault.pc = context_pc(&c);
        g->fault.code = 0;
        redirect(&c);
        if (!SetThreadContext(g->thread, &c)) {
            g->active = 1; /* try again at the next poll */
        }
    }
    ResumeThread(g->thread);
}

static DWORD WINAPI watchdog_main(LPVOID arg)
{
    (void)arg;
    for (;;) {
        DWORD ms = (DWORD)(poll_interval_ns / 1000000u);
        Sleep(ms > 0 ? ms : 1);
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
                interrupt(g, seq);
            }
        }
    }
    return 0;
}

int cp_posix_watchdog_start(uint64_t poll_ns, int rt_priority)
{
    AcquireSRWLockExclusive(&watchdog_lock);
    if (watchdog_running) {
        ReleaseSRWLockExclusive(&watchdog_lock);
        return 0;
    }
    if (poll_ns != 0) {
        poll_interval_ns = poll_ns;
    }
    if (!__atomic_load_n(&handlers_installed, __ATOMIC_ACQUIRE)) {
        (void)cp_posix_guard_install();
    }
    /* a coarse timer (15.6 ms) would make the poll interval that coarse too */
    timeBeginPeriod(1);
    HANDLE t = CreateThread(NULL, 64 * 1024, watchdog_main, NULL,
                            STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
    int rc = 0;
    if (t == NULL) {
        rc = (int)GetLastError();
    } else {
        if (rt_priority > 0) {
            (void)SetThreadPriority(t, THREAD_PRIORITY_TIME_CRITICAL);
        }
        CloseHandle(t);
    }
    __atomic_store_n(&watchdog_running, rc == 0, __ATOMIC_RELEASE);
    ReleaseSRWLockExclusive(&watchdog_lock);
    return rc;
}

/* ---- sleeping to a deadline */

#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x00000002
#endif

static _Thread_local HANDLE sleep_timer;

void cp_win32_sleep_until(uint64_t deadline_ns)
{
    if (sleep_timer == NULL) {
        sleep_timer = CreateWaitableTimerExW(NULL, NULL, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION,
                                             TIMER_ALL_ACCESS);
    }
    if (sleep_timer == NULL) {
        sleep_timer = CreateWaitableTimerExW(NULL, NULL, 0, TIMER_ALL_ACCESS);
    }
    /* a relative due time (100 ns units, negative), armed again until the deadline has
     * passed: the timer may fire a little early on the coarse system timer */
    for (uint64_t now = cp_posix_monotonic_ns(); now < deadline_ns;
         now = cp_posix_monotonic_ns()) {
        uint64_t left = deadline_ns - now;
        LARGE_INTEGER due;
        due.QuadPart = -(LONGLONG)((left + 99u) / 100u);
        if (sleep_timer == NULL || !SetWaitableTimer(sleep_timer, &due, 0, NULL, NULL, FALSE)) {
            Sleep((DWORD)((left + 999999u) / 1000000u));
            continue;
        }
        (void)WaitForSingleObject(sleep_timer, INFINITE);
    }
}

/* ---- the job clock: QueryPerformanceCounter (invariant by Windows' own choice of source) */

static uint64_t qpc_hz(void)
{
    static uint64_t hz;
    uint64_t f = __atomic_load_n(&hz, __ATOMIC_RELAXED);
    if (f == 0) {
        LARGE_INTEGER q;
        f = QueryPerformanceFrequency(&q) && q.QuadPart > 0 ? (uint64_t)q.QuadPart : 1u;
        __atomic_store_n(&hz, f, __ATOMIC_RELAXED);
    }
    return f;
}

uint64_t cp_posix_monotonic_ns(void)
{
    LARGE_INTEGER c;
    QueryPerformanceCounter(&c);
    uint64_t f = qpc_hz();
    uint64_t n = (uint64_t)c.QuadPart;
    return n / f * 1000000000u + n % f * 1000000000u / f;
}

int cp_posix_clock_init(void)
{
    (void)qpc_hz();
    return CP_POSIX_CLOCK_MONOTONIC;
}

uint64_t cp_posix_clock_ns(void *ctx)
{
    (void)ctx;
    return cp_posix_monotonic_ns();
}

const char *cp_posix_clock_name(void)
{
    return "monotonic";
}

uint64_t cp_posix_clock_hz(void)
{
    return 1000000000u;
}

#else

/* ISO C wants at least one declaration in a translation unit. */
typedef int cp_platform_win32_unavailable;

#endif
