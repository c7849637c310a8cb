/* copapy._runner.batch: many scenarios of one loaded program in one call (cp.sweep,
 * docs/guide/howto/sweeps.md). Each scenario: the data region back to its initial contents
 * (cp_sched_reset), the simulated I/O zeroed, the parameter bytes written, then `ticks` ticks
 * in steps of `sample_ticks`, each step followed by a settle (what LocalTarget.step does) and
 * one recorded row; after the last step the `finals` ranges are copied once. No Python runs
 * per tick or per scenario, and the GIL is released for the whole loop. */
#include "module.h"

#include <stdlib.h>
#include <string.h>

enum {
    BATCH_IO_KINDS = CP_IO_KIND_COUNT,
    BATCH_IO_CHANNELS = 256, /* as the Scheduler's simulated I/O (scheduler.c) */
    BATCH_MAX_RANGES = 64,
    BATCH_PLAN_MAX_TICKS = 1 << 16 /* a longer hyperperiod is not planned */
};

typedef struct {
    double io[BATCH_IO_KINDS][BATCH_IO_CHANNELS];
} batch_io;

static double batch_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    const batch_io *io = ctx;
    if (kind < 1 || kind > BATCH_IO_KINDS || channel >= BATCH_IO_CHANNELS) {
        return 0.0;
    }
    return io->io[kind - 1][channel];
}

static void batch_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    batch_io *io = ctx;
    if (kind >= 1 && kind <= BATCH_IO_KINDS && channel < BATCH_IO_CHANNELS) {
        io->io[kind - 1][channel] = value;
    }
}

typedef struct {
    uint32_t count;
    uint32_t row; /* sum of the sizes */
    uint32_t offset[BATCH_MAX_RANGES];
    uint32_t size[BATCH_MAX_RANGES];
} batch_ranges;

/* A list of (offset, size) pairs inside a data region of data_size bytes. */
static int parse_ranges(PyObject *obj, const char *what, uint32_t data_size, batch_ranges *out)
{
    PyObject *seq = PySequence_Fast(obj, "ranges must be a list of (offset, size)");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > BATCH_MAX_RANGES) {
        PyErr_Format(PyExc_ValueError, "%zd %s ranges, at most %d are supported", n, what,
                     BATCH_MAX_RANGES);
        Py_DECREF(seq);
        return -1;
    }
    out->count = (uint32_t)n;
    out->row = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        unsigned long long offset = 0, size = 0;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "KK", &offset, &size)) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError, "%s range %zd must be a tuple (offset, size)",
                             what, i);
            }
            Py_DECREF(seq);
            return -1;
        }
        if (size == 0 || offset > data_size || size > data_size - offset) {
            PyErr_Format(PyExc_ValueError,
                         "%s range %zd (offset %llu, %llu bytes) is not inside the %u-byte data "
                         "region", what, i, offset, size, (unsigned)data_size);
            Py_DECREF(seq);
            return -1;
        }
        out->offset[i] = (uint32_t)offset;
        out->size[i] = (uint32_t)size;
        out->row += (uint32_t)size;
    }
    Py_DECREF(seq);
    return 0;
}

static void copy_out(uint8_t *dst, const uint8_t *data, const batch_ranges *r)
{
    for (uint32_t i = 0; i < r->count; i++) {
        memcpy(dst, data + r->offset[i], r->size[i]);
        dst += r->size[i];
    }
}

static void copy_in(uint8_t *data, const uint8_t *src, const batch_ranges *r)
{
    for (uint32_t i = 0; i < r->count; i++) {
        memcpy(data + r->offset[i], src, r->size[i]);
        src += r->size[i];
    }
}

typedef struct {
    cp_sched *sched;
    const cp_program *prog;
    cp_sched_config cfg;
    cp_error err;
    cp_status init_status;
    volatile uint64_t current; /* the scenario running (known after a fault) */
    batch_io *io;
    uint8_t *data;
    uint64_t scenarios, steps, sample_ticks;
    const batch_ranges *writes, *records, *finals;
    const uint8_t *params;
    uint8_t *series, *final;
    cp_guard_fn job;            /* the guard run's job function, which batch_guard wraps */
    void *job_ctx;
    cp_chain_fn volatile running; /* the chain of the job running (its task after a jump) */
    uint8_t *plan;              /* the hyperperiod plan's ops (malloc), or NULL */
} batch_job;

/* The scheduler's guard: the guard run's job, with the chain noted first. A signal's fault
 * jumps from inside the chain straight back into the guard run, past the scheduler's frame
 * that knows the task; the chain names it (every task has its own entry). */
CP_CALLS_LOADED_CODE
static int batch_guard(void *ctx, cp_chain_fn entry, uint64_t budget_ns, cp_fault *fault)
{
    batch_job *j = ctx;
    j->running = entry;
    return j->job(j->job_ctx, entry, budget_ns, fault);
}

/* The task whose chain is `entry` (0 if none is). */
static uint32_t task_of(const cp_program *prog, cp_chain_fn entry)
{
    for (uint32_t i = 0; i < prog->task_count; i++) {
        if (prog->tasks[i].entry == entry) {
            return i;
        }
    }
    return 0;
}

/* Runs the scenarios; returns how many completed (fewer: the next one faulted). */
CP_CALLS_LOADED_CODE
static uint64_t run_scenarios(batch_job *j)
{
    for (uint64_t s = 0; s < j->scenarios; s++) {
        j->current = s;
        cp_sched_reset(j->sched);
        memset(j->io, 0, sizeof(*j->io));
        copy_in(j->data, j->params + s * j->writes->row, j->writes);
        uint8_t *row = j->series + s * j->steps * j->records->row;
        for (uint64_t k = 0; k < j->steps; k++) {
            cp_sched_advance(j->sched, j->sample_ticks);
            if (cp_sched_fault(j->sched) != NULL) {
                return s;
            }
            cp_sched_settle(j->sched);
            copy_out(row, j->data, j->records);
            row += j->records->row;
        }
        copy_out(j->final + s * j->finals->row, j->data, j->finals);
    }
    return j->scenarios;
}

/* The guard's body: armed once for the whole batch (one sigsetjmp and one signal-state
 * check per call, not per tick), each job still guarded with its own budget by `job`. */
static int batch_body(void *arg, cp_guard_fn job, void *job_ctx)
{
    batch_job *j = arg;
    /* job NULL: containment could not arm, the chains are called directly */
    j->job = job;
    j->job_ctx = job_ctx;
    j->cfg.guard = job != NULL ? batch_guard : NULL;
    j->cfg.guard_ctx = j;
    j->cfg.guard_run = NULL;
    j->init_status = cp_sched_init(j->sched, j->prog, &j->cfg, &j->err);
    if (j->init_status != CP_OK) {
        return 0;
    }
    cp_sched_set_sim_io(j->sched, &j->io->io[0][0], BATCH_IO_CHANNELS); /* no callback a tick */
    uint64_t plan_size = cp_sched_plan_size(j->sched, BATCH_PLAN_MAX_TICKS);
    if (plan_size != 0) { /* no memory for it: the general path, the same results */
        j->plan = malloc((size_t)plan_size);
        (void)cp_sched_set_plan(j->sched, j->plan, (uint32_t)plan_size);
    }
    uint64_t done = run_scenarios(j);
    j->current = done;
    return 0;
}

static PyObject *new_bytes(uint64_t a, uint64_t b, uint64_t c)
{
    if ((b != 0 && a > (uint64_t)PY_SSIZE_T_MAX / b) ||
        (c != 0 && a * b > (uint64_t)PY_SSIZE_T_MAX / c)) {
        PyErr_SetString(PyExc_MemoryError, "the batch's results do not fit in memory: record "
                        "fewer values, sample less often or run fewer scenarios per call");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(a * b * c));
}

PyObject *runner_batch(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"program", "tick_ns", "steps", "sample_ticks", "writes",
                               "params", "records", "finals", NULL};
    PyObject *prog_obj, *writes_obj, *records_obj, *finals_obj;
    unsigned long long tick_ns, steps, sample_ticks;
    Py_buffer params;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OKKKOy*OO:batch", keywords, &prog_obj,
                                     &tick_ns, &steps, &sample_ticks, &writes_obj, &params,
                                     &records_obj, &finals_obj)) {
        return NULL;
    }
    PyObject *result = NULL, *series = NULL, *final = NULL;
    cp_sched *sched = NULL;
    batch_io *io = NULL;
    ProgramObject *self = (ProgramObject *)prog_obj;
    batch_ranges writes, records, finals;
    PyObject *program_type = PyObject_GetAttrString(module, "Program");
    if (program_type == NULL) {
        goto done;
    }
    int is_program = PyObject_TypeCheck(prog_obj, (PyTypeObject *)program_type);
    Py_DECREF(program_type);
    if (!is_program) {
        PyErr_Format(PyExc_TypeError, "batch() takes a loaded _runner.Program, not %s",
                     Py_TYPE(prog_obj)->tp_name);
        goto done;
    }
    if (check_loaded(self) < 0) {
        goto done;
    }
    if (!self->runnable) {
        PyErr_Format(PyExc_RuntimeError, "program was loaded for architecture %s but this "
                     "machine executes %s: run the batch on a worker of that architecture",
                     cp_arch_name(self->platform.arch), cp_arch_name(host_arch()));
        goto done;
    }
    if (self->schedulers > 0 || self->exports > 0) {
        PyErr_SetString(PyExc_RuntimeError, "batch() needs a program nothing else uses (no "
                        "Scheduler, no buffer view): load the image once more for it");
        goto done;
    }
    if (sample_ticks == 0) {
        PyErr_SetString(PyExc_ValueError, "sample_ticks must be at least 1 tick");
        goto done;
    }
    uint32_t data_size = self->prog.data_size;
    if (parse_ranges(writes_obj, "parameter", data_size, &writes) < 0 ||
        parse_ranges(records_obj, "record", data_size, &records) < 0 ||
        parse_ranges(finals_obj, "final", data_size, &finals) < 0) {
        goto done;
    }
    if (writes.row == 0 ? params.len != 0 : params.len % writes.row != 0) {
        PyErr_Format(PyExc_ValueError, "params has %zd bytes, not a whole number of "
                     "%u-byte scenarios", params.len, (unsigned)writes.row);
        goto done;
    }
    if (writes.row == 0) {
        PyErr_SetString(PyExc_ValueError, "batch() needs at least one parameter range");
        goto done;
    }
    uint64_t scenarios = (uint64_t)params.len / writes.row;
    series = new_bytes(scenarios, steps, records.row);
    final = series == NULL ? NULL : new_bytes(scenarios, 1, finals.row);
    sched = calloc(1, sizeof(*sched));
    io = calloc(1, sizeof(*io));
    if (series == NULL || final == NULL) {
        goto done;
    }
    if (sched == NULL || io == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    sched->struct_size = sizeof(*sched);
    batch_job job;
    memset(&job, 0, sizeof(job));
    job.sched = sched;
    job.prog = &self->prog;
    job.cfg.struct_size = sizeof(job.cfg);
    job.cfg.deterministic = 1u;
    job.cfg.tick_ns = tick_ns;
    job.cfg.io_read = batch_io_read;
    job.cfg.io_write = batch_io_write;
    job.cfg.io_ctx = io;
    job.cfg.budget_factor = watchdog_factor;
    job.cfg.budget_min_ns = watchdog_min_ns;
    job.err = new_error();
    job.init_status = CP_OK;
    job.io = io;
    job.data = cp_program_data(&self->prog);
    job.scenarios = scenarios;
    job.steps = steps;
    job.sample_ticks = sample_ticks;
    job.writes = &writes;
    job.records = &records;
    job.finals = &finals;
    job.params = (const uint8_t *)params.buf;
    job.series = (uint8_t *)PyByteArray_AS_STRING(series);
    job.final = (uint8_t *)PyByteArray_AS_STRING(final);
    cp_fault fault;
    memset(&fault, 0, sizeof(fault));
    int faulted;
    self->schedulers++; /* no unload while the GIL is released */
    Py_BEGIN_ALLOW_THREADS
    faulted = cp_posix_guard_run(guard_policy(self), batch_body, &job, &fault);
    Py_END_ALLOW_THREADS
    self->schedulers--;
    if (job.init_status != CP_OK) {
        PyErr_SetString(PyExc_ValueError, job.err.message[0] != '\0'
                                              ? job.err.message
                                              : cp_status_name(job.init_status));
        goto done;
    }
    if (faulted) { /* a jump back: the guard knows the fault, the noted chain its task */
        fault.task = task_of(&self->prog, job.running);
    }
    const cp_fault *f = faulted ? &fault : cp_sched_fault(sched);
    if (f != NULL) {
        result = Py_BuildValue("(OOK(sIKKIK))", series, final, (unsigned long long)job.current,
                               cp_fault_name(f->kind), (unsigned)f->task,
                               (unsigned long long)f->address, (unsigned long long)f->pc,
                               (unsigned)f->code, (unsigned long long)sched->tick);
    } else {
        result = Py_BuildValue("(OOKO)", series, final, (unsigned long long)job.current,
                               Py_None);
    }
    /* the data region is left as the last scenario ended; a later use resets it */
    free(job.plan);
done:
    free(sched);
    free(io);
    Py_XDECREF(series);
    Py_XDECREF(final);
    PyBuffer_Release(&params);
    return result;
}
