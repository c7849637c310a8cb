/* copapy.graph._walk: the post-order walk of graph/traverse.py in C.
 *
 * live_nodes is called for every compile (the closure, the schedule's reordered walk) and
 * every cp.grad; in Python its loop cost about a microsecond per node. Same walk, same order:
 * one iterative depth-first walk, operands before users, leaves emitted without being pushed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_args;

typedef struct {
    PyObject *node; /* strong */
    PyObject *ops;  /* strong: the operands as a list or tuple */
    Py_ssize_t next;
} Frame;

typedef struct {
    Frame *frames;
    Py_ssize_t size, cap;
} Stack;

/* 1 if node is in stop, 0 if not, -1 on error */
static int in_stop(PyObject *stop, PyObject *node) {
    if (PyAnySet_Check(stop)) return PySet_Contains(stop, node);
    if (PyDict_Check(stop)) return PyDict_Contains(stop, node);
    return PySequence_Contains(stop, node);
}

/* a new reference to node's operands in visiting order (a list or tuple) */
static PyObject *operands(PyObject *reorder, PyObject *node, PyObject *args) {
    if (reorder != NULL) {
        PyObject *ops = PyDict_GetItemWithError(reorder, node);
        if (ops != NULL) return PySequence_Fast(ops, "reorder values must be sequences");
        if (PyErr_Occurred()) return NULL;
    }
    return PySequence_Fast(args, "node.args must be a sequence");
}

/* 1 if the node is an inner node to push (it has operands and is not in stop), 0 for a leaf;
 * *args gets a new reference to its args when 1 */
static int inner(PyObject *stop, PyObject *node, PyObject **args) {
    *args = PyObject_GetAttr(node, s_args);
    if (*args == NULL) return -1;
    int r = PyObject_IsTrue(*args);
    if (r > 0) {
        int stopped = in_stop(stop, node);
        r = stopped < 0 ? -1 : !stopped;
    }
    if (r <= 0) Py_CLEAR(*args);
    return r;
}

static int push(Stack *st, PyObject *reorder, PyObject *node, PyObject *args) {
    PyObject *ops = operands(reorder, node, args);
    if (ops == NULL) return -1;
    if (st->size == st->cap) {
        Py_ssize_t cap = st->cap ? 2 * st->cap : 64;
        Frame *frames = PyMem_Realloc(st->frames, (size_t)cap * sizeof(Frame));
        if (frames == NULL) {
            Py_DECREF(ops);
            PyErr_NoMemory();
            return -1;
        }
        st->frames = frames;
        st->cap = cap;
    }
    Py_INCREF(node);
    st->frames[st->size++] = (Frame){node, ops, 0};
    return 0;
}

PyDoc_STRVAR(live_nodes_doc,
             "live_nodes(outputs, stop, reorder)\n\n"
             "Every node the outputs depend on, operands before users; nodes in ``stop`` are\n"
             "leaves; ``reorder`` (a dict or None) gives some nodes' operand visiting order.");

static PyObject *live_nodes(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 3) {
        PyErr_SetString(PyExc_TypeError, "live_nodes takes 3 arguments");
        return NULL;
    }
    PyObject *stop = argv[1];
    PyObject *reorder = argv[2] == Py_None ? NULL : argv[2];
    if (reorder != NULL && !PyDict_Check(reorder)) {
        PyErr_SetString(PyExc_TypeError, "reorder must be a dict or None");
        return NULL;
    }
    if (reorder != NULL && PyDict_GET_SIZE(reorder) == 0) reorder = NULL;
    PyObject *roots = PySequence_Fast(argv[0], "outputs must be iterable");
    if (roots == NULL) return NULL;
    PyObject *order = PyList_New(0);
    PyObject *seen = PySet_New(NULL);
    Stack st = {NULL, 0, 0};
    if (order == NULL || seen == NULL) goto fail;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(roots); k++) {
        PyObject *root = PySequence_Fast_GET_ITEM(roots, k);
        int r = PySet_Contains(seen, root);
        if (r < 0) goto fail;
        if (r) continue;
        if (PySet_Add(seen, root) < 0) goto fail;
        PyObject *args;
        r = inner(stop, root, &args);
        if (r < 0) goto fail;
        if (!r) {
            if (PyList_Append(order, root) < 0) goto fail;
            continue;
        }
        r = push(&st, reorder, root, args);
        Py_DECREF(args);
        if (r < 0) goto fail;
        while (st.size) {
            Frame *top = &st.frames[st.size - 1];
            int descended = 0;
            while (top->next < PySequence_Fast_GET_SIZE(top->ops)) {
                PyObject *child = PySequence_Fast_GET_ITEM(top->ops, top->next);
                top->next++;
                r = PySet_Contains(seen, child);
                if (r < 0) goto fail;
                if (r) continue;
                if (PySet_Add(seen, child) < 0) goto fail;
                r = inner(stop, child, &args);
                if (r < 0) goto fail;
                if (r) {
                    r = push(&st, reorder, child, args); /* may move the frames */
                    Py_DECREF(args);
                    if (r < 0) goto fail;
                    descended = 1;
                    break;
                }
                if (PyList_Append(order, child) < 0) goto fail;
            }
            if (descended) continue;
            Frame done = st.frames[--st.size];
            r = PyList_Append(order, done.node);
            Py_DECREF(done.node);
            Py_DECREF(done.ops);
            if (r < 0) goto fail;
        }
    }
    PyMem_Free(st.frames);
    Py_DECREF(seen);
    Py_DECREF(roots);
    return order;
fail:
    while (st.size) {
        Frame f = st.frames[--st.size];
        Py_DECREF(f.node);
        Py_DECREF(f.ops);
    }
    PyMem_Free(st.frames);
    Py_XDECREF(seen);
    Py_XDECREF(order);
    Py_DECREF(roots);
    return NULL;
}

static PyMethodDef methods[] = {
    {"live_nodes", (PyCFunction)(void (*)(void))live_nodes, METH_FASTCALL, live_nodes_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.graph._walk",
    "The post-order walk of graph/traverse.py (see _walk.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void) {
    s_args = PyUnicode_InternFromString("args");
    if (s_args == NULL) return NULL;
    return PyModule_Create(&module_def);
}
