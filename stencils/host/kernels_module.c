/* copapy._kernels: the deterministic math kernels built for the host, so that constant folding
 * and the test oracle compute exactly what the stencils compute on every target. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "cp_math.h"

typedef float (*f32_1)(float);
typedef double (*f64_1)(double);
typedef float (*f32_2)(float, float);
typedef double (*f64_2)(double, double);

typedef struct kernel {
    const char *name;
    int arity;
    void *f32;
    void *f64;
} kernel;

static const kernel KERNELS[] = {
    {"sqrt", 1, (void *)cp_sqrtf, (void *)cp_sqrt},
    {"sin", 1, (void *)cp_sinf, (void *)cp_sin},
    {"cos", 1, (void *)cp_cosf, (void *)cp_cos},
    {"tan", 1, (void *)cp_tanf, (void *)cp_tan},
    {"asin", 1, (void *)cp_asinf, (void *)cp_asin},
    {"acos", 1, (void *)cp_acosf, (void *)cp_acos},
    {"atan", 1, (void *)cp_atanf, (void *)cp_atan},
    {"exp", 1, (void *)cp_expf, (void *)cp_exp},
    {"log", 1, (void *)cp_logf, (void *)cp_log},
    {"tanh", 1, (void *)cp_tanhf, (void *)cp_tanh},
    {"floor", 1, (void *)cp_floorf, (void *)cp_floor},
    {"ceil", 1, (void *)cp_ceilf, (void *)cp_ceil},
    {"round", 1, (void *)cp_roundf, (void *)cp_round},
    {"trunc", 1, (void *)cp_truncf, (void *)cp_trunc},
    {"atan2", 2, (void *)cp_atan2f, (void *)cp_atan2},
    {"pow", 2, (void *)cp_powf, (void *)cp_pow},
    {"fmod", 2, (void *)cp_fmodf, (void *)cp_fmod},
};

static const kernel *find_kernel(const char *name)
{
    for (size_t i = 0; i < sizeof KERNELS / sizeof KERNELS[0]; i++) {
        if (strcmp(KERNELS[i].name, name) == 0) {
            return &KERNELS[i];
        }
    }
    PyErr_Format(PyExc_KeyError, "no math kernel named %s", name);
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
    const kernel *k = find_kernel(name);
    if (k == NULL) {
        return NULL;
    }
    if (nargs != 2 + k->arity) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments", name, k->arity);
        return NULL;
    }
    int is_f64 = PyObject_IsTrue(args[1]);
    double x = PyFloat_AsDouble(args[2]);
    double y = k->arity == 2 ? PyFloat_AsDouble(args[3]) : 0.0;
    if (PyErr_Occurred()) {
        return NULL;
    }
    double r;
    if (is_f64) {
        r = k->arity == 1 ? ((f64_1)k->f64)(x) : ((f64_2)k->f64)(x, y);
    } else {
        r = k->arity == 1 ? ((f32_1)k->f32)((float)x) : ((f32_2)k->f32)((float)x, (float)y);
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
    const kernel *k = find_kernel(name);
    if (k == NULL) {
        return NULL;
    }
    if (nargs != 3 + k->arity) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arrays", name, k->arity);
        return NULL;
    }
    int is_f64 = PyObject_IsTrue(args[1]);
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
            out[i] = b ? ((f64_2)k->f64)(a[i], b[i]) : ((f64_1)k->f64)(a[i]);
        }
    } else {
        float *out = views[0].buf;
        const float *a = views[1].buf;
        const float *b = k->arity == 2 ? views[2].buf : NULL;
        for (size_t i = 0; i < n; i++) {
            out[i] = b ? ((f32_2)k->f32)(a[i], b[i]) : ((f32_1)k->f32)(a[i]);
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
