/* copapy._runner.Scheduler: cp_sched over a Program in simulated time (docs/realtime.md);
 * advance() runs the C loop without the GIL. Program.scheduler() makes one. */
#include "module.h"

#include <string.h>

enum {
    IO_KINDS = CP_IO_KIND_COUNT,
    IO_CHANNELS = 256,
    GIL_FREE_TICKS = 256,     /* advance() releases the GIL from this many ticks on */
    SIGNAL_CHECK_TICKS = 1 << 16, /* and checks for Ctrl-C between chunks of this size */
    PLAN_MAX_TICKS = 1 << 16  /* a longer hyperperiod is not planned (cp_sched_set_plan) */
};

typedef struct {
    PyObject_HEAD
    ProgramObject *program;   /* strong reference; its schedulers count includes us */
    int busy;                 /* advance() runs without the GIL */
    int measure;
    PyObject *trace_obj;      /* bytearray holding the ring, or NULL */
    Py_buffer trace_view;     /* held for the scheduler's life: the ring cannot move */
    Py_buffer feed_views[CP_MAX_FEEDS]; /* one per sched.feeds entry; they pin the samples */
    double io[IO_KINDS][IO_CHANNELS];
    uint8_t *plan;            /* the hyperperiod plan's ops (PyMem), or NULL */
    cp_sched sched;
} SchedulerObject;

static double sim_io_read(void *ctx, uint8_t kind, uint16_t channel)
{
    const SchedulerObject *self = ctx;
    if (kind < 1 || kind > IO_KINDS || channel >= IO_CHANNELS) {
        return 0.0;
    }
    return self->io[kind - 1][channel];
}

static void sim_io_write(void *ctx, uint8_t kind, uint16_t channel, double value)
{
    SchedulerObject *self = ctx;
    if (kind >= 1 && kind <= IO_KINDS && channel < IO_CHANNELS) {
        self->io[kind - 1][channel] = value;
    }
}

static int parse_u64(PyObject *obj, const char *what, uint64_t *out)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long sign = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (sign == -1 && overflow == 0 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow < 0 || (overflow == 0 && sign < 0)) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0, got %S", what, obj);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_OverflowError, "%s %S does not fit in 64 bits", what, obj);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int parse_u32(PyObject *obj, const char *what, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(obj, what, &v) < 0) {
        return -1;
    }
    if (v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s %S does not fit in 32 bits", what, obj);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

PyObject *Program_scheduler(ProgramObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"tick_ns", "deterministic", "measure", NULL};
    PyObject *tick_obj;
    int deterministic = 1, measure = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|pp:scheduler", keywords, &tick_obj,
                                     &deterministic, &measure)) {
        return NULL;
    }
    if (check_loaded(self) < 0) {
        return NULL;
    }
    if (!self->runnable) {
        PyErr_Format(PyExc_RuntimeError,
                     "program was loaded for architecture %s (%u) but this machine executes "
                     "%s (%u): it cannot be scheduled here",
                     cp_arch_name(self->platform.arch), (unsigned)self->platform.arch,
                     cp_arch_name(host_arch()), (unsigned)host_arch());
        return NULL;
    }
    uint64_t tick_ns;
    if (parse_u64(tick_obj, "tick_ns", &tick_ns) < 0) {
        return NULL;
    }
    for (uint32_t i = 0; i < self->prog.io_binding_count; i++) {
        const cp_io_binding *b = &self->prog.io_bindings[i];
        if (b->channel >= IO_CHANNELS) {
            PyErr_Format(PyExc_ValueError,
                         "an I/O binding of task %u uses channel %u of kind %u, but the "
                         "simulated I/O has channels 0..%d per kind",
                         (unsigned)b->task, (unsigned)b->channel, (unsigned)b->kind,
                         IO_CHANNELS - 1);
            return NULL;
        }
    }
    SchedulerObject *sched = PyObject_New(SchedulerObject, &SchedulerType);
    if (sched == NULL) {
        return NULL;
    }
    /* everything after the object header starts zeroed */
    memset((char *)sched + sizeof(PyObject), 0, sizeof(*sched) - sizeof(PyObject));
    sched->measure = measure;
    if (measure) {
        (void)cp_posix_clock_init(); /* the calibration (once, ~2 ms) is not part of a job */
    }
    sched->sched.struct_size = sizeof(sched->sched);
    cp_sched_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.struct_size = sizeof(cfg);
    cfg.deterministic = deterministic ? 1u : 0u;
    cfg.tick_ns = tick_ns;
    cfg.clock_ns = measure ? cp_posix_clock_ns : NULL;
    cfg.io_read = sim_io_read;
    cfg.io_write = sim_io_write;
    cfg.io_ctx = sched;
    cfg.guard = cp_posix_guard;
    cfg.guard_ctx = guard_policy(self);
    cfg.guard_run = cp_posix_guard_run;
    cfg.guard_jobs = cp_posix_guard_jobs;
    cfg.budget_factor = watchdog_factor;
    cfg.budget_min_ns = watchdog_min_ns;
    cp_error err = new_error();
    cp_status st = cp_sched_init(&sched->sched, &self->prog, &cfg, &err);
    if (st != CP_OK) {
        Py_DECREF(sched); /* program is still NULL: dealloc leaves the Program alone */
        PyErr_SetString(PyExc_ValueError, err.message[0] != '\0' ? err.message
                                                                  : cp_status_name(st));
        return NULL;
    }
    cp_sched_set_sim_io(&sched->sched, &sched->io[0][0], IO_CHANNELS); /* no callback a tick */
    uint64_t plan_size = cp_sched_plan_size(&sched->sched, PLAN_MAX_TICKS);
    if (plan_size != 0 && plan_size <= UINT32_MAX) { /* no memory for it: the general path */
        sched->plan = PyMem_Malloc((size_t)plan_size);
        (void)cp_sched_set_plan(&sched->sched, sched->plan, (uint32_t)plan_size);
    }
    Py_INCREF(self);
    sched->program = self;
    self->schedulers++;
    return (PyObject *)sched;
}

static void release_trace(SchedulerObject *self)
{
    if (self->trace_obj != NULL) {
        PyBuffer_Release(&self->trace_view);
        Py_CLEAR(self->trace_obj);
    }
}

static void release_feeds(SchedulerObject *self)
{
    for (uint32_t i = 0; i < CP_MAX_FEEDS; i++) {
        if (self->feed_views[i].obj != NULL) {
            PyBuffer_Release(&self->feed_views[i]);
        }
    }
}

static void Scheduler_dealloc(SchedulerObject *self)
{
    cp_sched_clear_feeds(&self->sched);
    release_feeds(self);
    release_trace(self);
    PyMem_Free(self->plan);
    if (self->program != NULL) {
        self->program->schedulers--;
        Py_CLEAR(self->program);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Every method but the attribute getters refuses while advance() runs in another thread. */
static int check_idle(const SchedulerObject *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the scheduler is busy: advance() is running in another thread");
        return -1;
    }
    return 0;
}

/* ProgramFault if the scheduler's program has faulted (-1), else 0. */
static int check_fault(const SchedulerObject *self)
{
    const cp_fault *f = cp_sched_fault(&self->sched);
    if (f == NULL) {
        return 0;
    }
    raise_fault(f, (long long)f->tick);
    return -1;
}

/* A faulted program stops: ticks after the fault are not processed. */
static PyObject *advance_result(const SchedulerObject *self)
{
    if (check_fault(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Scheduler_advance(SchedulerObject *self, PyObject *arg)
{
    uint64_t ticks;
    if (check_idle(self) < 0 || parse_u64(arg, "ticks", &ticks) < 0 || check_fault(self) < 0) {
        return NULL;
    }
    if (ticks < GIL_FREE_TICKS) {
        cp_sched_advance(&self->sched, ticks); /* stops at a fault */
        return advance_result(self);
    }
    /* the chains never call Python and every buffer the loop touches is pinned, so the GIL can
     * go; Ctrl-C is honoured between chunks (the ticks done so far stay done) */
    self->busy = 1;
    while (ticks > 0) {
        uint64_t n = ticks < SIGNAL_CHECK_TICKS ? ticks : SIGNAL_CHECK_TICKS;
        Py_BEGIN_ALLOW_THREADS
        cp_sched_advance(&self->sched, n); /* one guard run for the n ticks */
        Py_END_ALLOW_THREADS
        ticks -= n;
        if (cp_sched_fault(&self->sched) != NULL) {
            break;
        }
        if (ticks > 0 && PyErr_CheckSignals() < 0) {
            self->busy = 0;
            return NULL;
        }
    }
    self->busy = 0;
    return advance_result(self);
}

static PyObject *Scheduler_tick(SchedulerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (check_idle(self) < 0 || check_fault(self) < 0) {
        return NULL;
    }
    cp_sched_tick(&self->sched);
    return advance_result(self);
}

static PyObject *Scheduler_settle(SchedulerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (check_idle(self) < 0) {
        return NULL;
    }
    cp_sched_settle(&self->sched);
    Py_RETURN_NONE;
}

static PyObject *Scheduler_reset(SchedulerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (check_idle(self) < 0) {
        return NULL;
    }
    cp_sched_reset(&self->sched);
    Py_RETURN_NONE;
}

static int parse_task(const SchedulerObject *self, PyObject *arg, uint32_t *task)
{
    Py_ssize_t t = PyNumber_AsSsize_t(arg, PyExc_IndexError);
    if (t == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (t < 0 || (size_t)t >= self->sched.task_count) {
        PyErr_Format(PyExc_IndexError, "task %zd out of range: the program has %u tasks", t,
                     (unsigned)self->sched.task_count);
        return -1;
    }
    *task = (uint32_t)t;
    return 0;
}

static PyObject *Scheduler_stats(SchedulerObject *self, PyObject *arg)
{
    uint32_t task;
    if (check_idle(self) < 0 || parse_task(self, arg, &task) < 0) {
        return NULL;
    }
    const cp_task_stats *st = &self->sched.stats[task];
    return Py_BuildValue("(KKKKK)", (unsigned long long)st->runs,
                         (unsigned long long)st->skipped, (unsigned long long)st->overruns,
                         (unsigned long long)st->exec_ns_max,
                         (unsigned long long)st->exec_ns_sum);
}

static PyObject *Scheduler_pending(SchedulerObject *self, PyObject *arg)
{
    uint32_t task;
    if (check_idle(self) < 0 || parse_task(self, arg, &task) < 0) {
        return NULL;
    }
    return PyBool_FromLong(self->sched.state[task].pending != 0);
}

static PyObject *Scheduler_set_trace(SchedulerObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"ranges", "capacity", NULL};
    PyObject *ranges_obj, *capacity_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:set_trace", keywords, &ranges_obj,
                                     &capacity_obj)) {
        return NULL;
    }
    if (check_idle(self) < 0) {
        return NULL;
    }
    uint64_t capacity;
    if (parse_u64(capacity_obj, "capacity", &capacity) < 0) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(ranges_obj, "ranges must be a list of (offset, size)");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (count > (Py_ssize_t)CP_MAX_TRACE_RANGES) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%zd trace ranges, at most %u are supported", count,
                     CP_MAX_TRACE_RANGES);
        return NULL;
    }
    uint32_t offsets[CP_MAX_TRACE_RANGES], sizes[CP_MAX_TRACE_RANGES];
    uint64_t row_size = sizeof(uint64_t);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "trace range %zd must be a tuple (offset, size)", i);
            return NULL;
        }
        if (parse_u32(PyTuple_GET_ITEM(item, 0), "trace range offset", &offsets[i]) < 0 ||
            parse_u32(PyTuple_GET_ITEM(item, 1), "trace range size", &sizes[i]) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
        row_size += sizes[i];
    }
    Py_DECREF(seq);
    cp_error err = new_error();
    if (count == 0) {
        (void)cp_sched_set_trace(&self->sched, NULL, NULL, 0, NULL, 0, &err);
        release_trace(self);
        Py_RETURN_NONE;
    }
    if (capacity == 0) {
        PyErr_SetString(PyExc_ValueError, "trace capacity must be at least 1 row");
        return NULL;
    }
    if (capacity > (uint64_t)PY_SSIZE_T_MAX / row_size) {
        PyErr_Format(PyExc_MemoryError, "a trace of %llu rows of %llu bytes is too large",
                     (unsigned long long)capacity, (unsigned long long)row_size);
        return NULL;
    }
    Py_ssize_t bytes = (Py_ssize_t)(capacity * row_size);
    PyObject *ring = PyByteArray_FromStringAndSize(NULL, bytes);
    if (ring == NULL) {
        return NULL;
    }
    memset(PyByteArray_AS_STRING(ring), 0, (size_t)bytes);
    Py_buffer view;
    if (PyObject_GetBuffer(ring, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(ring);
        return NULL;
    }
    cp_status st = cp_sched_set_trace(&self->sched, offsets, sizes, (uint32_t)count,
                                      (uint8_t *)view.buf, capacity, &err);
    if (st != CP_OK) {
        PyBuffer_Release(&view);
        Py_DECREF(ring);
        PyErr_SetString(PyExc_ValueError, err.message);
        return NULL;
    }
    release_trace(self);
    self->trace_obj = ring;
    self->trace_view = view;
    Py_RETURN_NONE;
}

static PyObject *Scheduler_trace_buffer(SchedulerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (check_idle(self) < 0) {
        return NULL;
    }
    if (self->trace_obj == NULL) {
        return PyMemoryView_FromMemory((char *)"", 0, PyBUF_READ);
    }
    /* the view keeps the bytearray alive even if set_trace() replaces it */
    PyObject *view = PyMemoryView_FromObject(self->trace_obj);
    if (view == NULL) {
        return NULL;
    }
    PyObject *readonly = PyObject_CallMethod(view, "toreadonly", NULL);
    Py_DECREF(view);
    return readonly;
}

static PyObject *Scheduler_add_feed(SchedulerObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"offset", "size", "samples", "first_tick", NULL};
    PyObject *offset_obj, *size_obj, *samples, *first_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O:add_feed", keywords, &offset_obj,
                                     &size_obj, &samples, &first_obj)) {
        return NULL;
    }
    if (check_idle(self) < 0) {
        return NULL;
    }
    uint32_t offset, size;
    uint64_t first_tick = self->sched.tick;
    if (parse_u32(offset_obj, "offset", &offset) < 0 || parse_u32(size_obj, "size", &size) < 0 ||
        (first_obj != Py_None && parse_u64(first_obj, "first_tick", &first_tick) < 0)) {
        return NULL;
    }
    if (size == 0) {
        PyErr_SetString(PyExc_ValueError, "feed sample size must be at least 1 byte");
        return NULL;
    }
    if (self->sched.feed_count >= CP_MAX_FEEDS) {
        PyErr_Format(PyExc_ValueError, "already %u feeds, the maximum: clear_feeds() first",
                     CP_MAX_FEEDS);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(samples, &view, PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    if (view.len % size != 0) {
        PyErr_Format(PyExc_ValueError,
                     "samples have %zd bytes, not a multiple of the %u-byte sample size",
                     view.len, (unsigned)size);
        PyBuffer_Release(&view);
        return NULL;
    }
    cp_sched_feed feed = {offset, size, (const uint8_t *)view.buf,
                          (uint64_t)view.len / size, first_tick};
    cp_error err = new_error();
    uint32_t slot = self->sched.feed_count;
    if (cp_sched_add_feed(&self->sched, &feed, &err) != CP_OK) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, err.message);
        return NULL;
    }
    self->feed_views[slot] = view;
    Py_RETURN_NONE;
}

static PyObject *Scheduler_clear_feeds(SchedulerObject *self, PyObject *Py_UNUSED(ignored))
{
    if (check_idle(self) < 0) {
        return NULL;
    }
    cp_sched_clear_feeds(&self->sched);
    release_feeds(self);
    Py_RETURN_NONE;
}

static int parse_channel(PyObject *kind_obj, PyObject *channel_obj, uint32_t *kind,
                         uint32_t *channel)
{
    if (parse_u32(kind_obj, "kind", kind) < 0 || parse_u32(channel_obj, "channel", channel) < 0) {
        return -1;
    }
    if (*kind < 1 || *kind > IO_KINDS) {
        PyErr_Format(PyExc_ValueError,
                     "I/O kind %u is unknown: use" CP_IO_KIND_LIST,
                     (unsigned)*kind);
        return -1;
    }
    if (*channel >= IO_CHANNELS) {
        PyErr_Format(PyExc_ValueError, "I/O channel %u is out of range 0..%d", (unsigned)*channel,
                     IO_CHANNELS - 1);
        return -1;
    }
    return 0;
}

static PyObject *Scheduler_io_read(SchedulerObject *self, PyObject *const *args,
                                   Py_ssize_t nargs)
{
    uint32_t kind, channel;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "io_read(kind, channel) takes exactly 2 arguments");
        return NULL;
    }
    if (check_idle(self) < 0 || parse_channel(args[0], args[1], &kind, &channel) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble(self->io[kind - 1][channel]);
}

static PyObject *Scheduler_io_write(SchedulerObject *self, PyObject *const *args,
                                    Py_ssize_t nargs)
{
    uint32_t kind, channel;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "io_write(kind, channel, value) takes exactly 3 arguments");
        return NULL;
    }
    if (check_idle(self) < 0 || parse_channel(args[0], args[1], &kind, &channel) < 0) {
        return NULL;
    }
    double value = PyFloat_AsDouble(args[2]);
    if (value == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    self->io[kind - 1][channel] = value;
    Py_RETURN_NONE;
}

static PyObject *Scheduler_get_u64(SchedulerObject *self, void *closure)
{
    uint64_t v = 0;
    const cp_sched *s = &self->sched;
    switch ((int)(intptr_t)closure) {
    case 0:
        v = s->now_ns;
        break;
    case 1:
        v = s->tick;
        break;
    case 2:
        v = s->cfg.tick_ns;
        break;
    case 3:
        v = s->task_count;
        break;
    case 4:
        v = s->trace_rows;
        break;
    case 5:
        v = s->trace_rows > s->trace_capacity ? s->trace_rows - s->trace_capacity : 0;
        break;
    case 6:
        v = s->trace_row_size;
        break;
    case 7:
        v = s->trace_capacity;
        break;
    default:
        v = s->feed_count;
        break;
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)v);
}

static PyObject *Scheduler_get_deterministic(SchedulerObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->sched.cfg.deterministic != 0);
}

static PyObject *Scheduler_get_measure(SchedulerObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->measure);
}

static PyObject *Scheduler_get_fault(SchedulerObject *self, void *closure)
{
    (void)closure;
    const cp_fault *f = cp_sched_fault(&self->sched);
    if (f == NULL) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(sIKKIK)", cp_fault_name(f->kind), (unsigned)f->task,
                         (unsigned long long)f->address, (unsigned long long)f->pc,
                         (unsigned)f->code, (unsigned long long)f->tick);
}

static PyObject *Scheduler_get_program(SchedulerObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef((PyObject *)self->program);
}

static PyObject *Scheduler_repr(SchedulerObject *self)
{
    return PyUnicode_FromFormat("<copapy._runner.Scheduler tick_ns=%llu tasks=%u ticks=%llu "
                                "%s>", (unsigned long long)self->sched.cfg.tick_ns,
                                (unsigned)self->sched.task_count,
                                (unsigned long long)self->sched.tick,
                                self->sched.cfg.deterministic ? "deterministic" : "real-time");
}

#define SCHED_U64(name, index, doc) \
    {name, (getter)Scheduler_get_u64, NULL, doc, (void *)(intptr_t)(index)}

static PyGetSetDef Scheduler_getset[] = {
    SCHED_U64("time_ns", 0, "time of the next tick (ticks * tick_ns)"),
    SCHED_U64("ticks", 1, "ticks processed since the start or the last reset()"),
    SCHED_U64("tick_ns", 2, "the tick in nanoseconds"),
    SCHED_U64("task_count", 3, "number of tasks of the program"),
    SCHED_U64("trace_rows", 4, "trace rows written in total (newest at (rows-1) % capacity)"),
    SCHED_U64("trace_dropped", 5, "oldest trace rows overwritten because the ring was full"),
    SCHED_U64("trace_row_size", 6, "bytes per trace row: uint64 t_ns, then the ranges"),
    SCHED_U64("trace_capacity", 7, "rows in the trace ring (0: no trace)"),
    SCHED_U64("feed_count", 8, "configured feeds"),
    {"deterministic", (getter)Scheduler_get_deterministic, NULL,
     "True: job cost = wcet_ns; False: the measured chain time", NULL},
    {"measure", (getter)Scheduler_get_measure, NULL,
     "True: chains are timed (job_clock()) for exec_ns statistics", NULL},
    {"program", (getter)Scheduler_get_program, NULL, "the Program being scheduled", NULL},
    {"fault", (getter)Scheduler_get_fault, NULL,
     "None, or (kind, task, address, pc, code, tick) of the fault that stopped the program "
     "(cleared by reset())", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Scheduler_methods[] = {
    {"settle", (PyCFunction)Scheduler_settle, METH_NOARGS,
     "publish the finished jobs whose period ends at the current time"},
    {"advance", (PyCFunction)Scheduler_advance, METH_O,
     "advance(ticks)\n--\n\nProcess `ticks` ticks (without the GIL when there are many)."},
    {"tick", (PyCFunction)Scheduler_tick, METH_NOARGS, "tick()\n--\n\nProcess one tick."},
    {"reset", (PyCFunction)Scheduler_reset, METH_NOARGS,
     "reset()\n--\n\nTime 0; statistics, pending jobs and trace counters cleared; the data "
     "region back to its initial contents. Feeds and the trace ranges stay configured."},
    {"stats", (PyCFunction)Scheduler_stats, METH_O,
     "stats(task)\n--\n\n(runs, skipped, overruns, exec_ns_max, exec_ns_sum) of a task."},
    {"pending", (PyCFunction)Scheduler_pending, METH_O,
     "pending(task)\n--\n\nTrue if the task's job has not published yet."},
    {"set_trace", (PyCFunction)(void (*)(void))Scheduler_set_trace,
     METH_VARARGS | METH_KEYWORDS,
     "set_trace(ranges, capacity)\n--\n\nRecord the data ranges [(offset, size), ...] after "
     "every tick into a new ring of `capacity` rows; an empty list stops tracing."},
    {"trace_buffer", (PyCFunction)Scheduler_trace_buffer, METH_NOARGS,
     "trace_buffer()\n--\n\nRead-only memoryview of the raw ring (capacity * trace_row_size "
     "bytes); row r of the history is at (r % capacity)."},
    {"add_feed", (PyCFunction)(void (*)(void))Scheduler_add_feed, METH_VARARGS | METH_KEYWORDS,
     "add_feed(offset, size, samples, first_tick=None)\n--\n\nWrite sample k (size bytes) of "
     "the buffer `samples` to the data offset before the releases of tick first_tick + k; "
     "first_tick defaults to the next tick. The buffer is kept (and pinned) until "
     "clear_feeds()."},
    {"clear_feeds", (PyCFunction)Scheduler_clear_feeds, METH_NOARGS,
     "clear_feeds()\n--\n\nRemove all feeds."},
    {"io_read", (PyCFunction)(void (*)(void))Scheduler_io_read, METH_FASTCALL,
     "io_read(kind, channel)\n--\n\nValue of a simulated I/O channel (kind 1 GPIO, 2 PWM, "
     "3 ENCODER, 4 ADC; channel 0..255)."},
    {"io_write", (PyCFunction)(void (*)(void))Scheduler_io_write, METH_FASTCALL,
     "io_write(kind, channel, value)\n--\n\nSet a simulated I/O channel (what INPUT bindings "
     "sample)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject SchedulerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "copapy._runner.Scheduler",
    .tp_basicsize = sizeof(SchedulerObject),
    .tp_dealloc = (destructor)Scheduler_dealloc,
    .tp_repr = (reprfunc)Scheduler_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The real-time scheduler of docs/realtime.md driving a Program in simulated "
              "time; made by Program.scheduler(tick_ns, deterministic=True, measure=True).",
    .tp_methods = Scheduler_methods,
    .tp_getset = Scheduler_getset,
};
