/* copapy._dispatch: the call slot of @cp.jit functions, in C.
 *
 * A jitted function's most recent signature has a fast plan: a callable
 * invoke(args, inputs, outputs) -> tuple (Program.invoke of the native runner, or an
 * emulator's) that raises TypeError before it writes anything when the arguments do not fit
 * the plan exactly. Dispatcher.__call__ tries that plan first and falls back to the Python
 * method _dispatch(*args, **kwargs) (signature look-up, compile) on TypeError or keywords.
 * Doing this in C instead of a Python __call__ is what makes a trivial jitted call as cheap
 * as numba's (benchmarks/bench_term.py, call overheads). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *invoke;  /* callable(args, inputs, outputs) -> tuple, or NULL: no fast plan */
    PyObject *inputs;
    PyObject *outputs;
    PyObject *post;    /* callable(tuple) -> result, or NULL */
    int unwrap;        /* without post: return the tuple's only item */
    Py_ssize_t hits;   /* calls answered by the fast plan */
} Dispatcher;

static PyObject *dispatch_name;

static int Dispatcher_traverse(PyObject *op, visitproc visit, void *arg)
{
    Dispatcher *self = (Dispatcher *)op;
    Py_VISIT(self->invoke);
    Py_VISIT(self->inputs);
    Py_VISIT(self->outputs);
    Py_VISIT(self->post);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int Dispatcher_clear(PyObject *op)
{
    Dispatcher *self = (Dispatcher *)op;
    Py_CLEAR(self->invoke);
    Py_CLEAR(self->inputs);
    Py_CLEAR(self->outputs);
    Py_CLEAR(self->post);
    return 0;
}

static void Dispatcher_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    Dispatcher_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

static PyObject *fast_call(Dispatcher *self, PyObject *args)
{
    /* the fields may be replaced while post runs Python code: hold what this call uses */
    PyObject *invoke = Py_NewRef(self->invoke), *inputs = Py_NewRef(self->inputs),
             *outputs = Py_NewRef(self->outputs), *post = Py_XNewRef(self->post);
    int unwrap = self->unwrap;
    PyObject *argv[3] = {args, inputs, outputs};
    PyObject *tuple = PyObject_Vectorcall(invoke, argv, 3, NULL);
    PyObject *result = NULL;
    if (tuple != NULL) {
        self->hits++;
        if (post != NULL) {
            result = PyObject_CallOneArg(post, tuple);
        } else if (unwrap && PyTuple_Check(tuple) && PyTuple_GET_SIZE(tuple) == 1) {
            result = Py_NewRef(PyTuple_GET_ITEM(tuple, 0));
        } else {
            result = Py_NewRef(tuple);
        }
        Py_DECREF(tuple);
    }
    Py_DECREF(invoke);
    Py_DECREF(inputs);
    Py_DECREF(outputs);
    Py_XDECREF(post);
    return result;
}

static PyObject *Dispatcher_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    Dispatcher *self = (Dispatcher *)op;
    if (self->invoke != NULL && (kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0)) {
        PyObject *result = fast_call(self, args);
        if (result != NULL || !PyErr_ExceptionMatches(PyExc_TypeError)) {
            return result;
        }
        PyErr_Clear(); /* another signature: the general path finds or compiles it */
    }
    PyObject *slow = PyObject_GetAttr(op, dispatch_name);
    if (slow == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_Call(slow, args, kwargs);
    Py_DECREF(slow);
    return result;
}

static PyObject *Dispatcher_set_fast(PyObject *op, PyObject *args)
{
    Dispatcher *self = (Dispatcher *)op;
    PyObject *invoke, *inputs, *outputs, *post;
    int unwrap;
    if (!PyArg_ParseTuple(args, "OO!O!Op:_set_fast", &invoke, &PyTuple_Type, &inputs,
                          &PyTuple_Type, &outputs, &post, &unwrap)) {
        return NULL;
    }
    if (!PyCallable_Check(invoke) || (post != Py_None && !PyCallable_Check(post))) {
        PyErr_SetString(PyExc_TypeError, "_set_fast: invoke and post must be callable");
        return NULL;
    }
    Py_XSETREF(self->invoke, Py_NewRef(invoke));
    Py_XSETREF(self->inputs, Py_NewRef(inputs));
    Py_XSETREF(self->outputs, Py_NewRef(outputs));
    Py_XSETREF(self->post, post == Py_None ? NULL : Py_NewRef(post));
    self->unwrap = unwrap;
    Py_RETURN_NONE;
}

static PyObject *Dispatcher_clear_fast(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    Dispatcher *self = (Dispatcher *)op;
    Py_CLEAR(self->invoke);
    Py_CLEAR(self->inputs);
    Py_CLEAR(self->outputs);
    Py_CLEAR(self->post);
    Py_RETURN_NONE;
}

static PyMethodDef Dispatcher_methods[] = {
    {"_set_fast", Dispatcher_set_fast, METH_VARARGS,
     "_set_fast(invoke, inputs, outputs, post, unwrap): the plan tried first on every call"},
    {"_clear_fast", Dispatcher_clear_fast, METH_NOARGS, "forget the fast plan"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Dispatcher_members[] = {
    {"_fast_hits", T_PYSSIZET, offsetof(Dispatcher, hits), 0,
     "calls answered by the fast plan"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Dispatcher_slots[] = {
    {Py_tp_doc, "Base of jitted functions: tries the fast plan, else calls _dispatch."},
    {Py_tp_call, Dispatcher_call},
    {Py_tp_traverse, Dispatcher_traverse},
    {Py_tp_clear, Dispatcher_clear},
    {Py_tp_dealloc, Dispatcher_dealloc},
    {Py_tp_methods, Dispatcher_methods},
    {Py_tp_members, Dispatcher_members},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec Dispatcher_spec = {
    .name = "copapy._dispatch.Dispatcher",
    .basicsize = sizeof(Dispatcher),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Dispatcher_slots,
};

static struct PyModuleDef dispatch_module = {
    PyModuleDef_HEAD_INIT, "copapy._dispatch",
    "The C call slot of @cp.jit functions (fast plan first, Python dispatch otherwise).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dispatch(void)
{
    dispatch_name = PyUnicode_InternFromString("_dispatch");
    if (dispatch_name == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&dispatch_module);
    if (module == NULL) {
        return NULL;
    }
    PyObject *type = PyType_FromSpec(&Dispatcher_spec);
    if (type == NULL || PyModule_AddObject(module, "Dispatcher", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
