/* copapy._kernels: the float element operations of cp_elements.h (the deterministic math
 * kernels among them) built for the host, so that constant folding and the test oracle compute
 * exactly what the stencils compute on every target. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "cp_elements.h"
#include "cp_math.h"
#include "cp_ops.h"
#include "cp_stencil.h"

typedef float (*f32_1)(float);
typedef double (*f64_1)(double);
typedef float (*f32_2)(float, float);
typedef double (*f64_2)(double, double);

/* One host function per float line of cp_elements.h (operand and result of the same float
 * type): the element expression, compiled for this machine. SAME_<TI>_<TO>(M, ...) is
 * M(T, ...) for those lines and nothing for the others (integer operations, comparisons,
 * conversions). */
#define SAME_f32_f32(M, ...) M(f32, __VA_ARGS__)
#define SAME_f64_f64(M, ...) M(f64, __VA_ARGS__)
#define SAME_i32_i32(M, ...)
#define SAME_i32_bool(M, ...)
#define SAME_f32_bool(M, ...)
#define SAME_f64_bool(M, ...)
#define SAME_f32_f64(M, ...)
#define SAME_f64_f32(M, ...)
#define SAME_i32_f32(M, ...)
#define SAME_i32_f64(M, ...)
#define SAME_f32_i32(M, ...)
#define SAME_f64_i32(M, ...)

#define HOST_FN1(T, op, EXPR)                                                                  \
    static CT_##T host_##op##_##T(CT_##T a) { return (CT_##T)(EXPR); }
#define HOST_FN2(T, op, EXPR)                                                                  \
    static CT_##T host_##op##_##T(CT_##T a, CT_##T b) { return (CT_##T)(EXPR); }
#define HOST_LINE(arity, op, TI, TO, kind, EXPR) SAME_##TI##_##TO(HOST_FN##arity, op, EXPR)

CP_ELEMENTS(HOST_LINE)

typedef struct kernel {
    const char *name;
    int is_f64;
    int arity;
    void (*fn)(void); /* f32_1, f32_2, f64_1 or f64_2 by is_f64 and arity */
} kernel;

#define IS_F64_f32 0
#define IS_F64_f64 1
#define ENTRY(T, op, arity) {#op, IS_F64_##T, arity, (void (*)(void))host_##op##_##T},
#define ENTRY_LINE(arity, op, TI, TO, kind, EXPR) SAME_##TI##_##TO(ENTRY, op, arity)

static const kernel KERNELS[] = {CP_ELEMENTS(ENTRY_LINE)};

static const kernel *find_kernel(const char *name, int is_f64)
{
    for (size_t i = 0; i < sizeof KERNELS / sizeof KERNELS[0]; i++) {
        if (KERNELS[i].is_f64 == is_f64 && strcmp(KERNELS[i].name, name) == 0) {
            return &KERNELS[i];
        }
    }
    PyErr_Format(PyExc_KeyError, "no float%d element operation named %s", is_f64 ? 64 : 32,
                 name);
    return NULL;
}

/* call(name, is_f64, *args) -> float: one evaluation. */
static PyObject *kernels_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 3) {
        PyErr_SetString(PyExc_TypeError, "call(name, is_f64, *args)");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (name == NULL) {
        return NULL;
    }
    int is_f64 = PyObject_IsTrue(args[1]);
    if (is_f64 < 0) {
        return NULL;
    }
    const kernel *k = find_kernel(name, is_f64);
    if (k == NULL) {
        return NULL;
    }
    if (nargs != 2 + k->arity) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments", name, k->arity);
        return NULL;
    }
    double x = PyFloat_AsDouble(args[2]);
    double y = k->arity == 2 ? PyFloat_AsDouble(args[3]) : 0.0;
    if (PyErr_Occurred()) {
        return NULL;
    }
    double r;
    if (is_f64) {
        r = k->arity == 1 ? ((f64_1)k->fn)(x) : ((f64_2)k->fn)(x, y);
    } else {
        r = k->arity == 1 ? ((f32_1)k->fn)((float)x) : ((f32_2)k->fn)((float)x, (float)y);
    }
    return PyFloat_FromDouble(r);
}

/* apply(name, is_f64, out, a[, b]): element-wise over contiguous buffers of float32/float64. */
static PyObject *kernels_apply(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 4 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "apply(name, is_f64, out, a[, b])");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (name == NULL) {
        return NULL;
    }
    int is_f64 = PyObject_IsTrue(args[1]);
    if (is_f64 < 0) {
        return NULL;
    }
    const kernel *k = find_kernel(name, is_f64);
    if (k == NULL) {
        return NULL;
    }
    if (nargs != 3 + k->arity) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arrays", name, k->arity);
        return NULL;
    }
    size_t elem = is_f64 ? sizeof(double) : sizeof(float);
    Py_buffer views[3];
    int got = 0;
    PyObject *result = NULL;
    for (int i = 0; i < 1 + k->arity; i++) {
        int flags = i == 0 ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS : PyBUF_C_CONTIGUOUS;
        if (PyObject_GetBuffer(args[2 + i], &views[i], flags) < 0) {
            goto done;
        }
        got++;
        if (views[i].len != views[0].len || (size_t)views[i].len % elem != 0) {
            PyErr_SetString(PyExc_ValueError, "arrays must have the same length and dtype");
            goto done;
        }
    }
    size_t n = (size_t)views[0].len / elem;
    if (is_f64) {
        double *out = views[0].buf;
        const double *a = views[1].buf;
        const double *b = k->arity == 2 ? views[2].buf : NULL;
        for (size_t i = 0; i < n; i++) {
            out[i] = b ? ((f64_2)k->fn)(a[i], b[i]) : ((f64_1)k->fn)(a[i]);
        }
    } else {
        float *out = views[0].buf;
        const float *a = views[1].buf;
        const float *b = k->arity == 2 ? views[2].buf : NULL;
        for (size_t i = 0; i < n; i++) {
            out[i] = b ? ((f32_2)k->fn)(a[i], b[i]) : ((f32_1)k->fn)(a[i]);
        }
    }
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < got; i++) {
        PyBuffer_Release(&views[i]);
    }
    return result;
}

static PyMethodDef METHODS[] = {
    {"call", (PyCFunction)(void (*)(void))kernels_call, METH_FASTCALL, "call(name, is_f64, *args)"},
    {"apply", (PyCFunction)(void (*)(void))kernels_apply, METH_FASTCALL,
     "apply(name, is_f64, out, a[, b])"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "copapy._kernels",
                                    "deterministic math kernels built for the host", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kernels(void)
{
    return PyModule_Create(&MODULE);
}
