/* copapy.graph._intern: hash-consing of graph nodes (graph/node.py) and the common case of
 * build.make in C.
 *
 * Every traced operation and every node of a gradient goes through node.intern, and most of
 * them through build.make's case of two scalar operands that are not constants. In Python
 * those two calls cost ~1.9 µs per new node, more than all else cp.grad does per node
 * (benchmarks/RESULTS.md). The rules stay in Python: intern's key, fingerprint and weak
 * table are exactly node.py's (its docstrings describe them); make handles here only the case
 * in which no simplification can apply (two scalar, non-constant, distinct operands of an
 * element-wise binary operation) and hands every other call to the Python make.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* the known-hash dict calls: the key tuple is hashed once, not at the lookup and the insert */
#if PY_VERSION_HEX < 0x030D0000
#define DICT_GET(d, k, h) _PyDict_GetItem_KnownHash(d, k, h)
#define DICT_SET(d, k, v, h) _PyDict_SetItem_KnownHash(d, k, v, h)
#define DICT_DEL(d, k, h) _PyDict_DelItem_KnownHash(d, k, h)
#else
#define DICT_GET(d, k, h) ((void)(h), PyDict_GetItemWithError(d, k))
#define DICT_SET(d, k, v, h) ((void)(h), PyDict_SetItem(d, k, v))
#define DICT_DEL(d, k, h) ((void)(h), PyDict_DelItem(d, k))
#endif

/* Node's slots, read and written at their offsets (Node is a __slots__ class: its slots are
 * member descriptors; bind checks that) */
enum { F_OP, F_DTYPE, F_ARGS, F_ATTR, F_SERIAL, F_FINGERPRINT, F_SHAPE, F_LOC, N_FIELDS };
static const char *const field_names[N_FIELDS] = {"op", "dtype", "args", "attr", "serial",
                                                   "fingerprint", "shape", "loc"};
static Py_ssize_t field_offset[N_FIELDS];

static PyObject *s_key, *s_code, *s_const, *s_input, *s_state, *empty_tuple;

/* what node.py and build.py hand over once at import (bind, bind_make) */
static PyObject *ref_type, *interned, *serials, *stable_hash, *op_hashes, *op_hash;
static PyObject *forget_fn, *fast_specs, *python_make;
/* set_regroup: the operations whose operands build.py's _regroup looks into, and the element
 * types it regroups now (NULL: none); such calls go to the Python make */
static PyObject *regroup_names, *regroup_dtypes;

static PyObject *node_type;

/* node.<field> (a new reference) */
static PyObject *get(PyObject *node, int f) {
    if (Py_TYPE(node) != (PyTypeObject *)node_type)
        return PyObject_GetAttrString(node, field_names[f]);
    PyObject *value = *(PyObject **)((char *)node + field_offset[f]);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "node has no %s yet", field_names[f]);
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

/* node.<field> = value, node being a new Node */
static void set(PyObject *node, int f, PyObject *value) {
    PyObject **slot = (PyObject **)((char *)node + field_offset[f]);
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
}

static int same_str(PyObject *a, PyObject *b) {
    return a == b || (PyUnicode_Check(a) && PyUnicode_Compare(a, b) == 0);
}

static PyObject *dead_or_alive(PyObject *ref) {
    /* the referent of a weak reference (new reference), Py_None if it died */
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) < 0) return NULL;
    return obj == NULL ? Py_NewRef(Py_None) : obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    if (obj == NULL) return NULL;
    Py_INCREF(obj);
    return obj;
#endif
}

/* the node's fingerprint: hash((crc32(op), dtype code, stable_hash(identity), *operand
 * fingerprints)), identity being the name of a fresh leaf or the attribute (node.py) */
static PyObject *fingerprint(PyObject *op, PyObject *code, PyObject *args, PyObject *attr) {
    PyObject *identity = attr, *own = NULL, *h = NULL, *parts = NULL, *result = NULL;
    Py_INCREF(identity);
    if (same_str(op, s_input) || same_str(op, s_state)) {
        Py_DECREF(identity);
        identity = PySequence_GetItem(attr, 1);
        if (identity == NULL) return NULL;
    }
    own = identity == Py_None ? PyLong_FromLong(0)
                              : PyObject_CallOneArg(stable_hash, identity);
    if (own == NULL) goto done;
    h = PyDict_GetItemWithError(op_hashes, op);
    if (h != NULL) {
        Py_INCREF(h);
    } else if (PyErr_Occurred() || (h = PyObject_CallOneArg(op_hash, op)) == NULL ||
               PyDict_SetItem(op_hashes, op, h) < 0) {
        goto done;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    parts = PyTuple_New(3 + n);
    if (parts == NULL) goto done;
    PyTuple_SET_ITEM(parts, 0, h);
    Py_INCREF(code);
    PyTuple_SET_ITEM(parts, 1, code);
    PyTuple_SET_ITEM(parts, 2, own);
    h = own = NULL; /* the tuple holds them */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *fp = get(PyTuple_GET_ITEM(args, k), F_FINGERPRINT);
        if (fp == NULL) goto done;
        PyTuple_SET_ITEM(parts, 3 + k, fp);
    }
    Py_hash_t value = PyObject_Hash(parts);
    if (value != -1) result = PyLong_FromSsize_t(value);
done:
    Py_DECREF(identity);
    Py_XDECREF(own);
    Py_XDECREF(h);
    Py_XDECREF(parts);
    return result;
}

/* stops the cycle collector tracking tuple t if nothing it holds is tracked (what the
 * collector itself does to such a tuple when it first scans it) */
static void untrack_tuple(PyObject *t) {
    if (!PyTuple_CheckExact(t) || !PyObject_GC_IsTracked(t)) return;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(t); k++) {
        if (PyObject_GC_IsTracked(PyTuple_GET_ITEM(t, k))) return;
    }
    PyObject_GC_UnTrack(t);
}

/* the node, its operand and key tuples and its weak reference leave the cycle collector: a
 * node refers only to older nodes and to plain data (graph/node.py), so none of them can be
 * part of a reference cycle, and a large graph's objects would otherwise be scanned at every
 * collection (the young collection after cp.grad of a 256k-node DAG: 1.5-2.8 µs per node) */
static void untrack(PyObject *node, PyObject *args, PyObject *attr, PyObject *shape,
                    PyObject *key, PyObject *ref) {
    if (PyObject_GC_IsTracked(node)) PyObject_GC_UnTrack(node);
    untrack_tuple(args);
    untrack_tuple(attr);
    untrack_tuple(shape);
    untrack_tuple(key);
    if (PyObject_GC_IsTracked(ref)) PyObject_GC_UnTrack(ref);
}

/* a new node of this structure, entered in the weak table under key */
static PyObject *new_node(PyObject *op, PyObject *dtype, PyObject *code, PyObject *args,
                          PyObject *attr, PyObject *shape, PyObject *key, Py_hash_t key_hash) {
    PyTypeObject *type = (PyTypeObject *)node_type;
    PyObject *node = type->tp_new(type, empty_tuple, NULL), *serial = NULL, *fp = NULL;
    PyObject *ref = NULL;
    if (node == NULL) return NULL;
    set(node, F_OP, op);
    set(node, F_DTYPE, dtype);
    set(node, F_ARGS, args);
    set(node, F_ATTR, attr);
    set(node, F_SHAPE, shape);
    set(node, F_LOC, Py_None); /* where the user's code built it: graph/location.py */
    serial = PyIter_Next(serials);
    if (serial == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "node serials exhausted");
        goto fail;
    }
    set(node, F_SERIAL, serial);
    fp = fingerprint(op, code, args, attr);
    if (fp == NULL) goto fail;
    set(node, F_FINGERPRINT, fp);
    ref = PyObject_CallFunctionObjArgs(ref_type, node, forget_fn, NULL);
    if (ref == NULL || PyObject_SetAttr(ref, s_key, key) < 0 ||
        DICT_SET(interned, key, ref, key_hash) < 0)
        goto fail;
    untrack(node, args, attr, shape, key, ref);
    Py_DECREF(serial);
    Py_DECREF(fp);
    Py_DECREF(ref);
    return node;
fail:
    Py_XDECREF(serial);
    Py_XDECREF(fp);
    Py_XDECREF(ref);
    Py_DECREF(node);
    return NULL;
}

static PyObject *intern_node(PyObject *op, PyObject *dtype, PyObject *args, PyObject *attr,
                             PyObject *shape) {
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "copapy.graph._intern is not bound (graph/node.py)");
        return NULL;
    }
    if (!PyTuple_Check(args) || !PyTuple_Check(shape)) {
        PyErr_SetString(PyExc_TypeError, "intern: args and shape must be tuples");
        return NULL;
    }
    PyObject *code = PyObject_GetAttr(dtype, s_code);
    if (code == NULL) return NULL;
    PyObject *node = NULL, *key = PyTuple_Pack(5, op, code, args, attr, shape);
    if (key == NULL) goto done;
    Py_hash_t key_hash = PyObject_Hash(key);
    if (key_hash == -1) goto done;
    PyObject *ref = DICT_GET(interned, key, key_hash); /* borrowed */
    if (ref != NULL) {
        node = dead_or_alive(ref);
        if (node == NULL || node != Py_None) goto done;
        Py_CLEAR(node);
    } else if (PyErr_Occurred()) {
        goto done;
    }
    node = new_node(op, dtype, code, args, attr, shape, key, key_hash);
done:
    Py_DECREF(code);
    Py_XDECREF(key);
    return node;
}

PyDoc_STRVAR(intern_doc,
             "intern(op, dtype, args, attr=None, shape=())\n\n"
             "The unique node with this structure, created if it does not exist yet.");

static PyObject *intern_fn(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc < 3 || argc > 5) {
        PyErr_SetString(PyExc_TypeError, "intern(op, dtype, args, attr=None, shape=())");
        return NULL;
    }
    return intern_node(argv[0], argv[1], argv[2], argc > 3 ? argv[3] : Py_None,
                       argc > 4 ? argv[4] : empty_tuple);
}

PyDoc_STRVAR(forget_doc,
             "forget(ref)\n\n"
             "A node was collected: drop its entry (unless a new node took the key meanwhile).");

static PyObject *forget(PyObject *module, PyObject *ref) {
    (void)module;
    PyObject *key = PyObject_GetAttr(ref, s_key);
    if (key == NULL) return NULL;
    Py_hash_t key_hash = PyObject_Hash(key);
    PyObject *current = key_hash == -1 ? NULL : DICT_GET(interned, key, key_hash);
    int r = current == ref ? DICT_DEL(interned, key, key_hash) : (PyErr_Occurred() ? -1 : 0);
    Py_DECREF(key);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

/* 1 if (a.fingerprint, a.serial) > (b.fingerprint, b.serial), 0 if not, -1 on error: the
 * canonical operand order (node.canonical_key) of two operands that are not constants */
static int after(PyObject *a, PyObject *b) {
    PyObject *fa = get(a, F_FINGERPRINT), *fb = NULL, *sa = NULL, *sb = NULL;
    int r = -1;
    if (fa == NULL || (fb = get(b, F_FINGERPRINT)) == NULL) goto done;
    r = PyObject_RichCompareBool(fa, fb, Py_NE);
    if (r != 0) {
        if (r > 0) r = PyObject_RichCompareBool(fa, fb, Py_GT);
        goto done;
    }
    r = -1;
    if ((sa = get(a, F_SERIAL)) == NULL || (sb = get(b, F_SERIAL)) == NULL)
        goto done;
    r = PyObject_RichCompareBool(sa, sb, Py_GT);
done:
    Py_XDECREF(fa);
    Py_XDECREF(fb);
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    return r;
}

/* 1 if node is a scalar that is not a constant, 0 if not, -1 on error */
static int plain_scalar(PyObject *node) {
    PyObject *shape = get(node, F_SHAPE), *op = NULL;
    int r = -1;
    if (shape == NULL) return -1;
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 0) {
        r = 0;
    } else if ((op = get(node, F_OP)) != NULL) {
        r = !same_str(op, s_const);
    }
    Py_DECREF(shape);
    Py_XDECREF(op);
    return r;
}

/* 1 if build.py's _regroup may rewrite name(a, b) (an operand is itself a regrouped operation
 * of a regrouped type), 0 if not, -1 on error */
static int may_regroup(PyObject *name, PyObject *a, PyObject *b) {
    if (regroup_names == NULL) return 0;
    int r = PySet_Contains(regroup_names, name);
    if (r <= 0) return r;
    PyObject *dtype = get(a, F_DTYPE);
    if (dtype == NULL) return -1;
    r = PySet_Contains(regroup_dtypes, dtype);
    Py_DECREF(dtype);
    if (r <= 0) return r;
    PyObject *operands[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        PyObject *op = get(operands[k], F_OP);
        if (op == NULL) return -1;
        r = PySet_Contains(regroup_names, op);
        Py_DECREF(op);
        if (r != 0) return r;
    }
    return 0;
}

/* make's common case, or NULL without an error if it does not apply */
static PyObject *make_plain(PyObject *spec, PyObject *args, PyObject *attr) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 1 || !PyTuple_Check(args) ||
        PyTuple_GET_SIZE(args) != 2)
        return NULL;
    PyObject *name = PyTuple_GET_ITEM(spec, 0);
    PyObject *entry = PyDict_GetItemWithError(fast_specs, name); /* (dtype | None, commutative) */
    if (entry == NULL) return NULL;
    PyObject *a = PyTuple_GET_ITEM(args, 0), *b = PyTuple_GET_ITEM(args, 1);
    if (a == b) return NULL; /* x op x has rewrites */
    int plain = plain_scalar(a);
    if (plain > 0) plain = plain_scalar(b);
    if (plain <= 0) return NULL;
    if (may_regroup(name, a, b) != 0) return NULL;
    PyObject *dtype = PyTuple_GET_ITEM(entry, 0), *ordered = args;
    if (dtype == Py_None) {
        dtype = get(b, F_DTYPE);
        if (dtype == NULL) return NULL;
    } else {
        Py_INCREF(dtype);
    }
    Py_INCREF(ordered);
    int swap = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 1));
    if (swap > 0) swap = after(a, b);
    if (swap > 0) {
        Py_DECREF(ordered);
        ordered = PyTuple_Pack(2, b, a);
    }
    PyObject *node = swap < 0 || ordered == NULL
                         ? NULL
                         : intern_node(name, dtype, ordered, attr, empty_tuple);
    Py_DECREF(dtype);
    Py_XDECREF(ordered);
    return node;
}

PyDoc_STRVAR(make_doc,
             "make(spec, args, attr=None)\n\n"
             "The simplified node for spec(*args) (graph/build.py, make).");

static PyObject *make(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (python_make == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "copapy.graph._intern.make is not bound (build.py)");
        return NULL;
    }
    if (argc < 2 || argc > 3) {
        PyErr_SetString(PyExc_TypeError, "make(spec, args, attr=None)");
        return NULL;
    }
    PyObject *attr = argc > 2 ? argv[2] : Py_None;
    PyObject *node = make_plain(argv[0], argv[1], attr);
    if (node != NULL || PyErr_Occurred()) return node;
    PyObject *call[3] = {argv[0], argv[1], attr};
    return PyObject_Vectorcall(python_make, call, 3, NULL);
}

static void keep(PyObject **slot, PyObject *value) {
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
}

PyDoc_STRVAR(bind_doc,
             "bind(node_type, ref_type, interned, serials, stable_hash, op_hashes, op_hash)\n\n"
             "graph/node.py's Node class, weak reference class, table, serial counter and\n"
             "hash functions, which intern uses.");

static PyObject *bind(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 7 || !PyType_Check(argv[0]) || !PyType_Check(argv[1]) ||
        !PyDict_Check(argv[2]) || !PyDict_Check(argv[5])) {
        PyErr_SetString(PyExc_TypeError, "bind(node_type, ref_type, interned: dict, serials, "
                                         "stable_hash, op_hashes: dict, op_hash)");
        return NULL;
    }
    for (int k = 0; k < N_FIELDS; k++) {
        PyObject *d = PyObject_GetAttrString(argv[0], field_names[k]);
        if (d == NULL) return NULL;
        int slot = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                   ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (slot) field_offset[k] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!slot) {
            PyErr_Format(PyExc_TypeError, "bind: Node.%s must be a __slots__ slot",
                         field_names[k]);
            return NULL;
        }
    }
    PyObject *f = PyObject_GetAttrString(module, "forget");
    if (f == NULL) return NULL;
    Py_XSETREF(forget_fn, f);
    PyObject **slots[7] = {&node_type, &ref_type, &interned, &serials,
                           &stable_hash, &op_hashes, &op_hash};
    for (int k = 0; k < 7; k++) keep(slots[k], argv[k]);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(bind_make_doc,
             "bind_make(fast_specs, python_make)\n\n"
             "The element-wise binary operations make handles here (name -> (result dtype or\n"
             "None for the operands', commutative)) and build.py's make for every other call.");

static PyObject *bind_make(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 2 || !PyDict_Check(argv[0]) || !PyCallable_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "bind_make(fast_specs: dict, python_make)");
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(argv[0], &pos, &key, &value)) {
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
            PyErr_SetString(PyExc_TypeError, "fast_specs values are (dtype | None, bool)");
            return NULL;
        }
    }
    keep(&fast_specs, argv[0]);
    keep(&python_make, argv[1]);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_regroup_doc,
             "set_regroup(names, dtypes)\n\n"
             "The operations (a set of names) whose operands build.py's _regroup looks into and\n"
             "the element types (a set) it regroups now: make hands those calls to Python.");

static PyObject *set_regroup(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 2 || !PyAnySet_Check(argv[0]) || !PyAnySet_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "set_regroup(names: set, dtypes: set)");
        return NULL;
    }
    keep(&regroup_names, argv[0]);
    keep(&regroup_dtypes, argv[1]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_regroup", (PyCFunction)(void (*)(void))set_regroup, METH_FASTCALL, set_regroup_doc},
    {"intern", (PyCFunction)(void (*)(void))intern_fn, METH_FASTCALL, intern_doc},
    {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL, make_doc},
    {"forget", forget, METH_O, forget_doc},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL, bind_doc},
    {"bind_make", (PyCFunction)(void (*)(void))bind_make, METH_FASTCALL, bind_make_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.graph._intern",
    "Hash-consing of graph nodes and make's common case (see _intern.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__intern(void) {
    PyObject **names[] = {&s_key, &s_code, &s_const, &s_input, &s_state};
    const char *texts[] = {"key", "code", "const", "input", "state"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        *names[k] = PyUnicode_InternFromString(texts[k]);
        if (*names[k] == NULL) return NULL;
    }
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL) return NULL;
    return PyModule_Create(&module_def);
}
