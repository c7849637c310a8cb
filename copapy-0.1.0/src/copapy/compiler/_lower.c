/* copapy.compiler._lower: the per-node work of compiler/lower.py in C.
 *
 * Lowering a scalar operation (operand forms, next-use bookkeeping, the Belady register
 * choice, spills, the stencil name, releasing dead values) is a few dozen dictionary and
 * attribute operations per node; in the interpreter they were most of a compile. This module
 * works on the _Lowerer's own objects (its dictionaries and lists) and is the one
 * implementation of those steps: the _Lowerer's pick_register, evict, forget and store call
 * it for the array nodes, which stay in Python (lower_array), as do a name's check against
 * the table (check_stencil, once per name) and a constant's first slot (slot_of).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define NEVER ((int64_t)1 << 62)
/* a scalar stencil name by register and operand forms: dst * 27 + sum(form_k * 3^k) */
#define NAME_SLOTS 54

static PyObject *s_args, *s_op, *s_dtype, *s_stencil, *s_shape, *s_where, *s_size, *s_nbytes;
static PyObject *s_temp, *s_release, *s_slot_of, *s_check_stencil, *s_lower_array, *s_out;
static PyObject *s_role[3]; /* "a", "b", "c" */
/* set by configure(): the Instr named tuple, the stencil-name callables of compiler/names.py
 * ((node, dst, forms) -> a scalar operation's, (class, reg) -> a store's), the view op names;
 * the store names made so far, by (class, reg) */
static PyObject *g_instr, *g_scalar_name, *g_store_name, *g_views, *g_store_names;

/* state of one call (borrowed references: the _Lowerer keeps them alive) */
typedef struct {
    PyObject *lowerer;
    PyObject *regs;      /* class name -> [Node | None, Node | None] */
    PyObject *mem;       /* node -> offset */
    PyObject *temp_of;   /* node -> temporary offset */
    PyObject *remaining; /* node -> list of use positions, latest first */
    PyObject *stores;    /* node -> list of offsets */
    PyObject *known;     /* checked stencil names */
    PyObject *names;     /* op -> {dtype: [stencil name or None] * NAME_SLOTS} */
    PyObject *instrs;    /* list of Instr */
    PyObject *layout;    /* DataLayout */
} State;

static int load_state(State *st, PyObject *lowerer) {
    static const char *const fields[] = {"regs",  "mem",   "temp_of", "remaining", "stores",
                                         "known", "names", "instrs",  "layout"};
    PyObject **slots[] = {&st->regs,  &st->mem,   &st->temp_of, &st->remaining, &st->stores,
                          &st->known, &st->names, &st->instrs,  &st->layout};
    if (g_instr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "copapy.compiler._lower is not configured");
        return -1;
    }
    st->lowerer = lowerer;
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        PyObject *v = PyObject_GetAttrString(lowerer, fields[k]);
        if (v == NULL) return -1;
        Py_DECREF(v); /* the _Lowerer holds it for the whole call */
        *slots[k] = v;
    }
    if (!PyDict_Check(st->regs) || !PyDict_Check(st->mem) || !PyDict_Check(st->temp_of) ||
        !PyDict_Check(st->remaining) || !PyDict_Check(st->stores) || !PyAnySet_Check(st->known) ||
        !PyDict_Check(st->names) || !PyList_Check(st->instrs)) {
        PyErr_SetString(PyExc_TypeError, "unexpected _Lowerer state");
        return -1;
    }
    return 0;
}

/* new reference to obj.<name> */
static PyObject *attr(PyObject *obj, PyObject *name) { return PyObject_GetAttr(obj, name); }

/* new reference to the result of lowerer.<name>(args...) */
static PyObject *call(State *st, PyObject *name, PyObject *a, PyObject *b) {
    return PyObject_CallMethodObjArgs(st->lowerer, name, a, b, NULL);
}

/* 1 if node is a view (index, slice, reshape), 0 if not, -1 on error */
static int is_view(PyObject *node) {
    PyObject *op = attr(node, s_op);
    if (op == NULL) return -1;
    int r = PySet_Contains(g_views, op);
    Py_DECREF(op);
    return r;
}

/* Apply step to node and, if it is a view, to the arrays it looks into (node.args[0]...). */
static int along_views(State *st, PyObject *node, int (*step)(State *, PyObject *)) {
    Py_INCREF(node);
    for (;;) {
        int view = step(st, node) < 0 ? -1 : is_view(node);
        if (view <= 0) {
            Py_DECREF(node);
            return view;
        }
        PyObject *args = attr(node, s_args);
        Py_DECREF(node);
        if (args == NULL) return -1;
        if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1) {
            Py_DECREF(args);
            PyErr_SetString(PyExc_TypeError, "a view node without an operand");
            return -1;
        }
        node = PyTuple_GET_ITEM(args, 0);
        Py_INCREF(node);
        Py_DECREF(args);
    }
}

/* new reference: the register class name of node (dtype.stencil) */
static PyObject *class_of(PyObject *node) {
    PyObject *dtype = attr(node, s_dtype);
    if (dtype == NULL) return NULL;
    PyObject *cls = attr(dtype, s_stencil);
    Py_DECREF(dtype);
    return cls;
}

/* borrowed: the register pair of class cls */
static PyObject *regs_of_class(State *st, PyObject *cls) {
    PyObject *regs = PyDict_GetItemWithError(st->regs, cls);
    if (regs == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "register class %R", cls);
        return NULL;
    }
    if (!PyList_Check(regs) || PyList_GET_SIZE(regs) != 2) {
        PyErr_SetString(PyExc_TypeError, "a register class is not a list of two");
        return NULL;
    }
    return regs;
}

/* borrowed: the register pair of node's class */
static PyObject *regs_of(State *st, PyObject *node) {
    PyObject *cls = class_of(node);
    if (cls == NULL) return NULL;
    PyObject *regs = regs_of_class(st, cls);
    Py_DECREF(cls);
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

/* 1 if the dict holds node, 0 if not, -1 on error */
static int in_dict(PyObject *dict, PyObject *node) { return PyDict_Contains(dict, node); }

/* new reference to dict[node], NULL without error if absent */
static PyObject *dict_get(PyObject *dict, PyObject *node) {
    PyObject *v = PyDict_GetItemWithError(dict, node);
    Py_XINCREF(v);
    return v;
}

/* dict[node] = value (setdefault: only if absent) */
static int dict_set(PyObject *dict, PyObject *node, PyObject *value, int setdefault) {
    return setdefault ? (PyDict_SetDefault(dict, node, value) == NULL ? -1 : 0)
                      : PyDict_SetItem(dict, node, value);
}

/* append Instr(stencil, slots); checks a name against the table the first time */
static int emit(State *st, PyObject *stencil, PyObject *slots, int checked) {
    if (!checked) {
        int known = PySet_Contains(st->known, stencil);
        if (known < 0) return -1;
        if (!known) {
            PyObject *r = call(st, s_check_stencil, stencil, NULL);
            if (r == NULL) return -1;
            Py_DECREF(r);
        }
    }
    /* what the named tuple's __new__ does: tuple.__new__(Instr, (stencil, slots)) */
    PyObject *fields = PyTuple_Pack(2, stencil, slots);
    PyObject *new_args = fields ? PyTuple_Pack(1, fields) : NULL;
    Py_XDECREF(fields);
    if (new_args == NULL) return -1;
    PyObject *instr = PyTuple_Type.tp_new((PyTypeObject *)g_instr, new_args, NULL);
    Py_DECREF(new_args);
    if (instr == NULL) return -1;
    int r = PyList_Append(st->instrs, instr);
    Py_DECREF(instr);
    return r;
}

/* store_<class>__m_<reg>: write node's value from register reg (or, for reg "m", the slot
 * src) to the slot offset */
static int store(State *st, PyObject *node, PyObject *reg, PyObject *offset, PyObject *src) {
    PyObject *cls = class_of(node);
    if (cls == NULL) return -1;
    PyObject *key = PyTuple_Pack(2, cls, reg);
    Py_DECREF(cls);
    if (key == NULL) return -1;
    PyObject *name = PyDict_GetItemWithError(g_store_names, key);
    if (name != NULL) {
        Py_INCREF(name);
    } else if (!PyErr_Occurred()) {
        name = PyObject_Call(g_store_name, key, NULL);
        if (name != NULL && PyDict_SetItem(g_store_names, key, name) < 0) Py_CLEAR(name);
    }
    Py_DECREF(key);
    if (name == NULL) return -1;
    PyObject *out = PyTuple_Pack(2, s_out, offset);
    PyObject *slots = NULL;
    if (out != NULL) {
        if (src == Py_None) {
            slots = PyTuple_Pack(1, out);
        } else {
            PyObject *a = PyTuple_Pack(2, s_role[0], src);
            slots = a ? PyTuple_Pack(2, a, out) : NULL;
            Py_XDECREF(a);
        }
    }
    Py_XDECREF(out);
    int r = slots == NULL ? -1 : emit(st, name, slots, 0);
    Py_XDECREF(slots);
    Py_DECREF(name);
    return r;
}

/* a value is dead: free its register and its temporary slot */
static int forget(State *st, PyObject *node) {
    PyObject *regs = regs_of(st, node);
    if (regs == NULL) return -1;
    for (Py_ssize_t r = 0; r < 2; r++) {
        if (PyList_GET_ITEM(regs, r) == node) {
            Py_INCREF(Py_None);
            if (PyList_SetItem(regs, r, Py_None) < 0) return -1;
        }
    }
    PyObject *key = node;
    Py_INCREF(key);
    PyObject *temp = PyDict_GetItemWithError(st->temp_of, key);
    int ok = 0;
    if (temp != NULL) {
        Py_INCREF(temp);
        PyObject *nbytes = PyDict_DelItem(st->temp_of, key) < 0 ? NULL : attr(node, s_nbytes);
        PyObject *r = nbytes ? PyObject_CallMethodObjArgs(st->layout, s_release, temp, nbytes,
                                                          NULL)
                             : NULL;
        ok = r == NULL ? -1 : 0;
        Py_XDECREF(r);
        Py_XDECREF(nbytes);
        Py_DECREF(temp);
    } else if (PyErr_Occurred()) {
        ok = -1;
    }
    Py_DECREF(key);
    return ok;
}

/* forget node if no use of it remains */
static int release_if_dead(State *st, PyObject *node) {
    int64_t use = next_use(st, node);
    if (use < 0) return -1;
    return use == NEVER ? forget(st, node) : 0;
}

/* Belady: a free register, else the one whose value is needed furthest ahead (values in
 * memory preferred: they need no store); -1 on error */
static int pick_register(State *st, PyObject *regs) {
    int best = 0;
    int64_t best_key = -1;
    for (int r = 0; r < 2; r++) {
        PyObject *v = PyList_GET_ITEM(regs, r);
        if (v == Py_None) return r;
        int64_t use = next_use(st, v);
        if (use < 0) return -1;
        if (use == NEVER) return r;
        int in_mem = in_dict(st->mem, v);
        if (in_mem < 0) return -1;
        int64_t key = use + (in_mem ? NEVER / 2 : 0);
        if (key > best_key) {
            best = r;
            best_key = key;
        }
    }
    return best;
}

/* save the value in register dst if it is still needed and not in memory (a spill) */
static int evict(State *st, PyObject *regs, int dst) {
    PyObject *victim = PyList_GET_ITEM(regs, dst);
    if (victim == Py_None) return 0;
    int64_t use = next_use(st, victim);
    if (use < 0) return -1;
    int in_mem = in_dict(st->mem, victim);
    if (in_mem < 0) return -1;
    if (use == NEVER || in_mem) return 0;
    Py_INCREF(victim);
    int ok = -1;
    PyObject *dtype = attr(victim, s_dtype);
    PyObject *size = dtype ? attr(dtype, s_size) : NULL;
    PyObject *offset = size ? PyObject_CallMethodObjArgs(st->layout, s_temp, size, NULL) : NULL;
    PyObject *reg = offset ? PyLong_FromLong(dst) : NULL;
    if (reg != NULL && store(st, victim, reg, offset, Py_None) == 0 &&
        dict_set(st->mem, victim, offset, 0) == 0 && dict_set(st->temp_of, victim, offset, 0) == 0)
        ok = 0;
    Py_XDECREF(reg);
    Py_XDECREF(offset);
    Py_XDECREF(size);
    Py_XDECREF(dtype);
    Py_DECREF(victim);
    return ok;
}

/* borrowed: the cache of the stencil names of node (op, key type) */
static PyObject *name_cache(State *st, PyObject *op, PyObject *args, int where) {
    /* the name's type part is that of the first operand (of a select: the values') */
    PyObject *dtype = attr(PyTuple_GET_ITEM(args, where ? 1 : 0), s_dtype);
    if (dtype == NULL) return NULL;
    PyObject *cache = NULL;
    PyObject *by_type = PyDict_GetItemWithError(st->names, op);
    if (by_type == NULL) {
        if (PyErr_Occurred()) goto done;
        PyObject *fresh = PyDict_New();
        if (fresh == NULL) goto done;
        int r = PyDict_SetItem(st->names, op, fresh);
        Py_DECREF(fresh);
        if (r < 0) goto done;
        by_type = fresh;
    }
    cache = PyDict_GetItemWithError(by_type, dtype);
    if (cache == NULL && !PyErr_Occurred()) {
        PyObject *fresh = PyList_New(NAME_SLOTS);
        if (fresh == NULL) goto done;
        for (Py_ssize_t k = 0; k < NAME_SLOTS; k++) {
            Py_INCREF(Py_None);
            PyList_SET_ITEM(fresh, k, Py_None);
        }
        int r = PyDict_SetItem(by_type, dtype, fresh);
        Py_DECREF(fresh);
        cache = r < 0 ? NULL : fresh;
    }
done:
    Py_DECREF(dtype);
    return cache;
}

/* new reference: the stencil name for (dst, forms), made and checked once per cache slot */
static PyObject *stencil_name(State *st, PyObject *cache, PyObject *node, int dst,
                              const char *forms, int code) {
    PyObject *name = PyList_GET_ITEM(cache, code);
    if (name != Py_None) {
        Py_INCREF(name);
        return name;
    }
    name = PyObject_CallFunction(g_scalar_name, "Ois", node, dst, forms);
    if (name == NULL) return NULL;
    PyObject *r = call(st, s_check_stencil, name, NULL);
    if (r == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    Py_DECREF(r);
    Py_INCREF(name);
    PyList_SetItem(cache, code, name); /* steals; cannot fail: code < NAME_SLOTS */
    return name;
}

/* one scalar operation: operands from registers or slots, the result into a register */
static int lower_node(State *st, PyObject *node) {
    int ok = -1;
    PyObject *op = NULL, *args = NULL, *slots = NULL, *stencil = NULL, *out_regs = NULL;
    PyObject *node_stores = NULL;
    PyObject *slot_items[3];
    Py_ssize_t nslots = 0;
    op = attr(node, s_op);
    args = op ? attr(node, s_args) : NULL;
    if (args == NULL) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    int where = PyUnicode_Compare(op, s_where) == 0;
    if (n < 1 || n > (where ? 3 : 2)) {
        PyErr_Format(PyExc_AssertionError, "%R: a scalar operation of %zd operands", node, n);
        goto done;
    }
    PyObject *cache = name_cache(st, op, args, where);
    if (cache == NULL) goto done;
    char forms[4]; /* one character an operand: "0", "1" or "m" */
    Py_ssize_t nf = 0;
    int code = 0;
    for (Py_ssize_t k = 0, weight = 1; k < n; k++, weight *= 3) {
        PyObject *arg = PyTuple_GET_ITEM(args, k);
        PyObject *regs = regs_of(st, arg);
        if (regs == NULL) goto done;
        if (PyList_GET_ITEM(regs, 0) == arg) {
            forms[nf++] = '0';
        } else if (PyList_GET_ITEM(regs, 1) == arg) {
            forms[nf++] = '1';
            code += (int)weight;
        } else {
            forms[nf++] = 'm';
            code += 2 * (int)weight;
            PyObject *offset = dict_get(st->mem, arg);
            if (offset == NULL) {
                if (PyErr_Occurred()) goto done;
                offset = call(st, s_slot_of, arg, NULL);
                if (offset == NULL) goto done;
            }
            PyObject *role = s_role[where ? (k == 0 ? 2 : k - 1) : k];
            PyObject *pair = PyTuple_Pack(2, role, offset);
            Py_DECREF(offset);
            if (pair == NULL) goto done;
            slot_items[nslots++] = pair;
        }
    }
    forms[nf] = '\0';
    slots = PyTuple_New(nslots);
    if (slots == NULL) goto done;
    for (Py_ssize_t k = 0; k < nslots; k++) PyTuple_SET_ITEM(slots, k, slot_items[k]);
    nslots = 0;
    /* the operands are consumed: advance their next-use pointers */
    for (Py_ssize_t k = 0; k < n; k++)
        if (along_views(st, PyTuple_GET_ITEM(args, k), pop_use) < 0) goto done;
    out_regs = regs_of(st, node);
    if (out_regs == NULL) goto done;
    Py_INCREF(out_regs);
    int dst = 0;
    /* a free first register needs neither the Belady choice nor an eviction */
    if (PyList_GET_ITEM(out_regs, 0) != Py_None) {
        dst = pick_register(st, out_regs);
        if (dst < 0 || evict(st, out_regs, dst) < 0) goto done;
    }
    stencil = stencil_name(st, cache, node, dst, forms, dst * 27 + code);
    if (stencil == NULL || emit(st, stencil, slots, 1) < 0) goto done;
    Py_INCREF(node);
    if (PyList_SetItem(out_regs, dst, node) < 0) goto done;
    /* release the operands that are dead now (through views, the arrays looked into) */
    for (Py_ssize_t k = 0; k < n; k++)
        if (along_views(st, PyTuple_GET_ITEM(args, k), release_if_dead) < 0) goto done;
    node_stores = PyDict_GetItemWithError(st->stores, node);
    if (node_stores == NULL && PyErr_Occurred()) goto done;
    Py_XINCREF(node_stores);
    if (node_stores != NULL) {
        PyObject *offsets = PySequence_Fast(node_stores, "stores must be lists");
        if (offsets == NULL) goto done;
        PyObject *reg = PyLong_FromLong(dst);
        int r = reg == NULL ? -1 : 0;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(offsets) && r == 0; k++) {
            PyObject *offset = PySequence_Fast_GET_ITEM(offsets, k);
            r = store(st, node, reg, offset, Py_None);
            if (r == 0) r = dict_set(st->mem, node, offset, 1);
        }
        Py_XDECREF(reg);
        Py_DECREF(offsets);
        if (r < 0) goto done;
    }
    int64_t use = next_use(st, node);
    if (use < 0) goto done;
    if (use == NEVER) {
        Py_INCREF(Py_None);
        if (PyList_SetItem(out_regs, dst, Py_None) < 0) goto done;
    }
    ok = 0;
done:
    for (Py_ssize_t k = 0; k < nslots; k++) Py_DECREF(slot_items[k]);
    Py_XDECREF(op);
    Py_XDECREF(args);
    Py_XDECREF(slots);
    Py_XDECREF(stencil);
    Py_XDECREF(out_regs);
    Py_XDECREF(node_stores);
    return ok;
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
             "lower_nodes(lowerer, order, skipped, progress)\n\n"
             "Lower every node of ``order`` not in ``skipped``: array nodes through\n"
             "``lowerer.lower_array``, scalar operations here. ``progress(done, total)`` (or\n"
             "None) every 1024 nodes.");

static PyObject *lower_nodes(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "lower_nodes takes 4 arguments");
        return NULL;
    }
    State st;
    if (load_state(&st, argv[0]) < 0) return NULL;
    PyObject *order = argv[1], *skipped = argv[2], *progress = argv[3];
    if (!PyList_Check(order) || !PyAnySet_Check(skipped)) {
        PyErr_SetString(PyExc_TypeError, "lower_nodes: order must be a list, skipped a set");
        return NULL;
    }
    Py_ssize_t total = PyList_GET_SIZE(order);
    for (Py_ssize_t i = 0; i < total; i++) {
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
            PyObject *res = call(&st, s_lower_array, node, NULL);
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

/* the position being added by remaining_uses (along_views passes only the node) */
static PyObject *g_position;

static int add_position(State *st, PyObject *node) {
    return add_use(st->remaining, node, g_position);
}

PyDoc_STRVAR(remaining_uses_doc,
             "remaining_uses(lowerer, order, skipped, special)\n\n"
             "Fill ``lowerer.remaining``: node -> the positions in ``order`` that read it,\n"
             "latest first (a view's use is also a use of the arrays it looks into). Nodes in\n"
             "``skipped`` read nothing; those in ``special`` read ``lowerer.operands(node)``,\n"
             "others their args.");

static PyObject *remaining_uses(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "remaining_uses takes 4 arguments");
        return NULL;
    }
    State st;
    if (load_state(&st, argv[0]) < 0) return NULL;
    PyObject *order = argv[1], *skipped = argv[2], *special = argv[3];
    if (!PyList_Check(order) || !PyAnySet_Check(skipped) || !PyAnySet_Check(special)) {
        PyErr_SetString(PyExc_TypeError, "remaining_uses: bad argument types");
        return NULL;
    }
    PyObject *operands = PyObject_GetAttrString(st.lowerer, "operands");
    if (operands == NULL) return NULL;
    PyObject *result = NULL;
    for (Py_ssize_t i = PyList_GET_SIZE(order) - 1; i >= 0; i--) {
        PyObject *node = PyList_GET_ITEM(order, i);
        int skip = PySet_Contains(skipped, node);
        if (skip < 0) goto done;
        if (skip) continue;
        int sp = PySet_Contains(special, node);
        if (sp < 0) goto done;
        PyObject *args = sp ? PyObject_CallOneArg(operands, node) : attr(node, s_args);
        if (args == NULL) goto done;
        PyObject *seq = PySequence_Fast(args, "operands must be a sequence");
        Py_DECREF(args);
        g_position = seq ? PyLong_FromSsize_t(i) : NULL;
        if (g_position == NULL) {
            Py_XDECREF(seq);
            goto done;
        }
        int r = 0;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq) && r == 0; k++)
            r = along_views(&st, PySequence_Fast_GET_ITEM(seq, k), add_position);
        Py_DECREF(seq);
        Py_CLEAR(g_position);
        if (r < 0) goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    Py_DECREF(operands);
    return result;
}

/* 1 if node is in stop (a set, a dict or another container), 0 if not, -1 on error */
static int in_container(PyObject *stop, PyObject *node) {
    if (PyAnySet_Check(stop)) return PySet_Contains(stop, node);
    if (PyDict_Check(stop)) return PyDict_Contains(stop, node);
    return PySequence_Contains(stop, node);
}

/* need[node] as a C long, -1 on error */
static long need_of(PyObject *need, PyObject *node) {
    PyObject *v = PyDict_GetItemWithError(need, node);
    if (v == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "%R comes before its operands", node);
        return -1;
    }
    return PyLong_AsLong(v);
}

static int set_need(PyObject *need, PyObject *node, long value) {
    PyObject *v = PyLong_FromLong(value);
    if (v == NULL) return -1;
    int r = PyDict_SetItem(need, node, v);
    Py_DECREF(v);
    return r;
}

PyDoc_STRVAR(register_needs_doc,
             "register_needs(order, stop, need, reordered, general)\n\n"
             "Fill ``need`` (node -> the registers computing it needs; 0 for leaves and nodes in\n"
             "``stop``) and ``reordered`` (node -> its operands, the larger need first, where\n"
             "that is not their order; ties keep it) in one pass over ``order``, operands\n"
             "first. Nodes of one or two operands here, others by ``general(node, need)``,\n"
             "which returns (need, operands in visiting order or None).");

static PyObject *register_needs(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 5 || !PyDict_Check(argv[2]) || !PyDict_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "register_needs(order, stop, need, reordered, general)");
        return NULL;
    }
    PyObject *stop = argv[1], *need = argv[2], *reordered = argv[3], *general = argv[4];
    PyObject *order = PySequence_Fast(argv[0], "order must be a sequence");
    if (order == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(order); i++) {
        PyObject *node = PySequence_Fast_GET_ITEM(order, i);
        PyObject *args = attr(node, s_args);
        if (args == NULL) goto fail;
        if (!PyTuple_Check(args)) {
            Py_DECREF(args);
            PyErr_SetString(PyExc_TypeError, "a node's operands are a tuple");
            goto fail;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(args);
        int stopped = n ? in_container(stop, node) : 1;
        int r = stopped < 0 ? -1 : 0;
        if (r == 0 && stopped) {
            r = set_need(need, node, 0);
        } else if (r == 0 && n <= 2) {
            long a = need_of(need, PyTuple_GET_ITEM(args, 0));
            long b = n == 2 && !PyErr_Occurred() ? need_of(need, PyTuple_GET_ITEM(args, 1)) : 0;
            if (PyErr_Occurred()) {
                r = -1;
            } else if (n == 1) {
                r = set_need(need, node, a > 1 ? a : 1);
            } else {
                long most = a > b ? a : b;
                r = set_need(need, node, a == b ? a + 1 : (most > 1 ? most : 1));
                if (r == 0 && b > a) {
                    PyObject *swapped =
                        PyTuple_Pack(2, PyTuple_GET_ITEM(args, 1), PyTuple_GET_ITEM(args, 0));
                    r = swapped == NULL ? -1 : PyDict_SetItem(reordered, node, swapped);
                    Py_XDECREF(swapped);
                }
            }
        } else if (r == 0) {
            PyObject *res = PyObject_CallFunctionObjArgs(general, node, need, NULL);
            if (res == NULL || !PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
                if (res != NULL) PyErr_SetString(PyExc_TypeError, "general returns a pair");
                r = -1;
            } else {
                r = PyDict_SetItem(need, node, PyTuple_GET_ITEM(res, 0));
                PyObject *ops = PyTuple_GET_ITEM(res, 1);
                if (r == 0 && ops != Py_None) r = PyDict_SetItem(reordered, node, ops);
            }
            Py_XDECREF(res);
        }
        Py_DECREF(args);
        if (r < 0) goto fail;
    }
    Py_DECREF(order);
    Py_RETURN_NONE;
fail:
    Py_DECREF(order);
    return NULL;
}

/* the _Lowerer's methods for the array nodes (same code as the scalar path above) */

static PyObject *py_pick_register(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    State st;
    if (argc != 2 || !PyList_Check(argv[1]) || PyList_GET_SIZE(argv[1]) != 2) {
        PyErr_SetString(PyExc_TypeError, "pick_register(lowerer, regs)");
        return NULL;
    }
    if (load_state(&st, argv[0]) < 0) return NULL;
    int r = pick_register(&st, argv[1]);
    return r < 0 ? NULL : PyLong_FromLong(r);
}

static PyObject *py_evict(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    State st;
    long dst = argc == 3 ? PyLong_AsLong(argv[2]) : -1;
    if (dst == -1 && PyErr_Occurred()) return NULL;
    if (argc != 3 || !PyList_Check(argv[1]) || PyList_GET_SIZE(argv[1]) != 2 || dst < 0 ||
        dst > 1) {
        PyErr_SetString(PyExc_TypeError, "evict(lowerer, regs, 0 or 1)");
        return NULL;
    }
    if (load_state(&st, argv[0]) < 0 || evict(&st, argv[1], (int)dst) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_forget(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    State st;
    if (argc != 2) {
        PyErr_SetString(PyExc_TypeError, "forget(lowerer, node)");
        return NULL;
    }
    if (load_state(&st, argv[0]) < 0 || forget(&st, argv[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_store(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    State st;
    if (argc != 5) {
        PyErr_SetString(PyExc_TypeError, "store(lowerer, node, reg, offset, src)");
        return NULL;
    }
    if (load_state(&st, argv[0]) < 0 || store(&st, argv[1], argv[2], argv[3], argv[4]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *configure(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 4 || !PyType_Check(argv[0]) ||
        !PyType_IsSubtype((PyTypeObject *)argv[0], &PyTuple_Type) || !PyCallable_Check(argv[1]) ||
        !PyCallable_Check(argv[2]) || !PyAnySet_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "configure(Instr, scalar_name, store_name, views)");
        return NULL;
    }
    PyObject *store_names = PyDict_New();
    if (store_names == NULL) return NULL;
    Py_INCREF(argv[0]);
    Py_INCREF(argv[1]);
    Py_INCREF(argv[2]);
    Py_INCREF(argv[3]);
    Py_XSETREF(g_instr, argv[0]);
    Py_XSETREF(g_scalar_name, argv[1]);
    Py_XSETREF(g_store_name, argv[2]);
    Py_XSETREF(g_views, argv[3]);
    Py_XSETREF(g_store_names, store_names);
    Py_RETURN_NONE;
}

#define FASTCALL(f) ((PyCFunction)(void (*)(void))(f)), METH_FASTCALL

static PyMethodDef methods[] = {
    {"lower_nodes", FASTCALL(lower_nodes), lower_nodes_doc},
    {"remaining_uses", FASTCALL(remaining_uses), remaining_uses_doc},
    {"register_needs", FASTCALL(register_needs), register_needs_doc},
    {"pick_register", FASTCALL(py_pick_register),
     "pick_register(lowerer, regs): Belady's choice of a register of the pair regs."},
    {"evict", FASTCALL(py_evict),
     "evict(lowerer, regs, dst): spill the value in regs[dst] if it is still needed."},
    {"forget", FASTCALL(py_forget),
     "forget(lowerer, node): a value is dead; free its register and temporary slot."},
    {"store", FASTCALL(py_store),
     "store(lowerer, node, reg, offset, src): emit store_<class>__m_<reg> to offset\n"
     "(src: the slot read when reg is \"m\", else None)."},
    {"configure", FASTCALL(configure),
     "configure(Instr, scalar_name, store_name, views): the instruction type, the stencil\n"
     "names of a scalar operation (node, dst, forms) and of a store (class, reg), the view\n"
     "operation names."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.compiler._lower",
    "The per-node work of compiler/lower.py (see _lower.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__lower(void) {
    static const char *const roles[] = {"a", "b", "c"};
    struct {
        PyObject **var;
        const char *text;
    } names[] = {
        {&s_args, "args"},       {&s_op, "op"},           {&s_dtype, "dtype"},
        {&s_stencil, "stencil"}, {&s_shape, "shape"},     {&s_where, "where"},
        {&s_size, "size"},       {&s_nbytes, "nbytes"},   {&s_temp, "temp"},
        {&s_release, "release"}, {&s_slot_of, "slot_of"}, {&s_check_stencil, "check_stencil"},
        {&s_lower_array, "lower_array"}, {&s_out, "out"},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        *names[k].var = PyUnicode_InternFromString(names[k].text);
        if (*names[k].var == NULL) return NULL;
    }
    for (int k = 0; k < 3; k++) {
        s_role[k] = PyUnicode_InternFromString(roles[k]);
        if (s_role[k] == NULL) return NULL;
    }
    return PyModule_Create(&module_def);
}
