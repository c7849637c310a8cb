/* copapy.graph._sweep: the loops of the gradient sweep of graph/grad.py in C.
 *
 * cp.grad walks every node the output depends on twice: forwards to find the nodes that
 * depend on a value being differentiated for, backwards to hand each node's gradient to its
 * operands. In Python those loops cost more than building the gradient's nodes. The nodes
 * themselves are still built by build.make (one place for simplification and hash-consing);
 * what the sweep does not know (every rule but those of scalar +, -, * and negation) goes
 * back to Python through a callback, node by node, in the same order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_args, *s_op, *s_shape, *s_dtype, *s_is_float;

PyDoc_STRVAR(float_dependents_doc,
             "float_dependents(order, xs)\n\n"
             "The float nodes of ``order`` (operands before users) that are an x or depend on\n"
             "one: the operands a gradient flows to.");

static PyObject *float_dependents(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 2 || !PyList_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "float_dependents(order: list, xs)");
        return NULL;
    }
    PyObject *order = argv[0];
    PyObject *relevant = PySet_New(argv[1]);
    PyObject *wanted = PySet_New(NULL);
    if (relevant == NULL || wanted == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order); i++) {
        PyObject *node = PyList_GET_ITEM(order, i);
        int in = PySet_Contains(relevant, node);
        if (in < 0) goto fail;
        if (!in) {
            PyObject *args = PyObject_GetAttr(node, s_args);
            if (args == NULL) goto fail;
            if (!PyTuple_Check(args)) {
                Py_DECREF(args);
                PyErr_SetString(PyExc_TypeError, "node.args must be a tuple");
                goto fail;
            }
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(args) && !in; k++) {
                in = PySet_Contains(relevant, PyTuple_GET_ITEM(args, k));
                if (in < 0) {
                    Py_DECREF(args);
                    goto fail;
                }
            }
            Py_DECREF(args);
            if (!in) continue;
            if (PySet_Add(relevant, node) < 0) goto fail;
        }
        PyObject *dtype = PyObject_GetAttr(node, s_dtype);
        if (dtype == NULL) goto fail;
        PyObject *is_float = PyObject_GetAttr(dtype, s_is_float);
        Py_DECREF(dtype);
        if (is_float == NULL) goto fail;
        int yes = PyObject_IsTrue(is_float);
        Py_DECREF(is_float);
        if (yes < 0 || (yes && PySet_Add(wanted, node) < 0)) goto fail;
    }
    Py_DECREF(relevant);
    return wanted;
fail:
    Py_XDECREF(relevant);
    Py_XDECREF(wanted);
    return NULL;
}

/* the fast operations, in the order sweep's `specs` tuple gives their registry rows */
enum { OP_ADD, OP_SUB, OP_MUL, OP_NEG, N_SPECS };
static const char *const fast_names[N_SPECS] = {"add", "sub", "mul", "neg"};
static PyObject *fast_ops[N_SPECS];

/* which fast operation `op` is, or -1 */
static int fast_op(PyObject *op) {
    for (int k = 0; k < N_SPECS; k++) {
        if (op == fast_ops[k]) return k;
    }
    if (!PyUnicode_Check(op)) return -1;
    for (int k = 0; k < N_SPECS; k++) {
        if (PyUnicode_Compare(op, fast_ops[k]) == 0) return k;
    }
    return -1;
}

typedef struct {
    PyObject *adjoint, *wanted, *make, *specs;
} Sweep;

/* make(spec, operands): a new reference, NULL on error */
static PyObject *build(const Sweep *s, int op, PyObject *a, PyObject *b) {
    PyObject *operands = b == NULL ? PyTuple_Pack(1, a) : PyTuple_Pack(2, a, b);
    if (operands == NULL) return NULL;
    PyObject *call[2] = {PyTuple_GET_ITEM(s->specs, op), operands};
    PyObject *node = PyObject_Vectorcall(s->make, call, 2, NULL);
    Py_DECREF(operands);
    return node;
}

/* adds contribution c (stolen) to the gradient of arg: 0, or -1 on error */
static int accumulate(const Sweep *s, PyObject *arg, PyObject *c) {
    if (c == NULL) return -1;
    PyObject *previous = PyDict_GetItemWithError(s->adjoint, arg);
    if (previous != NULL) {
        PyObject *sum = build(s, OP_ADD, previous, c);
        Py_DECREF(c);
        if (sum == NULL) return -1;
        c = sum;
    } else if (PyErr_Occurred()) {
        Py_DECREF(c);
        return -1;
    }
    int r = PyDict_SetItem(s->adjoint, arg, c);
    Py_DECREF(c);
    return r;
}

/* 1 if node is a scalar whose gradient g is a scalar of the same type, 0 if not, -1 */
static int same_scalar(PyObject *node, PyObject *g) {
    int r = -1;
    PyObject *shape = PyObject_GetAttr(node, s_shape), *gshape = NULL;
    PyObject *dtype = NULL, *gdtype = NULL;
    if (shape == NULL || (gshape = PyObject_GetAttr(g, s_shape)) == NULL) goto done;
    if (!PyTuple_Check(shape) || !PyTuple_Check(gshape)) {
        PyErr_SetString(PyExc_TypeError, "node.shape must be a tuple");
        goto done;
    }
    r = 0;
    if (PyTuple_GET_SIZE(shape) || PyTuple_GET_SIZE(gshape)) goto done;
    r = -1;
    if ((dtype = PyObject_GetAttr(node, s_dtype)) == NULL) goto done;
    if ((gdtype = PyObject_GetAttr(g, s_dtype)) == NULL) goto done;
    r = dtype == gdtype;
done:
    Py_XDECREF(shape);
    Py_XDECREF(gshape);
    Py_XDECREF(dtype);
    Py_XDECREF(gdtype);
    return r;
}

/* the gradient g of a scalar +, -, * or negation handed to its wanted operands */
static int arithmetic(const Sweep *s, int op, PyObject *args, PyObject *g) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n != (op == OP_NEG ? 1 : 2)) {
        PyErr_SetString(PyExc_ValueError, "an arithmetic node with the wrong operand count");
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *arg = PyTuple_GET_ITEM(args, k);
        int want = PySet_Contains(s->wanted, arg);
        if (want < 0) return -1;
        if (!want) continue;
        PyObject *c;
        if (op == OP_MUL) {
            c = build(s, OP_MUL, g, PyTuple_GET_ITEM(args, 1 - k));
        } else if (op == OP_ADD || (op == OP_SUB && k == 0)) {
            Py_INCREF(g);
            c = g;
        } else {
            c = build(s, OP_NEG, g, NULL);
        }
        if (accumulate(s, arg, c) < 0) return -1;
    }
    return 0;
}

PyDoc_STRVAR(sweep_doc,
             "sweep(order, adjoint, wanted, make, specs, other)\n\n"
             "Hands each node's gradient (``adjoint``, filled in place) to its operands in\n"
             "``wanted``, users before operands: scalar +, -, * and negation of one type\n"
             "through ``make(spec, operands)`` (``specs``: the add, sub, mul and neg rows),\n"
             "every other node through ``other(node, g)``.");

static PyObject *sweep(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 6 || !PyList_Check(argv[0]) || !PyDict_Check(argv[1]) ||
        !PyAnySet_Check(argv[2]) || !PyTuple_Check(argv[4]) ||
        PyTuple_GET_SIZE(argv[4]) != N_SPECS) {
        PyErr_SetString(PyExc_TypeError,
                        "sweep(order: list, adjoint: dict, wanted: set, make, specs: tuple of 4, "
                        "other)");
        return NULL;
    }
    PyObject *order = argv[0], *other = argv[5];
    Sweep s = {argv[1], argv[2], argv[3], argv[4]};
    for (Py_ssize_t i = PyList_GET_SIZE(order) - 1; i >= 0; i--) {
        PyObject *node = PyList_GET_ITEM(order, i);
        PyObject *g = PyDict_GetItemWithError(s.adjoint, node);
        if (g == NULL) {
            if (PyErr_Occurred()) return NULL;
            continue;
        }
        Py_INCREF(g); /* the dict may drop it while the operands' gradients are set */
        PyObject *args = PyObject_GetAttr(node, s_args);
        PyObject *op = args == NULL ? NULL : PyObject_GetAttr(node, s_op);
        int r = -1;
        if (op == NULL) goto next;
        if (!PyTuple_Check(args)) {
            PyErr_SetString(PyExc_TypeError, "node.args must be a tuple");
            goto next;
        }
        r = 0;
        if (PyTuple_GET_SIZE(args) == 0) goto next;
        int k = fast_op(op);
        if (k >= 0) r = same_scalar(node, g);
        if (r > 0) {
            r = arithmetic(&s, k, args, g);
        } else if (r == 0) {
            PyObject *call[2] = {node, g};
            PyObject *done = PyObject_Vectorcall(other, call, 2, NULL);
            r = done == NULL ? -1 : 0;
            Py_XDECREF(done);
        }
    next:
        Py_XDECREF(args);
        Py_XDECREF(op);
        Py_DECREF(g);
        if (r < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"float_dependents", (PyCFunction)(void (*)(void))float_dependents, METH_FASTCALL,
     float_dependents_doc},
    {"sweep", (PyCFunction)(void (*)(void))sweep, METH_FASTCALL, sweep_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.graph._sweep",
    "The loops of the gradient sweep of graph/grad.py (see _sweep.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sweep(void) {
    s_args = PyUnicode_InternFromString("args");
    s_op = PyUnicode_InternFromString("op");
    s_shape = PyUnicode_InternFromString("shape");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_is_float = PyUnicode_InternFromString("is_float");
    if (!s_args || !s_op || !s_shape || !s_dtype || !s_is_float) return NULL;
    for (int k = 0; k < N_SPECS; k++) {
        fast_ops[k] = PyUnicode_InternFromString(fast_names[k]);
        if (fast_ops[k] == NULL) return NULL;
    }
    return PyModule_Create(&module_def);
}
