/* The host guard (platform_posix.c, platform_win32.c) as its callers see it, on x86_64:
 * 1. A fault or a budget timeout that jumps back out of a chain gives the guard's caller back
 *    every register the platform's ABI makes callee-saved. On Windows that includes
 *    xmm6-xmm15, which clang's __builtin_setjmp did not give back (its frame address is not
 *    RBP there): a timeout in a run armed for several ticks left cp_sched_advance's caller
 *    with garbage in them (test_sched's safe-output check, under wine).
 * 2. A run of jobs checks the CPU state after each job unless its policy says the chains are
 *    stencils of a table proven to keep it (keeps_cpu_state): a job that changes MXCSR is
 *    caught at that job without the flag and runs on with it (POSIX; the Windows guard checks
 *    every job); the caller's MXCSR comes back either way.
 * 3. A chain that leaves the upper halves of the vector registers in use (the AVX tables'
 *    fused loops) hands them back cleared (vzeroupper, cpu_state.h): the XSAVE in-use bit of
 *    the ymm state is 0 after the guard, whatever its policy. */
#include <string.h>

#include "check.h"
#include "copapy/platform_posix.h"
#include "copapy/runner.h"
#include "../src/internal.h"

#if defined(__x86_64__) && (defined(__linux__) || defined(_WIN32))

#include <cpuid.h>

/* probe(fn, arg, out): a known value in every callee-saved register, fn(arg), then what the
 * registers hold into out[] (POSIX: rbx rbp r12-r15; Windows: rbx rbp rsi rdi r12-r15, then
 * the low halves of xmm6-xmm15) */
typedef void (*probe_fn)(void *);
void cp_test_probe(probe_fn fn, void *arg, uint64_t *out);
#if defined(_WIN32)
enum { PROBED = 18 };
static const uint64_t probe_value[PROBED] = {0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666,
                                             0x7777, 0x8888, 0x60, 0x70, 0x80, 0x90, 0xa0,
                                             0xb0, 0xc0, 0xd0, 0xe0, 0xf0};
__asm__(".text\n.globl cp_test_probe\ncp_test_probe:\n"
        "push %rbx\npush %rbp\npush %rsi\npush %rdi\npush %r12\npush %r13\npush %r14\n"
        "push %r15\nsub $216, %rsp\n"
        "movdqu %xmm6, 48(%rsp)\nmovdqu %xmm7, 64(%rsp)\nmovdqu %xmm8, 80(%rsp)\n"
        "movdqu %xmm9, 96(%rsp)\nmovdqu %xmm10, 112(%rsp)\nmovdqu %xmm11, 128(%rsp)\n"
        "movdqu %xmm12, 144(%rsp)\nmovdqu %xmm13, 160(%rsp)\nmovdqu %xmm14, 176(%rsp)\n"
        "movdqu %xmm15, 192(%rsp)\nmov %r8, 32(%rsp)\n"
        "mov $0x1111, %rbx\nmov $0x2222, %rbp\nmov $0x3333, %rsi\nmov $0x4444, %rdi\n"
        "mov $0x5555, %r12\nmov $0x6666, %r13\nmov $0x7777, %r14\nmov $0x8888, %r15\n"
        "mov $0x60, %eax\nmovq %rax, %xmm6\nmov $0x70, %eax\nmovq %rax, %xmm7\n"
        "mov $0x80, %eax\nmovq %rax, %xmm8\nmov $0x90, %eax\nmovq %rax, %xmm9\n"
        "mov $0xa0, %eax\nmovq %rax, %xmm10\nmov $0xb0, %eax\nmovq %rax, %xmm11\n"
        "mov $0xc0, %eax\nmovq %rax, %xmm12\nmov $0xd0, %eax\nmovq %rax, %xmm13\n"
        "mov $0xe0, %eax\nmovq %rax, %xmm14\nmov $0xf0, %eax\nmovq %rax, %xmm15\n"
        "mov %rcx, %rax\nmov %rdx, %rcx\ncall *%rax\nmov 32(%rsp), %r8\n"
        "mov %rbx, 0(%r8)\nmov %rbp, 8(%r8)\nmov %rsi, 16(%r8)\nmov %rdi, 24(%r8)\n"
        "mov %r12, 32(%r8)\nmov %r13, 40(%r8)\nmov %r14, 48(%r8)\nmov %r15, 56(%r8)\n"
        "movq %xmm6, 64(%r8)\nmovq %xmm7, 72(%r8)\nmovq %xmm8, 80(%r8)\nmovq %xmm9, 88(%r8)\n"
        "movq %xmm10, 96(%r8)\nmovq %xmm11, 104(%r8)\nmovq %xmm12, 112(%r8)\n"
        "movq %xmm13, 120(%r8)\nmovq %xmm14, 128(%r8)\nmovq %xmm15, 136(%r8)\n"
        "movdqu 48(%rsp), %xmm6\nmovdqu 64(%rsp), %xmm7\nmovdqu 80(%rsp), %xmm8\n"
        "movdqu 96(%rsp), %xmm9\nmovdqu 112(%rsp), %xmm10\nmovdqu 128(%rsp), %xmm11\n"
        "movdqu 144(%rsp), %xmm12\nmovdqu 160(%rsp), %xmm13\nmovdqu 176(%rsp), %xmm14\n"
        "movdqu 192(%rsp), %xmm15\nadd $216, %rsp\n"
        "pop %r15\npop %r14\npop %r13\npop %r12\npop %rdi\npop %rsi\npop %rbp\npop %rbx\n"
        "ret\n");
#else
enum { PROBED = 6 };
static const uint64_t probe_value[PROBED] = {0x1111, 0x2222, 0x5555, 0x6666, 0x7777, 0x8888};
__asm__(".text\n.globl cp_test_probe\ncp_test_probe:\n"
        "push %rbx\npush %rbp\npush %r12\npush %r13\npush %r14\npush %r15\nsub $24, %rsp\n"
        "mov %rdx, 0(%rsp)\n"
        "mov $0x1111, %rbx\nmov $0x2222, %rbp\nmov $0x5555, %r12\nmov $0x6666, %r13\n"
        "mov $0x7777, %r14\nmov $0x8888, %r15\n"
        "mov %rdi, %rax\nmov %rsi, %rdi\ncall *%rax\nmov 0(%rsp), %rdx\n"
        "mov %rbx, 0(%rdx)\nmov %rbp, 8(%rdx)\nmov %r12, 16(%rdx)\nmov %r13, 24(%rdx)\n"
        "mov %r14, 32(%rdx)\nmov %r15, 40(%rdx)\n"
        "add $24, %rsp\npop %r15\npop %r14\npop %r13\npop %r12\npop %rbp\npop %rbx\nret\n");
#endif

static volatile int chain_runs;

static CP_CHAIN_ABI void ok_chain(void)
{
    chain_runs++;
}

static CP_CHAIN_ABI void trap_chain(void)
{
    __builtin_trap();
}

static CP_CHAIN_ABI void spin_chain(void)
{
    for (;;) {
        __asm__ volatile("pause");
    }
}

/* round toward zero: bits 13-14 of MXCSR */
static CP_CHAIN_ABI void mxcsr_chain(void)
{
    uint32_t m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    m |= 0x6000u;
    __asm__ volatile("ldmxcsr %0" : : "m"(m));
    chain_runs++;
}

static uint32_t mxcsr(void)
{
    uint32_t m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    return m;
}

/* What the guarded call under the probe does and what came back. */
typedef struct call {
    int run;                /* cp_posix_guard_run (else cp_posix_guard) */
    const void *policy;
    cp_chain_fn chains[3];  /* the jobs, in order (NULL: fewer) */
    uint64_t budget_ns;
    int result;
    int failed_job;         /* the job whose guard reported, or -1 */
    cp_fault fault;
} call;

static int run_body(void *arg, cp_guard_fn job, void *job_ctx)
{
    call *c = arg;
    for (int i = 0; i < 3 && c->chains[i] != NULL; i++) {
        c->failed_job = i; /* a jump back out of the job leaves it set */
        if (job(job_ctx, c->chains[i], c->budget_ns, &c->fault) != 0) {
            return 1;
        }
    }
    c->failed_job = -1;
    return 0;
}

static void guarded(void *arg)
{
    call *c = arg;
    memset(&c->fault, 0, sizeof(c->fault));
    c->failed_job = -1;
    if (c->run) {
        c->result = cp_posix_guard_run((void *)c->policy, run_body, c, &c->fault);
    } else {
        c->result = cp_posix_guard((void *)c->policy, c->chains[0], c->budget_ns, &c->fault);
    }
}

/* the call under the probe: 1 if every callee-saved register came back */
static int registers_kept(call *c)
{
    uint64_t got[PROBED];
    memset(got, 0, sizeof(got));
    cp_test_probe(guarded, c, got);
    int same = 1;
    for (int k = 0; k < PROBED; k++) {
        if (got[k] != probe_value[k]) {
            fprintf(stderr, "register %d: %llx, expected %llx\n", k, (unsigned long long)got[k],
                    (unsigned long long)probe_value[k]);
            same = 0;
        }
    }
    return same;
}

static void test_registers_after_a_jump_back(void)
{
    call c = {0, NULL, {trap_chain, NULL, NULL}, 0, 0, 0, {0}};
    CHECK(registers_kept(&c) && c.result != 0 && c.fault.kind == CP_FAULT_SIGILL);
    call r = {1, NULL, {ok_chain, trap_chain, ok_chain}, 0, 0, 0, {0}};
    int before = chain_runs;
    CHECK(registers_kept(&r) && r.result != 0 && r.fault.kind == CP_FAULT_SIGILL);
    CHECK(r.failed_job == 1 && chain_runs == before + 1);
    /* a timeout: the supervisor redirects the thread (Windows: SetThreadContext) */
    call t = {0, NULL, {spin_chain, NULL, NULL}, 2000000, 0, 0, {0}};
    CHECK(registers_kept(&t) && t.result != 0 && t.fault.kind == CP_FAULT_TIMEOUT);
    call tr = {1, NULL, {ok_chain, spin_chain, ok_chain}, 2000000, 0, 0, {0}};
    CHECK(registers_kept(&tr) && tr.result != 0 && tr.fault.kind == CP_FAULT_TIMEOUT);
    CHECK(tr.failed_job == 1);
    /* and no jump back: the registers of course */
    call ok = {1, NULL, {ok_chain, ok_chain, ok_chain}, 2000000, 0, 0, {0}};
    CHECK(registers_kept(&ok) && ok.result == 0 && ok.failed_job == -1);
}

static void test_cpu_state_policy(void)
{
    static const cp_posix_guard_policy checked = {1, 0}, kept = {1, 1};
    uint32_t before = mxcsr();
    call c = {1, &checked, {ok_chain, mxcsr_chain, ok_chain}, 0, 0, 0, {0}};
    guarded(&c);
    CHECK(c.result != 0 && c.failed_job == 1 && c.fault.kind == CP_FAULT_CPU_STATE);
    CHECK(mxcsr() == before);
    call n = {1, NULL, {ok_chain, mxcsr_chain, ok_chain}, 0, 0, 0, {0}};
    guarded(&n);
    CHECK(n.result != 0 && n.failed_job == 1 && n.fault.kind == CP_FAULT_CPU_STATE);
    CHECK(mxcsr() == before);
    call k = {1, &kept, {ok_chain, mxcsr_chain, ok_chain}, 0, 0, 0, {0}};
    guarded(&k);
#if defined(_WIN32)
    /* the Windows guard checks every job whatever the policy says */
    CHECK(k.result != 0 && k.failed_job == 1 && k.fault.kind == CP_FAULT_CPU_STATE);
#else
    /* proven stencils: no check after a job, so the changed MXCSR goes unnoticed in the run */
    CHECK(k.result == 0 && k.failed_job == -1 && k.fault.kind == CP_FAULT_NONE);
#endif
    CHECK(mxcsr() == before); /* the caller's state comes back when the run ends */
    /* the single-job guard keeps its check whatever the policy */
    call one = {0, &kept, {mxcsr_chain, NULL, NULL}, 0, 0, 0, {0}};
    guarded(&one);
    CHECK(one.result != 0 && one.fault.kind == CP_FAULT_CPU_STATE && mxcsr() == before);
}

/* all ones in ymm1: its upper half in use, as a fused loop of the x86_64-v3 table leaves it */
static CP_CHAIN_ABI void ymm_chain(void)
{
    __asm__ volatile("vpcmpeqd %%ymm1, %%ymm1, %%ymm1" ::: "xmm1");
    chain_runs++;
}

/* XINUSE bit 2 (XGETBV with ECX = 1): the ymm state is not in its initial configuration; -1
 * where the CPU has no AVX or cannot say (CPUID 0xd.1 EAX bit 2) */
static int ymm_in_use(void)
{
    uint32_t a, b, c, d;
    if (__get_cpuid(1u, &a, &b, &c, &d) == 0 || (c & (3u << 27)) != (3u << 27) ||
        __get_cpuid_max(0, NULL) < 0xdu) {
        return -1;
    }
    __cpuid_count(0xdu, 1u, a, b, c, d);
    if ((a & 4u) == 0) {
        return -1;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1u));
    return (lo >> 2) & 1u;
}

static void test_vector_upper_cleared(void)
{
    static const cp_posix_guard_policy kept = {1, 1};
    if (ymm_in_use() < 0) {
        printf("test_guard: no AVX or no XINUSE here, the ymm state is not checked\n");
        return;
    }
    __asm__ volatile("vpcmpeqd %%ymm1, %%ymm1, %%ymm1" ::: "xmm1");
    CHECK(ymm_in_use() == 1); /* the probe sees a chain's left-over state */
    __asm__ volatile("vzeroupper" ::: "memory");
    call one = {0, NULL, {ymm_chain, NULL, NULL}, 0, 0, 0, {0}};
    guarded(&one);
    CHECK(ymm_in_use() == 0 && one.result == 0);
    call run = {1, NULL, {ok_chain, ymm_chain, NULL}, 0, 0, 0, {0}};
    guarded(&run);
    CHECK(ymm_in_use() == 0 && run.result == 0);
    call proven = {1, &kept, {ymm_chain, ok_chain, ymm_chain}, 0, 0, 0, {0}};
    guarded(&proven);
    CHECK(ymm_in_use() == 0 && proven.result == 0);
}

static void test_table_flag_lookup(void)
{
    /* a build without tables (these tests) carries none: no pin is proven */
    uint8_t pin[CP_PIN_SIZE];
    memset(pin, 0, sizeof(pin));
    CHECK(cp_table_count() == 0 && cp_table_keeps_cpu_state(pin) == 0);
    CHECK(cp_table_keeps_cpu_state(NULL) == 0);
}

int main(void)
{
    CHECK(cp_posix_guard_install() == 0);
    CHECK(cp_posix_watchdog_start(1000000, 0) == 0); /* 1 ms polls */
    test_registers_after_a_jump_back();
    test_cpu_state_policy();
    test_vector_upper_cleared();
    test_table_flag_lookup();
    printf("test_guard: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}

#else

int main(void)
{
    printf("test_guard: not x86_64 Linux or Windows, nothing to run; 0 checks, 0 failed\n");
    return 0;
}

#endif
