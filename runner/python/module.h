/* What the two halves of copapy._runner share: module.c (Program and the module functions) and
 * scheduler.c (Scheduler, made by Program.scheduler()). */
#ifndef COPAPY_PYTHON_MODULE_H
#define COPAPY_PYTHON_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "copapy/platform_posix.h"
#include "copapy/proto.h"
#include "copapy/runner.h"
#include "../src/internal.h"

struct invoke_plan;

typedef struct {
    PyObject_HEAD
    cp_program prog;
    cp_platform platform; /* prog.platform points here: it carries the requested arch */
    Py_ssize_t exports;   /* live buffer views of the data region */
    Py_ssize_t schedulers; /* live Scheduler objects driving this program */
    int runnable;         /* the image's code is for this machine */
    int own_code;         /* compiled in this process from its stencils (load(own_code=True)):
                             the guard skips its signal-state check (cp_posix_guard_policy) */
    int verified;         /* format 2 (stencil ids, built from this runner's table) */
    int keeps_cpu_state;  /* format 2 against a table proven to keep the CPU state
                             (cp_table.keeps_cpu_state): a run of jobs skips the per-job
                             CPU-state check (cp_posix_guard_policy) */
    uint32_t frozen_count; /* the image's FROZEN slots (format 2, docs/image.md): array lengths
                              and fused loops' pointers the verifier checked at load; write()
                              refuses them (the verified-loading decision, rule 5 (c)) */
    uint32_t *frozen;      /* frozen_count (offset, size) pairs, sorted and disjoint; or NULL */
    uint64_t invoke_copies; /* argument buffers invoke() copied into the data region */
    struct invoke_plan *plan; /* the last plan invoke() parsed (invoke.h), or NULL */
} ProgramObject;

extern PyObject *ProgramFault; /* copapy.runtime.errors.ProgramFault */
extern uint32_t watchdog_factor;
extern uint64_t watchdog_min_ns;
extern uint64_t watchdog_request_ns;

/* Raises ProgramFault with the facts of a fault; tick < 0: outside the scheduler. */
void raise_fault(const cp_fault *f, long long tick);
uint16_t host_arch(void);
cp_error new_error(void);
/* RuntimeError and -1 if the program was unloaded */
int check_loaded(const ProgramObject *self);

/* the guard policy of a program's jobs (platform_posix.h) */
void *guard_policy(const ProgramObject *self);

/* scheduler.c */
extern PyTypeObject SchedulerType;
PyObject *Program_scheduler(ProgramObject *self, PyObject *args, PyObject *kwargs);

/* batch.c: many scenarios of one program in one call (cp.sweep) */
PyObject *runner_batch(PyObject *module, PyObject *args, PyObject *kwargs);

#endif
