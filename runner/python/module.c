/* copapy._runner: the runner core as a CPython extension (single-phase init).
 * Program.run is the hot path: METH_FASTCALL, no allocation, the GIL is kept because a release
 * and re-acquire would cost more than a typical task. Program.scheduler() gives a Scheduler
 * (docs/realtime.md) in simulated time whose advance() runs the C loop without the GIL. */
#include "module.h"

#include <string.h>

static PyObject *ImageError;
PyObject *ProgramFault; /* copapy.runtime.errors.ProgramFault */

/* The in-process supervisor (copapy.runtime.native.set_watchdog): a job may use `factor`
 * times its budget of CPU time, at least `min_ns`; a job without period, wcet or budget
 * (run(), invoke()) `request_ns`. */
uint32_t watchdog_factor = 10;
uint64_t watchdog_min_ns = 1000000000ull;
uint64_t watchdog_request_ns = 60000000000ull;

#define DEFAULT_MAX_MEMORY ((size_t)64 * 1024 * 1024)
#define DEFAULT_MEMORY_OPTION \
    "COPAPY_MAX_MEMORY=<bytes> or copapy.runtime.set_max_memory(<bytes>)"

/* Raises ProgramFault with the facts of a fault; tick < 0: outside the scheduler. */
void raise_fault(const cp_fault *f, long long tick)
{
    PyObject *task = f->task == CP_FAULT_NO_TASK ? Py_NewRef(Py_None)
                                                 : PyLong_FromUnsignedLong(f->task);
    PyObject *when = tick < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(tick);
    if (task != NULL && when != NULL) {
        PyObject *exc = PyObject_CallFunction(ProgramFault, "sOKKkO", cp_fault_name(f->kind),
                                              task, (unsigned long long)f->address,
                                              (unsigned long long)f->pc,
                                              (unsigned long)f->code, when);
        if (exc != NULL) {
            PyErr_SetObject(ProgramFault, exc);
            Py_DECREF(exc);
        }
    }
    Py_XDECREF(task);
    Py_XDECREF(when);
}

void *guard_policy(const ProgramObject *self)
{
    if (self->keeps_cpu_state) {
        return (void *)(self->own_code ? &cp_posix_own_verified_code : &cp_posix_verified);
    }
    return self->own_code ? (void *)&cp_posix_own_code : NULL;
}

/* Runs one task of a loaded program inside the fault guard; raises ProgramFault and returns
 * -1 if it faulted. */
CP_CALLS_LOADED_CODE
static int run_guarded(const ProgramObject *self, uint32_t task)
{
    const cp_program *prog = &self->prog;
    cp_fault f;
    memset(&f, 0, sizeof(f));
    uint64_t budget = cp_task_budget_ns(&prog->tasks[task], watchdog_factor, watchdog_min_ns,
                                        watchdog_request_ns);
    if (cp_posix_guard(guard_policy(self), prog->tasks[task].entry, budget, &f) == 0) {
        return 0;
    }
    f.task = task;
    raise_fault(&f, -1);
    return -1;
}


static void invoke_plan_free(struct invoke_plan *plan);

uint16_t host_arch(void)
{
    return cp_platform_posix()->arch;
}

static void raise_image_error(cp_status status, const cp_error *err)
{
    const char *text = err->message[0] != '\0' ? err->message : cp_status_name(status);
    PyObject *exc = PyObject_CallFunction(ImageError, "s", text);
    if (exc == NULL) {
        return;
    }
    PyObject *code = PyLong_FromUnsignedLong((unsigned long)status);
    PyObject *name = PyUnicode_FromString(cp_status_name(status));
    PyObject *detail = PyLong_FromUnsignedLong(err->detail);
    if (code != NULL && name != NULL && detail != NULL &&
        PyObject_SetAttrString(exc, "code", code) == 0 &&
        PyObject_SetAttrString(exc, "name", name) == 0 &&
        PyObject_SetAttrString(exc, "detail", detail) == 0) {
        PyErr_SetObject(ImageError, exc);
    }
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_XDECREF(detail);
    Py_DECREF(exc);
}

cp_error new_error(void)
{
    cp_error err;
    memset(&err, 0, sizeof(err));
    err.struct_size = sizeof(err);
    return err;
}

/* None -> the host architecture; else an int in 0..65535. */
static int parse_arch(PyObject *obj, uint16_t *arch)
{
    if (obj == NULL || obj == Py_None) {
        *arch = host_arch();
        return 0;
    }
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < 0 || v > 0xffff) {
        PyErr_Format(PyExc_ValueError, "arch %ld is not an architecture id (0..65535)", v);
        return -1;
    }
    *arch = (uint16_t)v;
    return 0;
}

int check_loaded(const ProgramObject *self)
{
    if (!self->prog.loaded) {
        PyErr_SetString(PyExc_RuntimeError, "program was unloaded");
        return -1;
    }
    return 0;
}

/* ---- Program */

static PyTypeObject ProgramType;

static PyObject *Program_run(ProgramObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    PyObject *task_obj = nargs > 0 ? args[0] : NULL;
    if (kwnames != NULL || nargs > 1) {
        Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
        if (nargs + nkw > 1 || (nkw == 1 && !PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0))) ||
            (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                                          "task") != 0)) {
            PyErr_SetString(PyExc_TypeError, "run() takes one optional argument: task");
            return NULL;
        }
        if (nkw == 1) {
            task_obj = args[nargs];
        }
    }
    if (!self->prog.loaded) {
        PyErr_SetString(PyExc_RuntimeError, "program was unloaded");
        return NULL;
    }
    unsigned long task = 0;
    if (task_obj != NULL) {
        long t = PyLong_AsLong(task_obj);
        if (t == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (t < 0 || (unsigned long)t >= self->prog.task_count) {
            PyErr_Format(PyExc_IndexError, "task %ld out of range: the program has %u tasks",
                         t, (unsigned)self->prog.task_count);
            return NULL;
        }
        task = (unsigned long)t;
    } else if (self->prog.task_count == 0) {
        PyErr_SetString(PyExc_IndexError, "task 0 out of range: the program has no tasks");
        return NULL;
    }
    if (!self->runnable) {
        PyErr_Format(PyExc_RuntimeError,
                     "program was loaded for architecture %s (%u) but this machine executes "
                     "%s (%u): it can be inspected but not run",
                     cp_arch_name(self->platform.arch), (unsigned)self->platform.arch,
                     cp_arch_name(host_arch()), (unsigned)host_arch());
        return NULL;
    }
    if (run_guarded(self, (uint32_t)task) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Resolves (offset, dtype) to a checked address inside the data region. */
static uint8_t *data_slot(ProgramObject *self, PyObject *offset_obj, PyObject *dtype_obj,
                          long *dtype)
{
    if (check_loaded(self) < 0) {
        return NULL;
    }
    Py_ssize_t offset = PyNumber_AsSsize_t(offset_obj, PyExc_IndexError);
    if (offset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    *dtype = PyLong_AsLong(dtype_obj);
    if (*dtype == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t size = (Py_ssize_t)cp_dtype_size(*dtype);
    if (size == 0) {
        PyErr_Format(PyExc_ValueError,
                     "dtype %ld is unknown: use" CP_DTYPE_LIST,
                     *dtype);
        return NULL;
    }
    Py_ssize_t data_size = (Py_ssize_t)self->prog.data_size;
    if (offset < 0 || size > data_size || offset > data_size - size) {
        PyErr_Format(PyExc_IndexError,
                     "offset %zd out of range for a %zd-byte value in the %zd-byte data region",
                     offset, size, data_size);
        return NULL;
    }
    if (offset % size != 0) {
        PyErr_Format(PyExc_ValueError, "offset %zd is not aligned to the %zd-byte dtype %ld",
                     offset, size, *dtype);
        return NULL;
    }
    return cp_program_data(&self->prog) + offset;
}

static PyObject *Program_read(ProgramObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read(offset, dtype) takes exactly 2 arguments");
        return NULL;
    }
    long dtype;
    const uint8_t *p = data_slot(self, args[0], args[1], &dtype);
    if (p == NULL) {
        return NULL;
    }
    switch (dtype) {
    case CP_DT_F32: {
        float f;
        memcpy(&f, p, sizeof(f));
        return PyFloat_FromDouble((double)f);
    }
    case CP_DT_F64: {
        double d;
        memcpy(&d, p, sizeof(d));
        return PyFloat_FromDouble(d);
    }
    case CP_DT_I32: {
        int32_t i;
        memcpy(&i, p, sizeof(i));
        return PyLong_FromLong((long)i);
    }
    case CP_DT_BOOL: {
        int32_t i;
        memcpy(&i, p, sizeof(i));
        return PyBool_FromLong(i != 0);
    }
    case CP_DT_U8:
        return PyLong_FromLong((long)p[0]);
    default: {
        int8_t i;
        memcpy(&i, p, sizeof(i));
        return PyLong_FromLong((long)i);
    }
    }
}

static int int_in_range(PyObject *value, long long lo, long long hi, const char *what,
                        long long *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && !overflow && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || v < lo || v > hi) {
        PyObject *repr = PyObject_Repr(value);
        PyErr_Format(PyExc_OverflowError, "%S is out of %s range [%lld, %lld]",
                     repr != NULL ? repr : Py_None, what, lo, hi);
        Py_XDECREF(repr);
        return -1;
    }
    *out = v;
    return 0;
}

/* Rule 5 (c) of verified loading in-process: a frozen slot (an array length, a fused loop's
 * pointer) keeps the value the verifier checked; PermissionError and -1 for a write that
 * overlaps one. */
static int refuse_frozen(const ProgramObject *self, const uint8_t *p, long dtype)
{
    uint64_t off = (uint64_t)(p - cp_program_data(&self->prog)), size = cp_dtype_size(dtype);
    for (uint32_t i = 0; i < self->frozen_count; i++) {
        uint64_t start = self->frozen[2 * i], end = start + self->frozen[2 * i + 1];
        if (start < off + size && off < end) {
            PyErr_Format(PyExc_PermissionError,
                         "write at data offset %llu (%llu bytes) refused: it overlaps frozen "
                         "slot [%llu, %llu), an array length or loop pointer the runner "
                         "verified at load; frozen slots are read-only (docs/image.md, "
                         "format 2). Write the program's inputs instead",
                         (unsigned long long)off, (unsigned long long)size,
                         (unsigned long long)start, (unsigned long long)end);
            return -1;
        }
    }
    return 0;
}

static PyObject *Program_write(ProgramObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write(offset, dtype, value) takes exactly 3 arguments");
        return NULL;
    }
    long dtype;
    uint8_t *p = data_slot(self, args[0], args[1], &dtype);
    if (p == NULL || refuse_frozen(self, p, dtype) < 0) {
        return NULL;
    }
    PyObject *value = args[2];
    long long v = 0;
    switch (dtype) {
    case CP_DT_F32:
    case CP_DT_F64: {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        if (dtype == CP_DT_F32) {
            float f = cp_to_f32(d);
            memcpy(p, &f, sizeof(f));
        } else {
            memcpy(p, &d, sizeof(d));
        }
        break;
    }
    case CP_DT_BOOL: {
        int truth = PyObject_IsTrue(value);
        if (truth < 0) {
            return NULL;
        }
        int32_t i = truth ? 1 : 0;
        memcpy(p, &i, sizeof(i));
        break;
    }
    case CP_DT_I32: {
        if (int_in_range(value, INT32_MIN, INT32_MAX, "int32", &v) < 0) {
            return NULL;
        }
        int32_t i = (int32_t)v;
        memcpy(p, &i, sizeof(i));
        break;
    }
    case CP_DT_U8:
        if (int_in_range(value, 0, UINT8_MAX, "uint8", &v) < 0) {
            return NULL;
        }
        p[0] = (uint8_t)v;
        break;
    default: {
        if (int_in_range(value, INT8_MIN, INT8_MAX, "int8", &v) < 0) {
            return NULL;
        }
        int8_t i = (int8_t)v;
        memcpy(p, &i, sizeof(i));
        break;
    }
    }
    Py_RETURN_NONE;
}

static void drop_frozen(ProgramObject *self)
{
    PyMem_Free(self->frozen);
    self->frozen = NULL;
    self->frozen_count = 0;
}

static PyObject *Program_unload(ProgramObject *self, PyObject *Py_UNUSED(ignored))
{
    if (check_loaded(self) < 0) {
        return NULL;
    }
    if (self->exports > 0) {
        PyErr_Format(PyExc_BufferError,
                     "cannot unload: %zd buffer view(s) (memoryview, numpy array) still use "
                     "the data region; release them first", self->exports);
        return NULL;
    }
    if (self->schedulers > 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot unload: %zd Scheduler object(s) still drive this program; delete "
                     "them first (del sched)", self->schedulers);
        return NULL;
    }
    cp_program_unload(&self->prog);
    drop_frozen(self);
    Py_RETURN_NONE;
}

static void Program_dealloc(ProgramObject *self)
{
    invoke_plan_free(self->plan);
    cp_program_unload(&self->prog); /* views hold a reference, so none can be alive here */
    drop_frozen(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Program_repr(ProgramObject *self)
{
    if (!self->prog.loaded) {
        return PyUnicode_FromString("<copapy._runner.Program (unloaded)>");
    }
    return PyUnicode_FromFormat("<copapy._runner.Program %s code_size=%u data_size=%u "
                                "tasks=%u>", cp_arch_name(self->platform.arch),
                                (unsigned)self->prog.code_size, (unsigned)self->prog.data_size,
                                (unsigned)self->prog.task_count);
}

static int Program_getbuffer(ProgramObject *self, Py_buffer *view, int flags)
{
    if (check_loaded(self) < 0) {
        view->obj = NULL;
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)self, cp_program_data(&self->prog),
                          (Py_ssize_t)self->prog.data_size, 0, flags) < 0) {
        return -1;
    }
    self->exports++;
    return 0;
}

static void Program_releasebuffer(ProgramObject *self, Py_buffer *view)
{
    (void)view;
    self->exports--;
}

static PyObject *Program_get_u32(ProgramObject *self, void *closure)
{
    if (check_loaded(self) < 0) {
        return NULL;
    }
    return PyLong_FromUnsignedLong(*(const uint32_t *)((const char *)&self->prog +
                                                       (size_t)(uintptr_t)closure));
}

static PyObject *Program_get_code(ProgramObject *self, void *closure)
{
    (void)closure;
    if (check_loaded(self) < 0) {
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)self->prog.base,
                                     (Py_ssize_t)self->prog.code_size);
}

static PyObject *Program_get_invoke_copies(ProgramObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->invoke_copies);
}

static PyObject *Program_get_arch(ProgramObject *self, void *closure)
{
    (void)closure;
    if (check_loaded(self) < 0) {
        return NULL;
    }
    return PyLong_FromLong((long)self->platform.arch);
}

static PyObject *Program_get_verified(ProgramObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->verified);
}

static PyObject *Program_get_keeps_cpu_state(ProgramObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->keeps_cpu_state);
}

#define U32_FIELD(name, doc) \
    {#name, (getter)Program_get_u32, NULL, doc, (void *)offsetof(cp_program, name)}

static PyGetSetDef Program_getset[] = {
    U32_FIELD(code_size, "bytes of the code region"),
    U32_FIELD(data_offset, "offset of the data region from the region base"),
    U32_FIELD(data_size, "bytes of the data region (what the buffer protocol exports)"),
    U32_FIELD(task_count, "number of tasks"),
    {"code", (getter)Program_get_code, NULL, "bytes of the patched code region", NULL},
    {"arch", (getter)Program_get_arch, NULL, "architecture id the program was loaded for",
     NULL},
    {"verified", (getter)Program_get_verified, NULL,
     "a format-2 image built from this runner's table", NULL},
    {"keeps_cpu_state", (getter)Program_get_keeps_cpu_state, NULL,
     "verified against a table proven to keep the CPU state (its proof record, "
     "tools/stencil_cpu_state.py): its runs of jobs skip the per-job CPU-state check", NULL},
    {"invoke_copies", (getter)Program_get_invoke_copies, NULL,
     "argument buffers invoke() copied (those it read in place are not counted)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#include "invoke.h"

static PyMethodDef Program_methods[] = {
    {"invoke", (PyCFunction)(void (*)(void))Program_invoke, METH_FASTCALL,
     "invoke(args, inputs, outputs): write the arguments, run task 0, read the results"},
    {"run", (PyCFunction)(void (*)(void))Program_run, METH_FASTCALL | METH_KEYWORDS,
     "run(task=0)\n--\n\nRun one task once."},
    {"read", (PyCFunction)(void (*)(void))Program_read, METH_FASTCALL,
     "read(offset, dtype)\n--\n\nRead a value at a data-region offset "
     "(dtype: 1 f32, 2 f64, 3 i32, 4 bool, 5 u8, 6 i8)."},
    {"write", (PyCFunction)(void (*)(void))Program_write, METH_FASTCALL,
     "write(offset, dtype, value)\n--\n\nWrite a value at a data-region offset."},
    {"unload", (PyCFunction)Program_unload, METH_NOARGS,
     "unload()\n--\n\nRelease the program's memory; later calls raise RuntimeError."},
    {"scheduler", (PyCFunction)(void (*)(void))Program_scheduler, METH_VARARGS | METH_KEYWORDS,
     "scheduler(tick_ns, deterministic=True, measure=True)\n--\n\nA Scheduler for this "
     "program (docs/realtime.md) with simulated I/O. deterministic: job cost = wcet_ns, else "
     "the measured time; measure: time the chains (job_clock()) for the statistics. "
     "Raises ValueError if a period or offset is not a multiple of tick_ns."},
    {NULL, NULL, 0, NULL},
};

static PyBufferProcs Program_as_buffer = {
    .bf_getbuffer = (getbufferproc)Program_getbuffer,
    .bf_releasebuffer = (releasebufferproc)Program_releasebuffer,
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "copapy._runner.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_repr = (reprfunc)Program_repr,
    .tp_as_buffer = &Program_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A loaded program; its data region is exported through the buffer protocol.",
    .tp_methods = Program_methods,
    .tp_getset = Program_getset,
};

/* ---- module functions */

/* The option string a TOO_LARGE error names; kept for the life of the module. */
static char memory_option[160] = DEFAULT_MEMORY_OPTION;

/* What a verified image that loaded (so it parses) leaves to its program: the keeps_cpu_state
 * flag of its table (for the guard policy) and its FROZEN list (for write()'s check). */
static int copy_verified(ProgramObject *self, const Py_buffer *image, uint16_t arch)
{
    cp_image img;
    cp_error err = new_error();
    if (!self->verified ||
        cp_image_parse(&img, (const uint8_t *)image->buf, (size_t)image->len, arch, &err) !=
            CP_OK) {
        return 0; /* only format 2 has a pin and the list; a loaded image parses */
    }
    /* the flag of the table the program was verified against: the one its pin names */
    self->keeps_cpu_state = cp_table_keeps_cpu_state(img.bytes +
                                                     img.sec[CP_SEC_TABLE_PIN].offset);
    uint32_t n = img.sec[CP_SEC_FROZEN].count;
    if (n == 0) {
        return 0;
    }
    self->frozen = PyMem_Malloc((size_t)n * 2u * sizeof(uint32_t));
    if (self->frozen == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = cp_image_entry(&img, CP_SEC_FROZEN, i);
        self->frozen[2 * i] = cp_le32(e);
        self->frozen[2 * i + 1] = cp_le32(e + 4);
    }
    self->frozen_count = n;
    return 0;
}

static PyObject *runner_load(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"image", "arch", "max_memory", "memory_option", "own_code",
                               "allow_code", NULL};
    Py_buffer image;
    PyObject *arch_obj = Py_None;
    Py_ssize_t max_memory = (Py_ssize_t)DEFAULT_MAX_MEMORY;
    const char *option = NULL;
    int own_code = 0, allow_code = 0;
    uint16_t arch;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|Onzpp:load", keywords, &image, &arch_obj,
                                     &max_memory, &option, &own_code, &allow_code)) {
        return NULL;
    }
    if (max_memory <= 0) {
        PyBuffer_Release(&image);
        PyErr_SetString(PyExc_ValueError, "max_memory must be a positive number of bytes");
        return NULL;
    }
    if (option != NULL) {
        snprintf(memory_option, sizeof(memory_option), "%s", option);
    }
    if (parse_arch(arch_obj, &arch) < 0) {
        PyBuffer_Release(&image);
        return NULL;
    }
    ProgramObject *self = PyObject_New(ProgramObject, &ProgramType);
    if (self == NULL) {
        PyBuffer_Release(&image);
        return NULL;
    }
    memset(&self->prog, 0, sizeof(self->prog));
    self->prog.struct_size = sizeof(self->prog);
    self->platform = *cp_platform_posix();
    self->platform.arch = arch;
    self->platform.max_region_size = (size_t)max_memory;
    self->platform.memory_option = memory_option;
    self->exports = 0;
    self->schedulers = 0;
    self->invoke_copies = 0;
    self->plan = NULL;
    self->frozen_count = 0;
    self->frozen = NULL;
    self->runnable = arch != 0 && arch == host_arch();
    self->own_code = own_code;
    self->verified = 0;
    self->keeps_cpu_state = 0;
    /* the fault handlers again, in case a library (faulthandler.enable()) replaced them since
     * import: the replaced handler becomes the one faults outside guarded code go to */
    (void)cp_posix_guard_install();
    cp_error err = new_error();
    /* own_code: this process compiled the image (@cp.jit, LocalTarget), which may then be
     * format 1 (as with allow_code, for fault tests); an image from a file or a peer must be
     * format 2 (verified) */
    cp_status st = (own_code || allow_code ? cp_program_load_own : cp_program_load)(
        &self->prog, (const uint8_t *)image.buf, (size_t)image.len, &self->platform, &err);
    /* loaded, so the header is valid: its u16 version at byte 4 (docs/image.md) */
    const uint8_t *head = (const uint8_t *)image.buf;
    self->verified = st == CP_OK && (head[4] | (head[5] << 8)) == CP_IMAGE_FORMAT_VERSION;
    if (st == CP_OK && copy_verified(self, &image, arch) < 0) {
        PyBuffer_Release(&image);
        Py_DECREF(self);
        return NULL;
    }
    PyBuffer_Release(&image); /* the program owns copies of everything it needs */
    if (st != CP_OK) {
        Py_DECREF(self);
        raise_image_error(st, &err);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *runner_validate(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"image", "arch", NULL};
    Py_buffer image;
    PyObject *arch_obj = Py_None;
    uint16_t arch;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|O:validate", keywords, &image,
                                     &arch_obj)) {
        return NULL;
    }
    if (parse_arch(arch_obj, &arch) < 0) {
        PyBuffer_Release(&image);
        return NULL;
    }
    cp_error err = new_error();
    cp_status st = cp_image_validate((const uint8_t *)image.buf, (size_t)image.len, arch, &err);
    PyBuffer_Release(&image);
    if (st != CP_OK) {
        raise_image_error(st, &err);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Tables verify() has checked (bounds) and hashed, by identity: bytes objects are
 * immutable, and the cache holds a reference, so a hit is the same bytes (runner_table.py
 * hands the same blob object to every call of a process). */
enum { CHECKED_TABLES = 16 };
static struct {
    PyObject *blob;
    uint8_t pin[CP_SHA256_SIZE];
} checked_tables[CHECKED_TABLES];

/* The table `obj` as cp_table (its SHA-256 in `pin`), bounds-checked; 1 if it was checked
 * before (bytes seen by an earlier call), 0 if the caller must check it, -1 on error. */
static int table_of(PyObject *obj, Py_buffer *view, uint8_t pin[CP_SHA256_SIZE])
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (view->len > (Py_ssize_t)UINT32_MAX) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "a stencil table of more than 4 GB");
        return -1;
    }
    if (PyBytes_CheckExact(obj)) {
        for (unsigned i = 0; i < CHECKED_TABLES; i++) {
            if (checked_tables[i].blob == obj) {
                memcpy(pin, checked_tables[i].pin, CP_SHA256_SIZE);
                return 1;
            }
        }
    }
    cp_sha256 c;
    cp_sha256_init(&c);
    cp_sha256_update(&c, (const uint8_t *)view->buf, (size_t)view->len);
    cp_sha256_final(&c, pin);
    return 0;
}

static void table_checked(PyObject *obj, const uint8_t pin[CP_SHA256_SIZE])
{
    static unsigned next;
    if (!PyBytes_CheckExact(obj)) {
        return; /* mutable: checked again on every call */
    }
    unsigned i = next++ % CHECKED_TABLES;
    Py_XDECREF(checked_tables[i].blob);
    Py_INCREF(obj);
    checked_tables[i].blob = obj;
    memcpy(checked_tables[i].pin, pin, CP_SHA256_SIZE);
}

/* Verified loading of any architecture's format-2 image against its stencil table, given
 * by the caller (runner_table.py builds it from the .cpst files): every rule of
 * cp_program_load's verifier, then the code the runner would build, patched as if placed at
 * `base`. The emulated back ends check their images with it, so the extension carries only
 * its own architecture's tables. The table comes from outside the runner: its records are
 * bounds-checked (once per bytes object) before the walk trusts them. */
static PyObject *runner_verify(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"image", "table", "base", NULL};
    Py_buffer image, table;
    PyObject *table_obj;
    unsigned long long base = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O|K:verify", keywords, &image,
                                     &table_obj, &base)) {
        return NULL;
    }
    uint8_t pin[CP_SHA256_SIZE];
    int known = table_of(table_obj, &table, pin);
    if (known < 0) {
        PyBuffer_Release(&image);
        return NULL;
    }
    PyObject *result = NULL;
    uint8_t *code = NULL;
    const uint8_t *bytes = (const uint8_t *)image.buf;
    cp_error err = new_error();
    cp_image img;
    cp_blocks_plan plan;
    cp_table t = {(const uint8_t *)table.buf, (uint32_t)table.len, pin, 0, 0};
    cp_status st = cp_image_parse(&img, bytes, (size_t)image.len,
                                  image.len >= 10 ? (uint16_t)(bytes[8] | (bytes[9] << 8)) : 0,
                                  &err);
    if (st == CP_OK && img.version != CP_IMAGE_FORMAT_VERSION) {
        st = CP_FAIL(&err, CP_ERR_VERSION, img.version, "image format %u carries machine "
                     "code; only format 2 (stencil ids) can be verified", img.version);
    }
    if (st == CP_OK) {
        st = cp_blocks_plan_table(&img, &t, !known, &plan, &err);
    }
    if (st == CP_OK && !known) {
        table_checked(table_obj, pin); /* its pin matched an image's and its records fit */
    }
    if (st == CP_OK) {
        code = PyMem_Calloc(plan.code_size ? plan.code_size : 1, 1);
        if (code == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        st = cp_blocks_place_at(&img, &t, &plan, code, (uint64_t)base, &err);
    }
    if (st != CP_OK) {
        raise_image_error(st, &err);
        goto done;
    }
    result = PyBytes_FromStringAndSize((const char *)code, (Py_ssize_t)plan.code_size);
done:
    PyMem_Free(code);
    PyBuffer_Release(&image);
    PyBuffer_Release(&table);
    return result;
}

static PyObject *runner_crc32(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"data", "crc", NULL};
    Py_buffer data;
    unsigned int crc = 0; /* "I" masks like zlib.crc32's value argument */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|I:crc32", keywords, &data, &crc)) {
        return NULL;
    }
    uint32_t result = cp_crc32((uint32_t)crc, (const uint8_t *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(result);
}

static int parse_address(PyObject *obj, const char *what, uint64_t *out)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Format(PyExc_OverflowError, "%s must be in 0 .. 2**64 - 1", what);
        }
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static PyObject *apply_patch_buffers(Py_buffer *word, PyObject *site_obj, PyObject *target_obj,
                                     Py_buffer *kind_raw)
{
    cp_error err = new_error();
    uint64_t site, target;
    if (parse_address(site_obj, "site_addr", &site) < 0 ||
        parse_address(target_obj, "target_addr", &target) < 0) {
        return NULL;
    }
    if (kind_raw->len != CP_KIND_SIZE && kind_raw->len != CP_KIND_SIZE_WIDE) {
        cp_status st = CP_FAIL(&err, CP_ERR_LAYOUT, 0, "a patch kind is %u (an image's) or %u "
                               "bytes (a stencil table's), got %u", CP_KIND_SIZE,
                               CP_KIND_SIZE_WIDE, (uint64_t)kind_raw->len);
        raise_image_error(st, &err);
        return NULL;
    }
    cp_patch_kind kind;
    cp_status st = kind_raw->len == CP_KIND_SIZE_WIDE
                       ? cp_kind_decode_wide((const uint8_t *)kind_raw->buf, 0, &kind, &err)
                       : cp_kind_decode((const uint8_t *)kind_raw->buf, 0, &kind, &err);
    if (st != CP_OK) {
        raise_image_error(st, &err);
        return NULL;
    }
    if (word->len != kind.word_bits / 8) {
        PyErr_Format(PyExc_ValueError, "word has %zd bytes but the kind patches %u-bit words",
                     word->len, (unsigned)kind.word_bits);
        return NULL;
    }
    uint8_t out[8];
    memcpy(out, word->buf, (size_t)word->len);
    st = cp_patch_apply(&kind, out, site, target, 0, &err);
    if (st != CP_OK) {
        raise_image_error(st, &err);
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)out, word->len);
}

static PyObject *runner_apply_patch(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *keywords[] = {"word", "site_addr", "target_addr", "kind", NULL};
    Py_buffer word, kind;
    PyObject *site, *target;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*OOy*:apply_patch", keywords, &word, &site,
                                     &target, &kind)) {
        return NULL;
    }
    PyObject *result = apply_patch_buffers(&word, site, target, &kind);
    PyBuffer_Release(&word);
    PyBuffer_Release(&kind);
    return result;
}

static PyObject *runner_set_watchdog(PyObject *module, PyObject *args)
{
    (void)module;
    unsigned int factor;
    unsigned long long min_ns, request_ns;
    if (!PyArg_ParseTuple(args, "IKK:set_watchdog", &factor, &min_ns, &request_ns)) {
        return NULL;
    }
    watchdog_factor = factor;
    watchdog_min_ns = min_ns;
    watchdog_request_ns = request_ns;
    Py_RETURN_NONE;
}

/* Test hooks: the runner's own SHA-256 and HMAC-SHA256 (runner/src/sha256.c). */
static PyObject *runner_sha256(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    cp_sha256 c;
    uint8_t out[CP_SHA256_SIZE];
    cp_sha256_init(&c);
    cp_sha256_update(&c, (const uint8_t *)data.buf, (size_t)data.len);
    cp_sha256_final(&c, out);
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, CP_SHA256_SIZE);
}

static PyObject *runner_hmac_sha256(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer key, msg;
    if (!PyArg_ParseTuple(args, "y*y*:hmac_sha256", &key, &msg)) {
        return NULL;
    }
    uint8_t out[CP_SHA256_SIZE];
    cp_hmac_sha256((const uint8_t *)key.buf, (size_t)key.len, (const uint8_t *)msg.buf,
                   (size_t)msg.len, out);
    PyBuffer_Release(&key);
    PyBuffer_Release(&msg);
    return PyBytes_FromStringAndSize((const char *)out, CP_SHA256_SIZE);
}

static PyObject *runner_job_clock(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    const char *name;
    uint64_t hz;
    Py_BEGIN_ALLOW_THREADS
    name = cp_posix_clock_name(); /* the first call calibrates: ~2 ms without the GIL */
    hz = cp_posix_clock_hz();
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(sK)", name, (unsigned long long)hz);
}

static PyObject *runner_job_clock_ns(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    return PyLong_FromUnsignedLongLong((unsigned long long)cp_posix_clock_ns(NULL));
}

static PyObject *runner_noop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    Py_RETURN_NONE;
}

static PyMethodDef runner_methods[] = {
    {"load", (PyCFunction)(void (*)(void))runner_load, METH_VARARGS | METH_KEYWORDS,
     "load(image, arch=None)\n--\n\nValidate, load, patch and seal an image; returns a "
     "Program. arch defaults to ARCH. Raises ImageError."},
    {"validate", (PyCFunction)(void (*)(void))runner_validate, METH_VARARGS | METH_KEYWORDS,
     "validate(image, arch=None)\n--\n\nCheck an image completely; raises ImageError."},
    {"verify", (PyCFunction)(void (*)(void))runner_verify, METH_VARARGS | METH_KEYWORDS,
     "verify(image, table, base=0) -> bytes: check a format-2 image of any architecture "
     "against that architecture's stencil table blob (every rule of verified loading; "
     "ImageError names the rule) and return the code the runner builds from it at `base`"},
    {"crc32", (PyCFunction)(void (*)(void))runner_crc32, METH_VARARGS | METH_KEYWORDS,
     "crc32(data, crc=0)\n--\n\nzlib-compatible CRC-32, as in the image trailer."},
    {"apply_patch", (PyCFunction)(void (*)(void))runner_apply_patch,
     METH_VARARGS | METH_KEYWORDS,
     "apply_patch(word, site_addr, target_addr, kind)\n--\n\nApply the generic patch of a "
     "20-byte patch kind to a 2/4/8-byte word; returns the new word (test hook)."},
    {"set_watchdog", (PyCFunction)runner_set_watchdog, METH_VARARGS,
     "set_watchdog(factor, min_ns, request_ns)\n--\n\nThe in-process supervisor: a job may "
     "use factor x its budget of CPU time (at least min_ns; request_ns for a job without "
     "period, wcet or budget) before it is stopped with ProgramFault('timeout'); factor 0 "
     "disables it (copapy.runtime.native.set_watchdog)."},
    {"sha256", (PyCFunction)runner_sha256, METH_O,
     "sha256(data)\n--\n\nThe runner's SHA-256 digest of a buffer (test hook)."},
    {"hmac_sha256", (PyCFunction)runner_hmac_sha256, METH_VARARGS,
     "hmac_sha256(key, msg)\n--\n\nThe runner's HMAC-SHA256 (test hook)."},
    {"job_clock", (PyCFunction)runner_job_clock, METH_NOARGS,
     "job_clock()\n--\n\nThe clock that times jobs (measure=True): (name, counts per second), "
     "name 'tsc' or 'cntvct' (a cycle counter calibrated against CLOCK_MONOTONIC) or "
     "'monotonic' (clock_gettime; also with COPAPY_CLOCK=monotonic)."},
    {"job_clock_ns", (PyCFunction)runner_job_clock_ns, METH_NOARGS,
     "job_clock_ns()\n--\n\nA reading of that clock in ns (test hook)."},
    {"batch", (PyCFunction)(void (*)(void))runner_batch, METH_VARARGS | METH_KEYWORDS,
     "batch(program, tick_ns, steps, sample_ticks, writes, params, records, finals)\n--\n\n"
     "Run one scenario per row of params (batch.c); returns (series, finals, done, fault)."},
    {"noop", (PyCFunction)runner_noop, METH_NOARGS,
     "noop()\n--\n\nDo nothing (baseline for call-overhead benchmarks)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef runner_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "copapy._runner",
    .m_doc = "copapy runner core: loads program images and runs their tasks.",
    .m_size = -1,
    .m_methods = runner_methods,
};

PyMODINIT_FUNC PyInit__runner(void)
{
    if (PyType_Ready(&ProgramType) < 0 || PyType_Ready(&SchedulerType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&runner_module);
    if (m == NULL) {
        return NULL;
    }
    if (ImageError == NULL) {
        ImageError = PyErr_NewExceptionWithDoc(
            "copapy._runner.ImageError",
            "A program image was rejected; .code, .name and .detail tell why "
            "(docs/image.md, Load errors).",
            PyExc_ValueError, NULL);
        if (ImageError == NULL) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (ProgramFault == NULL) {
        PyObject *errors = PyImport_ImportModule("copapy.runtime.errors");
        if (errors == NULL) {
            Py_DECREF(m);
            return NULL;
        }
        ProgramFault = PyObject_GetAttrString(errors, "ProgramFault");
        Py_DECREF(errors);
        if (ProgramFault == NULL) {
            Py_DECREF(m);
            return NULL;
        }
    }
    /* the fault handlers go in now, after anything (pytest's faulthandler, ASan) that was
     * installed at start-up, so those stay the handlers for faults outside guarded code */
    if (cp_posix_guard_install() != 0) {
        Py_DECREF(m);
        PyErr_SetString(PyExc_OSError, "cannot install the fault handlers (sigaction)");
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "ImageError", ImageError) < 0 ||
        PyModule_AddObjectRef(m, "ProgramFault", ProgramFault) < 0 ||
        PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType) < 0 ||
        PyModule_AddObjectRef(m, "Scheduler", (PyObject *)&SchedulerType) < 0 ||
        PyModule_AddIntConstant(m, "ARCH", (long)host_arch()) < 0 ||
        PyModule_AddStringConstant(m, "ARCH_NAME", cp_arch_name(host_arch())) < 0 ||
        PyModule_AddIntConstant(m, "ABI_VERSION", (long)CP_RUNNER_ABI_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "FORMAT_VERSION", (long)CP_IMAGE_FORMAT_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
