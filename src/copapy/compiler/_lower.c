/* copapy.compiler._lower: the scalar lowering loop of compiler/lower.py in C.
 *
 * The per-node work of lowering a scalar operation (operand forms, next-use bookkeeping, the
 * Belady register choice, the stencil name, releasing dead values) is a few dozen dictionary
 * and attribute operations; the interpreter spent most of a compile there. This module does
 * exactly what _Lowerer did per scalar node, on the same Python objects (the _Lowerer's
 * dictionaries and lists), and calls back into the _Lowerer for everything that is not the
 * common case: array nodes (lower_array), a stencil name not checked yet (check_stencil), a
 * constant without a slot (slot_of), a spill (evict), a dead value with a temporary slot
 * (forget), output stores (store). One implementation: lower.py has no Python copy of it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define NEVER ((int64_t)1 << 62)

static PyObject *s_args, *s_op, *s_dtype, *s_stencil, *s_shape, *s_where;
static PyObject *s_role[3]; /* "a", "b", "c" */

/* state of one lower_nodes / remaining_uses call (borrowed references) */
typedef struct {
    PyObject *lowerer;
    PyObject *regs;      /* class name -> [Node | None, Node | None] */
    PyObject *mem;       /* id(node) -> offset */
    PyObject *temp_of;   /* id(node) -> temporary offset */
    PyObject *remaining; /* node -> list of use positions, latest first */
    PyObject *stores;    /* node -> list of offsets */
    PyObject *known;     /* checked stencil names */
    PyObject *names;     /* op -> {dtype: "family_type__"} */
    PyObject *instrs;    /* list of Instr */
    PyObject *instr_type;
    PyObject *prefix;    /* node -> "family_type__" */
    PyObject *views;     /* frozenset of view op names */
} State;

/* new reference to node.<name> */
static PyObject *attr(PyObject *obj, PyObject *name) { return PyObject_GetAttr(obj, name); }

static int is_view(PyObject *views, PyObject *node, int *out) {
    PyObject *op = attr(node, s_op);
    if (op == NULL) return -1;
    int r = PySet_Contains(views, op);
    Py_DECREF(op);
    if (r < 0) return -1;
    *out = r;
    return 0;
}

/* new reference to views' base operand (args[0]) */
static PyObject *first_arg(PyObject *node) {
    PyObject *args = attr(node, s_args);
    if (args == NULL) return NULL;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1) {
        Py_DECREF(args);
        PyErr_SetString(PyExc_TypeError, "a view node without an operand");
        return NULL;
    }
    PyObject *base = PyTuple_GET_ITEM(args, 0);
    Py_INCREF(base);
    Py_DECREF(args);
    return base;
}

/* borrowed: the register pair of node's class */
static PyObject *regs_of(State *st, PyObject *node) {
    PyObject *dtype = attr(node, s_dtype);
    if (dtype == NULL) return NULL;
    PyObject *cls = attr(dtype, s_stencil);
    Py_DECREF(dtype);
    if (cls == NULL) return NULL;
    PyObject *regs = PyDict_GetItemWithError(st->regs, cls);
    if (regs == NULL && !PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "register class %R", cls);
    Py_DECREF(cls);
    if (regs != NULL && (!PyList_Check(regs) || PyList_GET_SIZE(regs) != 2)) {
        PyErr_SetString(PyExc_TypeError, "a register class is not a list of two");
        return NULL;
    }
    return regs;
}

/* next use of node (NEVER if none); -1 on error */
static int64_t next_use(State *st, PyObject *node) {
    PyObject *uses = PyDict_GetItemWithError(st->remaining, node);
    if (uses == NULL) return PyErr_Occurred() ? -1 : NEVER;
    Py_ssize_t n = PyList_GET_SIZE(uses);
    if (n == 0) return NEVER;
    int64_t use = PyLong_AsLongLong(PyList_GET_ITEM(uses, n - 1));
    if (use == -1 && PyErr_Occurred()) return -1;
    return use;
}

/* remaining[node].pop() */
static int pop_use(State *st, PyObject *node) {
    PyObject *uses = PyDict_GetItemWithError(st->remaining, node);
    if (uses == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "%R has no remaining uses", node);
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(uses);
    if (n == 0) {
        PyErr_SetString(PyExc_IndexError, "pop from empty list");
        return -1;
    }
    return PyList_SetSlice(uses, n - 1, n, NULL);
}

/* 1 if the dict keyed by id() holds node, 0 if not, -1 on error */
static int has_id(PyObject *dict, PyObject *node) {
    PyObject *key = PyLong_FromVoidPtr(node);
    if (key == NULL) return -1;
    int r = PyDict_Contains(dict, key);
    Py_DECREF(key);
    return r;
}

/* new reference to dict[id(node)], NULL without error if absent */
static PyObject *get_id(PyObject *dict, PyObject *node) {
    PyObject *key = PyLong_FromVoidPtr(node);
    if (key == NULL) return NULL;
    PyObject *v = PyDict_GetItemWithError(dict, key);
    Py_DECREF(key);
    Py_XINCREF(v);
    return v;
}

/* a value is dead: free its register (and its temporary slot, through _Lowerer.forget) */
static int forget(State *st, PyObject *node) {
    int temp = has_id(st->temp_of, node);
    if (temp < 0) return -1;
    if (temp) {
        PyObject *r = PyObject_CallMethod(st->lowerer, "forget", "O", node);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    PyObject *regs = regs_of(st, node);
    if (regs == NULL) return -1;
    for (Py_ssize_t r = 0; r < 2; r++) {
        if (PyList_GET_ITEM(regs, r) == node) {
            Py_INCREF(Py_None);
            if (PyList_SetItem(regs, r, Py_None) < 0) return -1;
        }
    }
    return 0;
}

/* Belady: a free register, else the one whose value is needed furthest ahead (values in
 * memory preferred); -1 on error */
static int pick_register(State *st, PyObject *regs) {
    int best = 0;
    int64_t best_key = -1;
    for (int r = 0; r < 2; r++) {
        PyObject *v = PyList_GET_ITEM(regs, r);
        if (v == Py_None) return r;
        int64_t use = next_use(st, v);
        if (use < 0) return -1;
        if (use == NEVER) return r;
        int in_mem = has_id(st->mem, v);
        if (in_mem < 0) return -1;
        int64_t key = use + (in_mem ? NEVER / 2 : 0);
        if (key > best_key) {
            best = r;
            best_key = key;
        }
    }
    return best;
}

/* new reference: "family_type__" of node's stencil */
static PyObject *name_prefix(State *st, PyObject *node, PyObject *op, PyObject *args) {
    int where = PyUnicode_Compare(op, s_where) == 0;
    if (where) return PyObject_CallOneArg(st->prefix, node);
    PyObject *dtype = attr(PyTuple_GET_ITEM(args, 0), s_dtype);
    if (dtype == NULL) return NULL;
    PyObject *by_type = PyDict_GetItemWithError(st->names, op);
    PyObject *name = NULL;
    if (by_type == NULL) {
        if (PyErr_Occurred()) goto done;
        PyObject *fresh = PyDict_New();
        if (fresh == NULL) goto done;
        int r = PyDict_SetItem(st->names, op, fresh);
        Py_DECREF(fresh);
        if (r < 0) goto done;
        by_type = fresh;
    }
    name = PyDict_GetItemWithError(by_type, dtype);
    if (name != NULL) {
        Py_INCREF(name);
    } else if (!PyErr_Occurred()) {
        name = PyObject_CallOneArg(st->prefix, node);
        if (name != NULL && PyDict_SetItem(by_type, dtype, name) < 0) Py_CLEAR(name);
    }
done:
    Py_DECREF(dtype);
    return name;
}

/* one scalar operation: operands from registers or slots, the result into a register */
static int lower_node(State *st, PyObject *node) {
    int ok = -1;
    PyObject *op = NULL, *args = NULL, *prefix = NULL, *slots = NULL, *stencil = NULL;
    PyObject *instr = NULL, *out_regs = NULL, *node_stores = NULL;
    op = attr(node, s_op);
    args = op ? attr(node, s_args) : NULL;
    if (args == NULL) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1 || n > 3) {
        PyErr_Format(PyExc_AssertionError, "%R: a scalar operation of %zd operands", node, n);
        goto done;
    }
    int where = PyUnicode_Compare(op, s_where) == 0;
    if (!where && n == 3) {
        PyErr_Format(PyExc_AssertionError, "%R: three operands", node);
        goto done;
    }
    prefix = name_prefix(st, node, op, args);
    if (prefix == NULL) goto done;
    char forms[8]; /* "x_y_z" */
    Py_ssize_t nf = 0;
    PyObject *slot_items[3];
    Py_ssize_t nslots = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *arg = PyTuple_GET_ITEM(args, k);
        PyObject *regs = regs_of(st, arg);
        if (regs == NULL) goto slots_fail;
        if (k) forms[nf++] = '_';
        if (PyList_GET_ITEM(regs, 0) == arg) {
            forms[nf++] = '0';
        } else if (PyList_GET_ITEM(regs, 1) == arg) {
            forms[nf++] = '1';
        } else {
            forms[nf++] = 'm';
            PyObject *offset = get_id(st->mem, arg);
            if (offset == NULL) {
                if (PyErr_Occurred()) goto slots_fail;
                offset = PyObject_CallMethod(st->lowerer, "slot_of", "O", arg);
                if (offset == NULL) goto slots_fail;
            }
            PyObject *role = s_role[where ? (k == 0 ? 2 : k - 1) : k];
            PyObject *pair = PyTuple_Pack(2, role, offset);
            Py_DECREF(offset);
            if (pair == NULL) goto slots_fail;
            slot_items[nslots++] = pair;
        }
    }
    forms[nf] = '\0';
    slots = PyTuple_New(nslots);
    if (slots == NULL) goto slots_fail;
    for (Py_ssize_t k = 0; k < nslots; k++) PyTuple_SET_ITEM(slots, k, slot_items[k]);
    nslots = 0;
    /* the operands are consumed: advance their next-use pointers */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *arg = PyTuple_GET_ITEM(args, k);
        Py_INCREF(arg);
        for (;;) {
            int view;
            if (pop_use(st, arg) < 0 || is_view(st->views, arg, &view) < 0) {
                Py_DECREF(arg);
                goto done;
            }
            if (!view) break;
            PyObject *base = first_arg(arg);
            Py_DECREF(arg);
            if (base == NULL) goto done;
            arg = base;
        }
        Py_DECREF(arg);
    }
    out_regs = regs_of(st, node);
    if (out_regs == NULL) goto done;
    Py_INCREF(out_regs);
    int dst = 0;
    if (PyList_GET_ITEM(out_regs, 0) != Py_None) {
        /* a free first register needs neither the Belady choice nor an eviction */
        dst = pick_register(st, out_regs);
        if (dst < 0) goto done;
        PyObject *victim = PyList_GET_ITEM(out_regs, dst);
        if (victim != Py_None) {
            int64_t use = next_use(st, victim);
            if (use < 0) goto done;
            int in_mem = has_id(st->mem, victim);
            if (in_mem < 0) goto done;
            if (use != NEVER && !in_mem) {
                PyObject *r = PyObject_CallMethod(st->lowerer, "evict", "Oi", out_regs, dst);
                if (r == NULL) goto done;
                Py_DECREF(r);
            }
        }
    }
    stencil = PyUnicode_FromFormat("%U%d_%s", prefix, dst, forms);
    if (stencil == NULL) goto done;
    int known = PySet_Contains(st->known, stencil);
    if (known < 0) goto done;
    if (!known) {
        PyObject *r = PyObject_CallMethod(st->lowerer, "check_stencil", "O", stencil);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    /* what the named tuple's __new__ does: tuple.__new__(Instr, (stencil, slots)) */
    PyObject *fields = PyTuple_Pack(2, stencil, slots);
    PyObject *new_args = fields ? PyTuple_Pack(1, fields) : NULL;
    Py_XDECREF(fields);
    if (new_args == NULL) goto done;
    instr = PyTuple_Type.tp_new((PyTypeObject *)st->instr_type, new_args, NULL);
    Py_DECREF(new_args);
    if (instr == NULL || PyList_Append(st->instrs, instr) < 0) goto done;
    Py_INCREF(node);
    if (PyList_SetItem(out_regs, dst, node) < 0) goto done;
    /* release the operands that are dead now (through views, the arrays looked into) */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *arg = PyTuple_GET_ITEM(args, k);
        Py_INCREF(arg);
        for (;;) {
            int64_t use = next_use(st, arg);
            int view;
            if (use < 0 || (use == NEVER && forget(st, arg) < 0) || is_view(st->views, arg, &view) < 0) {
                Py_DECREF(arg);
                goto done;
            }
            if (!view) break;
            PyObject *base = first_arg(arg);
            Py_DECREF(arg);
            if (base == NULL) goto done;
            arg = base;
        }
        Py_DECREF(arg);
    }
    node_stores = PyDict_GetItemWithError(st->stores, node);
    if (node_stores == NULL && PyErr_Occurred()) goto done;
    Py_XINCREF(node_stores);
    if (node_stores != NULL && PyObject_IsTrue(node_stores)) {
        PyObject *it = PyObject_GetIter(node_stores);
        if (it == NULL) goto done;
        PyObject *offset;
        while ((offset = PyIter_Next(it)) != NULL) {
            PyObject *r = PyObject_CallMethod(st->lowerer, "store", "OiO", node, dst, offset);
            PyObject *key = r ? PyLong_FromVoidPtr(node) : NULL;
            PyObject *set = key ? PyDict_SetDefault(st->mem, key, offset) : NULL;
            Py_XDECREF(key);
            Py_XDECREF(r);
            Py_DECREF(offset);
            if (set == NULL) {
                Py_DECREF(it);
                goto done;
            }
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) goto done;
    }
    int64_t use = next_use(st, node);
    if (use < 0) goto done;
    if (use == NEVER) {
        Py_INCREF(Py_None);
        if (PyList_SetItem(out_regs, dst, Py_None) < 0) goto done;
    }
    ok = 0;
    goto done;
slots_fail:
    for (Py_ssize_t k = 0; k < nslots; k++) Py_DECREF(slot_items[k]);
done:
    Py_XDECREF(op);
    Py_XDECREF(args);
    Py_XDECREF(prefix);
    Py_XDECREF(slots);
    Py_XDECREF(stencil);
    Py_XDECREF(instr);
    Py_XDECREF(out_regs);
    Py_XDECREF(node_stores);
    return ok;
}

static int load_state(State *st, PyObject *lowerer) {
    static const char *const fields[] = {"regs", "mem", "temp_of", "remaining", "stores",
                                         "known", "names", "instrs"};
    PyObject **slots[] = {&st->regs, &st->mem, &st->temp_of, &st->remaining, &st->stores,
                          &st->known, &st->names, &st->instrs};
    st->lowerer = lowerer;
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        PyObject *v = PyObject_GetAttrString(lowerer, fields[k]);
        if (v == NULL) return -1;
        /* the _Lowerer keeps them alive for the whole call */
        Py_DECREF(v);
        *slots[k] = v;
    }
    if (!PyDict_Check(st->regs) || !PyDict_Check(st->mem) || !PyDict_Check(st->temp_of) ||
        !PyDict_Check(st->remaining) || !PyDict_Check(st->stores) || !PyAnySet_Check(st->known) ||
        !PyDict_Check(st->names) || !PyList_Check(st->instrs)) {
        PyErr_SetString(PyExc_TypeError, "lower_nodes: unexpected _Lowerer state");
        return -1;
    }
    return 0;
}

/* 1 if node is an array or reads one (lowered by _Lowerer.lower_array), 0 if not */
static int is_array_node(PyObject *node) {
    PyObject *shape = attr(node, s_shape);
    if (shape == NULL) return -1;
    int r = PyObject_IsTrue(shape);
    Py_DECREF(shape);
    if (r) return r;
    PyObject *args = attr(node, s_args);
    if (args == NULL) return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(args) && !r; k++) {
        PyObject *arg_shape = attr(PyTuple_GET_ITEM(args, k), s_shape);
        r = arg_shape == NULL ? -1 : PyObject_IsTrue(arg_shape);
        Py_XDECREF(arg_shape);
    }
    Py_DECREF(args);
    return r;
}

PyDoc_STRVAR(lower_nodes_doc,
             "lower_nodes(lowerer, order, skipped, progress, instr_type, prefix, views)\n\n"
             "Lower every node of ``order`` not in ``skipped``: array nodes through\n"
             "``lowerer.lower_array``, scalar operations here. ``progress(done, total)`` (or None)\n"
             "every 1024 nodes; ``prefix(node)`` gives a stencil name's family and type part.");

static PyObject *lower_nodes(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 7) {
        PyErr_SetString(PyExc_TypeError, "lower_nodes takes 7 arguments");
        return NULL;
    }
    State st;
    if (load_state(&st, argv[0]) < 0) return NULL;
    PyObject *order = argv[1], *skipped = argv[2], *progress = argv[3];
    st.instr_type = argv[4];
    st.prefix = argv[5];
    st.views = argv[6];
    if (!PyList_Check(order) || !PyAnySet_Check(skipped) || !PyType_Check(st.instr_type) ||
        !PyType_IsSubtype((PyTypeObject *)st.instr_type, &PyTuple_Type) ||
        !PyAnySet_Check(st.views)) {
        PyErr_SetString(PyExc_TypeError, "lower_nodes: bad argument types");
        return NULL;
    }
    Py_ssize_t total = PyList_GET_SIZE(order);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order); i++) {
        if (progress != Py_None && !(i & 1023)) {
            PyObject *r = PyObject_CallFunction(progress, "nn", i, total);
            if (r == NULL) return NULL;
            Py_DECREF(r);
        }
        PyObject *node = PyList_GET_ITEM(order, i);
        Py_INCREF(node);
        int skip = PySet_Contains(skipped, node);
        int array = skip ? skip : is_array_node(node);
        int r = 0;
        if (skip < 0 || array < 0) {
            r = -1;
        } else if (skip) {
            r = 0;
        } else if (array) {
            PyObject *res = PyObject_CallMethod(st.lowerer, "lower_array", "O", node);
            Py_XDECREF(res);
            r = res == NULL ? -1 : 0;
        } else {
            r = lower_node(&st, node);
        }
        Py_DECREF(node);
        if (r < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* remaining[x].append(i), creating the list */
static int add_use(PyObject *remaining, PyObject *x, PyObject *i) {
    PyObject *uses = PyDict_GetItemWithError(remaining, x);
    if (uses != NULL) return PyList_Append(uses, i);
    if (PyErr_Occurred()) return -1;
    uses = PyList_New(1);
    if (uses == NULL) return -1;
    Py_INCREF(i);
    PyList_SET_ITEM(uses, 0, i);
    int r = PyDict_SetItem(remaining, x, uses);
    Py_DECREF(uses);
    return r;
}

PyDoc_STRVAR(remaining_uses_doc,
             "remaining_uses(remaining, order, skipped, special, operands, views)\n\n"
             "Fill ``remaining``: node -> the positions in ``order`` that read it, latest first\n"
             "(a view's use is also a use of the arrays it looks into). Nodes in ``skipped``\n"
             "read nothing; those in ``special`` read ``operands(node)``, others their args.");

static PyObject *remaining_uses(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 6) {
        PyErr_SetString(PyExc_TypeError, "remaining_uses takes 6 arguments");
        return NULL;
    }
    PyObject *remaining = argv[0], *order = argv[1], *skipped = argv[2], *special = argv[3];
    PyObject *operands = argv[4], *views = argv[5];
    if (!PyDict_Check(remaining) || !PyList_Check(order) || !PyAnySet_Check(skipped) ||
        !PyAnySet_Check(special) || !PyAnySet_Check(views)) {
        PyErr_SetString(PyExc_TypeError, "remaining_uses: bad argument types");
        return NULL;
    }
    for (Py_ssize_t i = PyList_GET_SIZE(order) - 1; i >= 0; i--) {
        PyObject *node = PyList_GET_ITEM(order, i);
        int skip = PySet_Contains(skipped, node);
        if (skip < 0) return NULL;
        if (skip) continue;
        int sp = PySet_Contains(special, node);
        if (sp < 0) return NULL;
        PyObject *args = sp ? PyObject_CallOneArg(operands, node) : attr(node, s_args);
        if (args == NULL) return NULL;
        PyObject *pos = PyLong_FromSsize_t(i);
        PyObject *seq = pos ? PySequence_Fast(args, "operands must be a sequence") : NULL;
        Py_DECREF(args);
        if (seq == NULL) {
            Py_XDECREF(pos);
            return NULL;
        }
        int r = 0;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq) && r == 0; k++) {
            PyObject *a = PySequence_Fast_GET_ITEM(seq, k);
            Py_INCREF(a);
            for (;;) {
                int view;
                if (add_use(remaining, a, pos) < 0 || is_view(views, a, &view) < 0) {
                    r = -1;
                    break;
                }
                if (!view) break;
                PyObject *base = first_arg(a);
                Py_DECREF(a);
                a = base;
                if (a == NULL) {
                    r = -1;
                    break;
                }
            }
            Py_XDECREF(a);
        }
        Py_DECREF(seq);
        Py_DECREF(pos);
        if (r < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"lower_nodes", (PyCFunction)(void (*)(void))lower_nodes, METH_FASTCALL, lower_nodes_doc},
    {"remaining_uses", (PyCFunction)(void (*)(void))remaining_uses, METH_FASTCALL,
     remaining_uses_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.compiler._lower",
    "The scalar lowering loop of compiler/lower.py (see _lower.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lower(void) {
    static const char *const roles[] = {"a", "b", "c"};
    s_args = PyUnicode_InternFromString("args");
    s_op = PyUnicode_InternFromString("op");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_stencil = PyUnicode_InternFromString("stencil");
    s_shape = PyUnicode_InternFromString("shape");
    s_where = PyUnicode_InternFromString("where");
    if (!s_args || !s_op || !s_dtype || !s_stencil || !s_shape || !s_where) return NULL;
    for (int k = 0; k < 3; k++) {
        s_role[k] = PyUnicode_InternFromString(roles[k]);
        if (s_role[k] == NULL) return NULL;
    }
    return PyModule_Create(&module_def);
}
