/* User mode (CONFIG_COPAPY_USERSPACE; docs/zephyr.md, "User mode"): every job runs in a Zephyr
 * user thread, the job thread, whose memory domain holds only the running program's code (RX)
 * and data region (RW) (codemem.c places them as ARMv7-M MPU regions). The runner's state,
 * the kernel's objects, the vector table and the system control space are privileged: a job
 * that touches them faults (MemManage, BusFault), as does a privileged instruction that traps
 * (svc, bkpt, udf); cpsid/msr basepri are ignored in user mode, so interrupts stay on.
 *
 * cpz_user_job is the tick thread's guard: it hands the entry to the job thread (a message
 * queue), which runs it and gives `done`. The job thread is as urgent as the link thread, so
 * it runs at once and is back waiting on the queue before the tick thread runs on. What ends
 * a job otherwise, each a FAULTED job (the core applies the safe state):
 *   * a CPU fault or an SVC oops in the job thread: guard.c records kind, address and pc,
 *     fault.c returns from Zephyr's fatal error handler, Zephyr aborts the thread;
 *   * the budget (a k_timer): its expiry aborts the thread (kind timeout);
 *   * a job that gave `done` itself and is not back on the queue (it blocked elsewhere):
 *     aborted (kind CPU state);
 *   * runner tables inside the data MPU region changed: restored (kind MemManage).
 * An aborted job thread is created anew before the next job. Each job starts with the FPSCR
 * the thread started with. */
#include <zephyr/kernel.h>
#include <zephyr/kernel_structs.h>
#include <zephyr/sys/util.h>

#include "cpz.h"

/* a job without a budget (CONFIG_COPAPY_BUDGET_FACTOR=0) that blocks is still ended */
#define BLOCKED_JOB_NS 1000000000ull

K_MSGQ_DEFINE(cpz_job_q, sizeof(uintptr_t), 1, 4);
K_SEM_DEFINE(cpz_job_done, 0, 1);

static struct k_thread job_thread;
static K_THREAD_STACK_DEFINE(job_stack, CONFIG_COPAPY_JOB_STACK_SIZE);
static struct k_mem_domain job_domain;
static struct k_mem_partition part_code, part_data;
static uint32_t domain_id = UINT32_MAX, domain_gen;
static int thread_alive;
static struct k_timer budget_timer;

static volatile uint32_t job_active, job_timed_out, job_faulted;
static cp_fault job_fault;

/* The job thread, in user mode. */
static void job_loop(void *p1, void *p2, void *p3)
{
    ARG_UNUSED(p1);
    ARG_UNUSED(p2);
    ARG_UNUSED(p3);
    uint32_t fpscr;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(fpscr));
    for (;;) {
        uintptr_t entry;
        if (k_msgq_get(&cpz_job_q, &entry, K_FOREVER) != 0) {
            continue;
        }
        __asm__ volatile("vmsr fpscr, %0" : : "r"(fpscr) : "memory");
        ((void (*)(void))entry)();
        k_sem_give(&cpz_job_done);
    }
}

static void job_thread_start(void)
{
    k_thread_create(&job_thread, job_stack, K_THREAD_STACK_SIZEOF(job_stack), job_loop, NULL,
                    NULL, NULL, K_PRIO_PREEMPT(CONFIG_COPAPY_LINK_PRIORITY), K_USER | K_FP_REGS,
                    K_FOREVER);
    (void)k_mem_domain_add_thread(&job_domain, &job_thread);
    k_thread_access_grant(&job_thread, &cpz_job_q, &cpz_job_done);
    k_thread_start(&job_thread);
    thread_alive = 1;
}

static void job_thread_end(void)
{
    if (thread_alive) {
        k_thread_abort(&job_thread);
        thread_alive = 0;
    }
    k_msgq_purge(&cpz_job_q);
}

static void budget_expired(struct k_timer *t)
{
    ARG_UNUSED(t);
    if (job_active) {
        job_active = 0;
        job_timed_out = 1;
        k_thread_abort(&job_thread);
        k_sem_give(&cpz_job_done);
    }
}

void cpz_user_init(void)
{
    (void)k_mem_domain_init(&job_domain, 0, NULL);
    k_timer_init(&budget_timer, budget_expired, NULL);
}

int cpz_user_job_current(void)
{
    return job_active && k_current_get() == &job_thread;
}

void cpz_user_fault(uint32_t kind, uint32_t code, uint64_t address, uint32_t pc)
{
    if (!job_faulted) {
        job_fault.kind = kind;
        job_fault.code = code;
        job_fault.address = address;
        job_fault.pc = pc;
        job_faulted = 1;
    }
}

int cpz_user_fatal(void)
{
    if (!cpz_user_job_current()) {
        return 0;
    }
    cpz_user_fault(CP_FAULT_HARDFAULT, 0, 0, 0); /* unless guard.c recorded the fault */
    job_active = 0;
    k_sem_give(&cpz_job_done);
    return 1; /* Zephyr aborts the thread when the handler returns */
}

/* the job domain holds the MPU regions of the program that entry belongs to */
static int domain_for(uintptr_t entry)
{
    uint32_t id, gen;
    uintptr_t code, data;
    size_t code_size, data_size;
    if (cpz_user_slot_of(entry, &id, &gen, &code, &code_size, &data, &data_size) != 0) {
        return -1;
    }
    if (id == domain_id && gen == domain_gen) {
        return (int)id;
    }
    if (domain_id != UINT32_MAX) {
        (void)k_mem_domain_remove_partition(&job_domain, &part_code);
        (void)k_mem_domain_remove_partition(&job_domain, &part_data);
        domain_id = UINT32_MAX;
    }
    part_code.start = code;
    part_code.size = code_size;
    part_code.attr = K_MEM_PARTITION_P_RX_U_RX;
    part_data.start = data;
    part_data.size = data_size;
    part_data.attr = K_MEM_PARTITION_P_RW_U_RW;
    if (k_mem_domain_add_partition(&job_domain, &part_code) != 0 ||
        k_mem_domain_add_partition(&job_domain, &part_data) != 0) {
        (void)k_mem_domain_remove_partition(&job_domain, &part_code);
        return -1;
    }
    domain_id = id;
    domain_gen = gen;
    return (int)id;
}

/* the job thread is back waiting on the queue (its loop's k_msgq_get) */
static int job_waiting(void)
{
    return (job_thread.base.thread_state & _THREAD_PENDING) != 0 &&
           job_thread.base.pended_on == &cpz_job_q.wait_q;
}

static int faulted(cp_fault *fault, uint32_t kind, uint32_t code, uint64_t address, uint32_t pc)
{
    fault->kind = kind;
    fault->code = code;
    fault->address = address;
    fault->pc = pc;
    job_thread_end();
    return 1;
}

int cpz_user_job(void (*entry)(void), uint64_t budget_ns, cp_fault *fault)
{
    uintptr_t e = (uintptr_t)entry;
    int id = domain_for(e & ~(uintptr_t)1u);
    if (id < 0) {
        return faulted(fault, CP_FAULT_MEMMANAGE, 0, e, (uint32_t)e);
    }
    if (!thread_alive) {
        job_thread_start();
    }
    k_sem_reset(&cpz_job_done);
    job_timed_out = 0;
    job_faulted = 0;
    job_active = 1;
    k_timer_start(&budget_timer, K_NSEC(budget_ns != 0 ? budget_ns : BLOCKED_JOB_NS), K_NO_WAIT);
    (void)k_msgq_put(&cpz_job_q, &e, K_NO_WAIT);
    (void)k_sem_take(&cpz_job_done, K_FOREVER);
    k_timer_stop(&budget_timer);
    job_active = 0;
    if (job_timed_out) {
        thread_alive = 0; /* aborted by the timer */
        return faulted(fault, CP_FAULT_TIMEOUT, 0, 0, 0);
    }
    if (job_faulted) {
        thread_alive = 0; /* aborted by Zephyr's fatal error path */
        return faulted(fault, job_fault.kind, job_fault.code, job_fault.address, job_fault.pc);
    }
    if (!job_waiting()) {
        return faulted(fault, CP_FAULT_CPU_STATE, 0, 0, 0);
    }
    uintptr_t changed = cpz_user_tables_check((uint32_t)id);
    if (changed != 0) {
        return faulted(fault, CP_FAULT_MEMMANAGE, 0, changed, 0);
    }
    return 0;
}
