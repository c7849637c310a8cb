/* Program.invoke: one jitted call (write the arguments, run, read the results) in a single C
 * call. Holding the GIL throughout makes the call atomic for other Python threads, and there
 * is no per-argument Python work: this is the fast path of @cp.jit. Included by module.c. */

/* Plan kinds are contract.h's CP_PLAN_KIND_TABLE (CP_PLAN_SCALAR 0, COPY 1, VIEW 2, IN_PLACE 3).
 * Argument plan entries: (kind, offset, dtype, nbytes[, shape[, pointer slot]]); kind 0 scalar,
 * 1 buffer (its shape tuple must match the argument's exactly: the signature decides, never
 * the byte count alone), 2 unused, 3 buffer read in place: checked like kind 1, then the
 * 8-byte pointer slot at `pointer slot` gets the buffer's address relative to the slot
 * (stencils/fused.c) instead of the bytes being copied to `offset`; after the run, whatever
 * happened, the slot points at `offset` again (the program's own copy), so no later run can
 * read the caller's buffer. A buffer not aligned to its element size is copied as for kind 1.
 * The caller's buffer stays exported (PyObject_GetBuffer) for the whole call, which holds the
 * GIL: it cannot be freed or resized meanwhile. invoke_copies counts the buffers copied.
 * Result plan entries: (kind, offset, dtype, nbytes[, shape, pointer slot[, maker]]); kind 0
 * scalar, 1 bytearray copy, 2 None (the caller returns its own view), 3 a new bytearray that
 * the program writes through the pointer slot (the result's only writer is a fused loop's
 * store): no copy out of the program; restored like an argument's slot after the run. A
 * maker (callable, args) of a kind 1 or 3 entry makes the result instead of the bytearray:
 * numpy.empty(shape, dtype), so the caller gets its array from this call and runs no Python
 * code after it (np.frombuffer of a bytearray cost ~200 ns a call, more than the run of a
 * small program); the pointer slot of a kind 1 entry is not read. A kind 2 entry's 7th item
 * is the result itself (the caller's view of the program's memory) instead of None. A mismatching
 * argument raises TypeError before anything is written, so the caller can fall back to its
 * general path. Every entry's bytes must lie inside the data region (a scalar's: its type's
 * size, whatever nbytes says); the plan last parsed is kept (struct invoke_plan below).
 * A buffer argument that is an instance of a subclass of numpy.ndarray raises that TypeError
 * too: its buffer is not always what it means (a masked array's holds the masked elements,
 * a matrix's operators differ), so the general path decides (copapy.jit refuses some, passes
 * the others as their base ndarray). */

#if defined(__linux__)
#include <sys/mman.h>
#endif

/* A result buffer of 4 MiB or more is backed by transparent huge pages where the kernel
 * offers them on request (Linux, THP mode "madvise"), as NumPy does for its arrays: the fused
 * loop's first store into each 4 KiB page was a page fault, 1.13x NumPy's time at 1e8
 * elements (issue 31; benchmarks/bench_slices.py). Advice only: nothing changes otherwise. */
static void advise_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (n < ((size_t)4 << 20)) {
        return;
    }
    uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(huge - 1);
    if (end > start) {
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
#else
    (void)p;
    (void)n;
#endif
}

static PyObject *read_value(const uint8_t *p, uint8_t dtype)
{
    if (dtype == CP_DT_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return PyFloat_FromDouble((double)f);
    }
    if (dtype == CP_DT_F64) {
        double d;
        memcpy(&d, p, sizeof d);
        return PyFloat_FromDouble(d);
    }
    int32_t i;
    memcpy(&i, p, sizeof i);
    return dtype == CP_DT_BOOL ? PyBool_FromLong(i != 0) : PyLong_FromLong((long)i);
}

static int write_value(uint8_t *p, uint8_t dtype, PyObject *arg)
{
    if (dtype == CP_DT_F32 || dtype == CP_DT_F64) {
        double d = PyFloat_AsDouble(arg);
        if (d == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (dtype == CP_DT_F32) {
            float f = (float)d;
            memcpy(p, &f, sizeof f);
        } else {
            memcpy(p, &d, sizeof d);
        }
        return 0;
    }
    int32_t i;
    if (dtype == CP_DT_BOOL) {
        int truth = PyObject_IsTrue(arg);
        if (truth < 0) {
            return -1;
        }
        i = truth;
    } else {
        long v = PyLong_AsLong(arg);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "%ld does not fit in an int32 argument", v);
            return -1;
        }
        i = (int32_t)v;
    }
    memcpy(p, &i, sizeof i);
    return 0;
}

static int plan_entry(PyObject *plan, Py_ssize_t i, long out[4])
{
    PyObject *e = PyTuple_GET_ITEM(plan, i);
    if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 4 || PyTuple_GET_SIZE(e) > 7) {
        PyErr_SetString(PyExc_ValueError, "invoke: plan entries are 4- to 7-tuples");
        return -1;
    }
    for (int k = 0; k < 4; k++) {
        out[k] = PyLong_AsLong(PyTuple_GET_ITEM(e, k));
        if (out[k] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

static int buffer_matches(const Py_buffer *view, long dtype, long nbytes)
{
    if (view->len != nbytes || view->format == NULL) {
        return 0;
    }
    const char *f = view->format;
    if (*f == '<' || *f == '=' || *f == '@') {
        f++;
    }
    if (f[0] == '\0' || f[1] != '\0') {
        return 0;
    }
    switch (dtype) {
    case CP_DT_F32:
        return f[0] == 'f';
    case CP_DT_F64:
        return f[0] == 'd';
    case CP_DT_I32:
        return (f[0] == 'i' && view->itemsize == 4) || (f[0] == 'l' && view->itemsize == 4);
    default:
        return 0;
    }
}

/* 1 if the buffer's shape is the plan entry's shape tuple (absent: any shape). */
static int shape_matches(const Py_buffer *view, PyObject *entry)
{
    if (PyTuple_GET_SIZE(entry) < 5) {
        return 1;
    }
    PyObject *shape = PyTuple_GET_ITEM(entry, 4);
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != view->ndim) {
        return 0;
    }
    for (Py_ssize_t d = 0; d < view->ndim; d++) {
        long want = PyLong_AsLong(PyTuple_GET_ITEM(shape, d));
        if (want == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (view->shape == NULL ? view->ndim != 1 || want * view->itemsize != view->len
                                : view->shape[d] != (Py_ssize_t)want) {
            return 0;
        }
    }
    return 1;
}

/* The pointer slot of an in-place entry (kind 3), inside the data region and 8-aligned
 * relative to it (the compiler aligns it); -1 with an exception otherwise. */
static long pointer_slot(PyObject *entry, uint32_t data_size)
{
    long slot = -1;
    if (PyTuple_GET_SIZE(entry) >= 6) {
        slot = PyLong_AsLong(PyTuple_GET_ITEM(entry, 5));
        if (slot == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    if (slot < 0 || slot % 8 != 0 || (uint64_t)slot + 8 > data_size) {
        PyErr_SetString(PyExc_ValueError, "invoke: pointer slot outside the data region");
        return -1;
    }
    return slot;
}

/* The offset a pointer slot holds to designate `target` (addresses relative to the slot). */
static void set_pointer(uint8_t *slot, const void *target)
{
    int64_t rel = (int64_t)((uintptr_t)target - (uintptr_t)slot);
    memcpy(slot, &rel, sizeof rel);
}

/* numpy.ndarray, looked up in sys.modules the first time a buffer argument comes and held
 * from then on (NULL until then: without NumPy imported no argument is an ndarray). */
static PyTypeObject *ndarray_type;

/* 1 if arg's type is a strict subclass of numpy.ndarray, 0 if not, -1 with an exception. A
 * plain ndarray costs one comparison. */
static int is_ndarray_subclass(PyObject *arg)
{
    PyTypeObject *type = Py_TYPE(arg);
    if (type == ndarray_type) {
        return 0;
    }
    if (ndarray_type == NULL) {
        PyObject *name = PyUnicode_FromString("numpy");
        if (name == NULL) {
            return -1;
        }
        PyObject *numpy = PyImport_GetModule(name);
        Py_DECREF(name);
        if (numpy == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        PyObject *found = PyObject_GetAttrString(numpy, "ndarray");
        Py_DECREF(numpy);
        if (found == NULL) {
            return -1;
        }
        if (!PyType_Check(found)) {
            Py_DECREF(found);
            PyErr_SetString(PyExc_TypeError, "invoke: numpy.ndarray is not a type");
            return -1;
        }
        if (ndarray_type == NULL) { /* the look-up may have run Python code (a lazy import) */
            ndarray_type = (PyTypeObject *)found;
        } else {
            Py_DECREF(found);
        }
        if (type == ndarray_type) {
            return 0;
        }
    }
    return PyType_IsSubtype(type, ndarray_type);
}

/* NumPy's scalar types a jitted function takes as the Python number they hold (copapy.jit's
 * as_python_scalar: the same signature as float, int or bool; np.float64 that of a float64
 * scalar), looked up in sys.modules the
 * first time an argument is not a Python number and held from then on. Exact types only: a
 * subclass or np.longdouble goes to the general path, which decides. */
enum { NP_FLOAT, NP_INT, NP_BOOL, NP_FLOAT64 };
static const struct { const char *name; int kind; } numpy_scalar_names[] = {
    {"float16", NP_FLOAT}, {"float32", NP_FLOAT}, {"float64", NP_FLOAT64},
    {"int8", NP_INT},      {"int16", NP_INT},     {"int32", NP_INT},   {"int64", NP_INT},
    {"uint8", NP_INT},     {"uint16", NP_INT},    {"uint32", NP_INT},  {"uint64", NP_INT},
    {"bool_", NP_BOOL},
};
#define NUMPY_SCALARS (sizeof numpy_scalar_names / sizeof numpy_scalar_names[0])
static PyTypeObject *numpy_scalar_types[NUMPY_SCALARS];
static int numpy_scalars_found;

/* The NP_* kind of arg's exact NumPy scalar type, or -1 (not one, or NumPy not imported). */
static int numpy_scalar_kind(PyObject *arg)
{
    if (!numpy_scalars_found) {
        PyObject *name = PyUnicode_FromString("numpy");
        if (name == NULL) {
            PyErr_Clear();
            return -1;
        }
        PyObject *numpy = PyImport_GetModule(name);
        Py_DECREF(name);
        if (numpy == NULL) {
            PyErr_Clear();
            return -1; /* no NumPy imported: no NumPy scalar exists */
        }
        for (size_t i = 0; i < NUMPY_SCALARS; i++) {
            PyObject *found = PyObject_GetAttrString(numpy, numpy_scalar_names[i].name);
            if (found == NULL || !PyType_Check(found)) {
                PyErr_Clear();
                Py_XDECREF(found);
                continue; /* left NULL: that type takes the general path */
            }
            if (numpy_scalar_types[i] == NULL) {
                numpy_scalar_types[i] = (PyTypeObject *)found;
            } else {
                Py_DECREF(found);
            }
        }
        Py_DECREF(numpy);
        numpy_scalars_found = 1;
    }
    PyTypeObject *type = Py_TYPE(arg);
    for (size_t i = 0; i < NUMPY_SCALARS; i++) {
        if (type == numpy_scalar_types[i]) {
            return numpy_scalar_names[i].kind;
        }
    }
    return -1;
}

static int scalar_matches(PyObject *arg, long dtype)
{
    switch (dtype) {
    /* np.float64 is a float64 argument (NumPy 2 keeps its type, NEP 50), a Python float or
     * np.float32 a float32 one: each runs only the program of its own signature */
    case CP_DT_F32:
        return PyFloat_CheckExact(arg) || numpy_scalar_kind(arg) == NP_FLOAT;
    case CP_DT_F64:
        return numpy_scalar_kind(arg) == NP_FLOAT64;
    case CP_DT_I32:
        return PyLong_CheckExact(arg) || numpy_scalar_kind(arg) == NP_INT;
    case CP_DT_BOOL:
        return PyBool_Check(arg) || numpy_scalar_kind(arg) == NP_BOOL;
    default:
        return 0;
    }
}

/* A plan's numbers, parsed and checked once: a jitted function passes the same two tuples on
 * every call of a signature, so a call with the tuples of the previous one skips the parse
 * (four PyLong conversions per entry, the outputs twice). Entry: kind, offset, dtype, nbytes,
 * pointer slot (-1: none). The tuples are held, so an equal id() always means the same plan. */
struct invoke_plan {
    PyObject *inputs, *outputs;
    Py_ssize_t n, m;
    long (*in)[5];
    long (*out)[5];
    PyObject **makers; /* per result: its maker (borrowed from `outputs`), or NULL */
    uint8_t **bufs;    /* per result made before the run: where its bytes go */
};

static void invoke_plan_free(struct invoke_plan *plan)
{
    if (plan == NULL) {
        return;
    }
    Py_XDECREF(plan->inputs);
    Py_XDECREF(plan->outputs);
    PyMem_Free(plan->in);
    PyMem_Free(plan->out);
    PyMem_Free(plan->makers);
    PyMem_Free(plan->bufs);
    PyMem_Free(plan);
}

/* Parse one plan tuple's entries into out[count][5], checking them against the data region. */
static int parse_entries(PyObject *plan, Py_ssize_t count, long (*out)[5], uint32_t data_size)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (plan_entry(plan, i, out[i]) < 0) {
            return -1;
        }
        long kind = out[i][0], offset = out[i][1], dtype = out[i][2], nbytes = out[i][3];
        if (kind == CP_PLAN_SCALAR) { /* its entry says 0 bytes: its type's size is read */
            if (dtype < CP_DT_F32 || dtype > CP_DT_BOOL) { /* the jit's scalar types */
                PyErr_SetString(PyExc_ValueError, "invoke: unknown scalar type in the plan");
                return -1;
            }
            nbytes = (long)cp_dtype_size(dtype);
        }
        if (offset < 0 || nbytes < 0 || (uint64_t)offset + (uint64_t)nbytes > data_size) {
            PyErr_SetString(PyExc_ValueError, "invoke: plan outside the data region");
            return -1;
        }
        out[i][4] = -1;
        if (kind == CP_PLAN_IN_PLACE) {
            out[i][4] = pointer_slot(PyTuple_GET_ITEM(plan, i), data_size);
            if (out[i][4] < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* The results' makers: a kind 1 or 3 entry's 7th item, (callable, args tuple), or None; a
 * kind 2 entry's 7th item, the object to return. */
static int parse_makers(PyObject *plan, Py_ssize_t count, long (*out)[5], PyObject **makers)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *e = PyTuple_GET_ITEM(plan, i);
        PyObject *maker = PyTuple_GET_SIZE(e) == 7 ? PyTuple_GET_ITEM(e, 6) : Py_None;
        if (maker == Py_None) {
            continue;
        }
        if (out[i][0] == CP_PLAN_VIEW) {
            makers[i] = maker;
            continue;
        }
        if ((out[i][0] != CP_PLAN_COPY && out[i][0] != CP_PLAN_IN_PLACE) ||
            !PyTuple_Check(maker) || PyTuple_GET_SIZE(maker) != 2 ||
            !PyCallable_Check(PyTuple_GET_ITEM(maker, 0)) ||
            !PyTuple_Check(PyTuple_GET_ITEM(maker, 1))) {
            PyErr_SetString(PyExc_ValueError,
                            "invoke: a result's maker is (callable, args) of a copied result");
            return -1;
        }
        makers[i] = maker;
    }
    return 0;
}

/* A new result of nbytes: its maker's writable contiguous buffer of exactly that size, or a
 * bytearray (no maker); *buf is where its bytes go. NULL with an exception. */
static PyObject *new_result(PyObject *maker, long nbytes, uint8_t **buf)
{
    if (maker == NULL) {
        PyObject *item = PyByteArray_FromStringAndSize(NULL, nbytes);
        if (item != NULL) {
            *buf = (uint8_t *)PyByteArray_AS_STRING(item);
        }
        return item;
    }
    PyObject *item = PyObject_Call(PyTuple_GET_ITEM(maker, 0), PyTuple_GET_ITEM(maker, 1), NULL);
    if (item == NULL) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(item, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(item);
        return NULL;
    }
    /* the buffer stays where it is while this call holds the only reference to it */
    *buf = view.buf;
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (len != nbytes) {
        Py_DECREF(item);
        PyErr_SetString(PyExc_ValueError, "invoke: a result's maker made another size");
        return NULL;
    }
    return item;
}

/* The parsed plan of (inputs, outputs), taken out of the program for this call (a finalizer
 * that calls the program while this call allocates finds none there and parses its own); the
 * caller gives it back with plan_release. NULL with an exception on a bad plan. */
static struct invoke_plan *plan_take(ProgramObject *self, PyObject *inputs, PyObject *outputs)
{
    struct invoke_plan *plan = self->plan;
    self->plan = NULL;
    if (plan != NULL && plan->inputs == inputs && plan->outputs == outputs) {
        return plan;
    }
    invoke_plan_free(plan);
    Py_ssize_t n = PyTuple_GET_SIZE(inputs), m = PyTuple_GET_SIZE(outputs);
    plan = PyMem_Calloc(1, sizeof *plan);
    if (plan == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    plan->in = PyMem_Calloc((size_t)n + 1, sizeof *plan->in);
    plan->out = PyMem_Calloc((size_t)m + 1, sizeof *plan->out);
    plan->makers = PyMem_Calloc((size_t)m + 1, sizeof *plan->makers);
    plan->bufs = PyMem_Calloc((size_t)m + 1, sizeof *plan->bufs);
    if (plan->in == NULL || plan->out == NULL || plan->makers == NULL || plan->bufs == NULL) {
        invoke_plan_free(plan);
        PyErr_NoMemory();
        return NULL;
    }
    plan->n = n;
    plan->m = m;
    if (parse_entries(inputs, n, plan->in, self->prog.data_size) < 0 ||
        parse_entries(outputs, m, plan->out, self->prog.data_size) < 0 ||
        parse_makers(outputs, m, plan->out, plan->makers) < 0) {
        invoke_plan_free(plan);
        return NULL;
    }
    plan->inputs = Py_NewRef(inputs);
    plan->outputs = Py_NewRef(outputs);
    return plan;
}

static void plan_release(ProgramObject *self, struct invoke_plan *plan)
{
    if (self->plan == NULL) {
        self->plan = plan;
    } else {
        invoke_plan_free(plan);
    }
}

static PyObject *Program_invoke(ProgramObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) ||
        !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "invoke(args, inputs, outputs) takes three tuples");
        return NULL;
    }
    if (!self->prog.loaded || !self->runnable || self->prog.task_count == 0) {
        PyErr_SetString(PyExc_RuntimeError, "invoke: the program cannot run");
        return NULL;
    }
    PyObject *call_args = args[0], *inputs = args[1], *outputs = args[2];
    Py_ssize_t n = PyTuple_GET_SIZE(inputs);
    if (PyTuple_GET_SIZE(call_args) != n || n > 32) {
        PyErr_SetString(PyExc_TypeError, "invoke: wrong number of arguments");
        return NULL;
    }
    struct invoke_plan *parsed = plan_take(self, inputs, outputs);
    if (parsed == NULL) {
        return NULL;
    }
    long (*plan)[5] = parsed->in;
    uint8_t *data = cp_program_data(&self->prog);
    Py_buffer views[32];
    Py_ssize_t held = 0, pointed = 0;
    long out_slots[32][3]; /* results written in place: pointer slot, program offset, index */
    Py_ssize_t out_pointed = 0;
    PyObject *result = NULL;
    /* check everything before writing anything */
    for (Py_ssize_t i = 0; i < n; i++) {
        long kind = plan[i][0], dtype = plan[i][2], nbytes = plan[i][3];
        PyObject *arg = PyTuple_GET_ITEM(call_args, i);
        if (kind == CP_PLAN_SCALAR && !scalar_matches(arg, dtype)) {
            PyErr_SetString(PyExc_TypeError, "invoke: argument type differs from the plan");
            goto done;
        }
        if (kind == CP_PLAN_COPY || kind == CP_PLAN_IN_PLACE) {
            int subclass = is_ndarray_subclass(arg);
            if (subclass != 0) {
                if (subclass > 0) {
                    PyErr_SetString(PyExc_TypeError, "invoke: argument is an ndarray subclass");
                }
                goto done;
            }
            if (PyObject_GetBuffer(arg, &views[held], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                                          PyBUF_ND) < 0) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "invoke: argument is not a contiguous buffer");
                goto done;
            }
            held++;
            if (!buffer_matches(&views[held - 1], dtype, nbytes) ||
                !shape_matches(&views[held - 1], PyTuple_GET_ITEM(inputs, i))) {
                PyErr_SetString(PyExc_TypeError, "invoke: buffer type or shape differs");
                goto done;
            }
        }
    }
    Py_ssize_t m = parsed->m;
    result = PyTuple_New(m);
    if (result == NULL) {
        goto done;
    }
    uint8_t **bufs = parsed->bufs;
    for (Py_ssize_t i = 0; i < m; i++) {
        const long *entry = parsed->out[i];
        if (entry[0] != CP_PLAN_IN_PLACE && (entry[0] != CP_PLAN_COPY || !parsed->makers[i])) {
            continue;
        }
        PyObject *item = new_result(parsed->makers[i], entry[3], &bufs[i]);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, item);
        if (entry[0] != CP_PLAN_IN_PLACE) {
            continue; /* a copied result: its bytes are copied into it after the run */
        }
        advise_huge(bufs[i], (size_t)entry[3]);
        if (out_pointed < 32 && (uintptr_t)bufs[i] % 8 == 0) {
            out_slots[out_pointed][0] = entry[4];
            out_slots[out_pointed][1] = entry[1];
            out_slots[out_pointed][2] = (long)i;
            out_pointed++;
        }
    }
    /* the slots only now, after every allocation: an allocation may collect garbage and run
     * a finalizer that calls this program, whose own invoke restores every slot it uses */
    for (Py_ssize_t k = 0; k < out_pointed; k++) {
        set_pointer(data + out_slots[k][0], bufs[out_slots[k][2]]);
    }
    Py_ssize_t b = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long kind = plan[i][0];
        uint8_t *dst = data + plan[i][1];
        PyObject *arg = PyTuple_GET_ITEM(call_args, i);
        if (kind == CP_PLAN_SCALAR) {
            if (write_value(dst, (uint8_t)plan[i][2], arg) < 0) {
                goto done;
            }
        } else if (kind == CP_PLAN_IN_PLACE &&
                   (uintptr_t)views[b].buf % (uintptr_t)views[b].itemsize == 0) {
            set_pointer(data + plan[i][4], views[b].buf);
            pointed = n; /* from here on, the slots are restored at the end */
            b++;
        } else if (kind == CP_PLAN_COPY || kind == CP_PLAN_IN_PLACE) {
            memcpy(dst, views[b].buf, (size_t)views[b].len);
            self->invoke_copies++;
            b++;
        }
    }
    if (run_guarded(self, 0) < 0) {
        Py_CLEAR(result);
        goto done;
    }
    for (Py_ssize_t i = 0, k = 0; i < m; i++) {
        const long *entry = parsed->out[i];
        if (entry[0] == CP_PLAN_IN_PLACE && k < out_pointed && out_slots[k][2] == (long)i) {
            k++; /* written in place */
            continue;
        }
        if (entry[0] == CP_PLAN_IN_PLACE || (entry[0] == CP_PLAN_COPY && parsed->makers[i])) {
            /* made before the run: a copied result, or the program wrote its own buffer (an
             * unaligned bytearray) */
            memcpy(bufs[i], data + entry[1], (size_t)entry[3]);
            continue;
        }
        PyObject *item;
        if (entry[0] == CP_PLAN_SCALAR) {
            item = read_value(data + entry[1], (uint8_t)entry[2]);
        } else if (entry[0] == CP_PLAN_COPY) {
            item = PyByteArray_FromStringAndSize((const char *)(data + entry[1]), entry[3]);
        } else {
            item = Py_NewRef(parsed->makers[i] != NULL ? parsed->makers[i] : Py_None);
        }
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
done:
    for (Py_ssize_t k = 0; k < pointed; k++) {
        if (plan[k][4] >= 0) {
            set_pointer(data + plan[k][4], data + plan[k][1]);
        }
    }
    for (Py_ssize_t k = 0; k < out_pointed; k++) {
        set_pointer(data + out_slots[k][0], data + out_slots[k][1]);
    }
    for (Py_ssize_t k = 0; k < held; k++) {
        PyBuffer_Release(&views[k]);
    }
    plan_release(self, parsed);
    if (PyErr_Occurred()) { /* a failed argument: the results made before the run go */
        Py_CLEAR(result);
    }
    return result;
}
