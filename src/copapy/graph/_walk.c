/* copapy.graph._walk: the post-order walk of graph/traverse.py in C, and the window walk of
 * the range analysis' cp.where splitting (graph/ranges.py).
 *
 * live_nodes is called for every compile (the closure, the schedule's reordered walk) and
 * every cp.grad; in Python its loop cost about a microsecond per node. Same walk, same order:
 * one iterative depth-first walk, operands before users, leaves emitted without being pushed.
 *
 * side_window is called for both sides of every cp.where the range check splits (ranges.py's
 * _side_window is the reference it is tested against, tests/test_ranges_window.py); in Python
 * the walk of its ~16 nodes was a third of a guard-dense graph's analysis. expose_top is the
 * exposure walk over the top analysis' nodes (ranges.py's _expose_top, the reference), one
 * visit per node of a program that has a finding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

static PyObject *s_args, *s_op, *s_serial, *s_state, *s_where;

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

/* 1 if the node is an inner node to push (it has operands, or reorder gives it some: an input
 * that graph/lift.py reads through its alias, and is not in stop), 0 for a leaf; *args gets a
 * new reference to its args when 1 */
static int inner(PyObject *stop, PyObject *reorder, PyObject *node, PyObject **args) {
    *args = PyObject_GetAttr(node, s_args);
    if (*args == NULL) return -1;
    int r = PyObject_IsTrue(*args);
    if (r == 0 && reorder != NULL) r = PyDict_Contains(reorder, node);
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
             "leaves; ``reorder`` (a dict or None) gives some nodes' operands in visiting\n"
             "order (a node without args that has an entry is walked through it).");

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
        r = inner(stop, reorder, root, &args);
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
                r = inner(stop, reorder, child, &args);
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



/* Node's slots side_window reads, at their offsets when the node is of the type they were
 * found on (Node is a __slots__ class; any other object is read by attribute) */
enum { F_ARGS, F_OP, F_SERIAL, N_FIELDS };
static PyObject *slot_type; /* strong: the type the offsets belong to */
static Py_ssize_t slot_offset[N_FIELDS];

/* finds the slot offsets of type (0: it has no such slots, read by attribute; -1: error) */
static int bind_slots(PyTypeObject *type) {
    if ((PyObject *)type == slot_type) return 1;
    PyObject *names[N_FIELDS] = {s_args, s_op, s_serial};
    Py_ssize_t offsets[N_FIELDS];
    for (int k = 0; k < N_FIELDS; k++) {
        PyObject *d = PyObject_GetAttr((PyObject *)type, names[k]);
        if (d == NULL) {
            PyErr_Clear();
            return 0;
        }
        int slot = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                   ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (slot) offsets[k] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!slot) return 0;
    }
    memcpy(slot_offset, offsets, sizeof offsets);
    Py_INCREF(type);
    Py_XSETREF(slot_type, (PyObject *)type);
    return 1;
}

/* node.<field> (a new reference) */
static PyObject *field(PyObject *node, int f) {
    static PyObject *const *names[N_FIELDS] = {&s_args, &s_op, &s_serial};
    if ((PyObject *)Py_TYPE(node) != slot_type) return PyObject_GetAttr(node, *names[f]);
    PyObject *value = *(PyObject **)((char *)node + slot_offset[f]);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "node has no %U yet", *names[f]);
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

/* a set of pointers (open addressing; the walk's seen nodes, without hashing objects) */
typedef struct {
    PyObject **slots;
    size_t mask, size;
} PtrSet;

static size_t ptr_hash(PyObject *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x;
}

/* 1 if p was added, 0 if it was there, -1 on error */
static int ptrset_add(PtrSet *set, PyObject *p) {
    if (2 * (set->size + 1) > set->mask + 1) {
        size_t cap = set->slots ? 2 * (set->mask + 1) : 64;
        PyObject **slots = PyMem_Calloc(cap, sizeof(PyObject *));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; set->slots && i <= set->mask; i++) {
            PyObject *q = set->slots[i];
            if (q == NULL) continue;
            size_t j = ptr_hash(q) & (cap - 1);
            while (slots[j] != NULL) j = (j + 1) & (cap - 1);
            slots[j] = q;
        }
        PyMem_Free(set->slots);
        set->slots = slots;
        set->mask = cap - 1;
    }
    size_t j = ptr_hash(p) & set->mask;
    while (set->slots[j] != NULL) {
        if (set->slots[j] == p) return 0;
        j = (j + 1) & set->mask;
    }
    set->slots[j] = p;
    set->size++;
    return 1;
}

/* 1 if key is in the mapping (a dict, or anything `in` works on), 0 if not, -1 on error */
static int contains(PyObject *mapping, PyObject *key) {
    if (PyDict_CheckExact(mapping)) {
        return PyDict_GET_SIZE(mapping) ? PyDict_Contains(mapping, key) : 0;
    }
    return PySequence_Contains(mapping, key);
}

/* a growable array of borrowed node pointers (the nodes are kept alive by the side's cone) */
typedef struct {
    PyObject **items;
    Py_ssize_t size, cap;
} Nodes;

static int nodes_push(Nodes *a, PyObject *node) {
    if (a->size == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 32;
        PyObject **items = PyMem_Realloc(a->items, (size_t)cap * sizeof(PyObject *));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        a->items = items;
        a->cap = cap;
    }
    a->items[a->size++] = node;
    return 0;
}

/* node.serial as a C integer (-1 with an exception set on error) */
static long long serial_of(PyObject *node) {
    PyObject *v = field(node, F_SERIAL);
    if (v == NULL) return -1;
    long long s = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (s == -1 && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "a node's serial is never negative");
    }
    return s;
}


/* the keys of a small dict as an array (membership by identity: nodes hash by identity), or
 * the dict itself when it is larger */
enum { FEW = 8 };
typedef struct {
    PyObject *dict;
    PyObject *keys[FEW];
    Py_ssize_t n; /* -1: look up in dict */
} Keys;

static void keys_of(Keys *k, PyObject *dict) {
    k->dict = dict;
    k->n = -1;
    if (PyDict_GET_SIZE(dict) > FEW) return;
    PyObject *key, *value;
    Py_ssize_t pos = 0, n = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        /* only keys that compare by identity (object's ==, as a node's): then being a key
         * is being one of them; others go through the dict */
        if (Py_TYPE(key)->tp_richcompare != PyBaseObject_Type.tp_richcompare) return;
        k->keys[n++] = key;
    }
    k->n = n;
}

/* 1 if node is a key, 0 if not, -1 on error */
static int keys_has(const Keys *k, PyObject *node) {
    if (k->n < 0) return PyDict_Contains(k->dict, node);
    for (Py_ssize_t i = 0; i < k->n; i++) {
        if (k->keys[i] == node) return 1;
    }
    return 0;
}

/* whether the BFS walk ends at node (1), enters it (0, *args a new reference), -1 on error:
 * narrowed nodes, leaves, states, env's nodes and nodes older than first end it */
static int window_end(PyObject *node, const Keys *narrowed, PyObject *env, long long first,
                      PyObject **args, long long *serial) {
    *args = NULL;
    int r = keys_has(narrowed, node);
    if (r != 0) return r;
    PyObject *a = field(node, F_ARGS);
    if (a == NULL) return -1;
    if (!PyTuple_Check(a)) {
        Py_DECREF(a);
        PyErr_SetString(PyExc_TypeError, "node.args must be a tuple");
        return -1;
    }
    if (PyTuple_GET_SIZE(a) == 0) {
        Py_DECREF(a);
        return 1;
    }
    PyObject *op = field(node, F_OP);
    if (op == NULL) goto fail;
    r = op == s_state ? 1 : PyUnicode_Check(op) ? PyUnicode_Compare(op, s_state) == 0 : 0;
    Py_DECREF(op);
    if (r) goto end;
    if (PyErr_Occurred()) goto fail;
    r = contains(env, node);
    if (r < 0) goto fail;
    if (r) goto end;
    *serial = serial_of(node);
    if (*serial < 0) goto fail;
    if (*serial < first) goto end;
    *args = a;
    return 0;
end:
    Py_DECREF(a);
    return 1;
fail:
    Py_DECREF(a);
    return -1;
}

PyDoc_STRVAR(side_window_doc,
             "side_window(side, narrowed, env, first, limit)\n\n"
             "The operations among the ``limit`` nodes of side's cone nearest it (breadth\n"
             "first) that depend on a node of the dict ``narrowed``, in creation order, and\n"
             "how many nodes the walk took: graph/ranges.py's _side_window.");

static PyObject *side_window(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 5) {
        PyErr_SetString(PyExc_TypeError, "side_window takes 5 arguments");
        return NULL;
    }
    PyObject *side = argv[0], *narrowed = argv[1], *env = argv[2];
    if (!PyDict_Check(narrowed)) {
        PyErr_SetString(PyExc_TypeError, "narrowed must be a dict");
        return NULL;
    }
    long long first = PyLong_AsLongLong(argv[3]);
    if (first == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(argv[4]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    Nodes queue = {NULL, 0, 0}, region = {NULL, 0, 0}, moved = {NULL, 0, 0};
    long long *serials = NULL;
    PtrSet seen = {NULL, 0, 0};
    PyObject *out = NULL;
    Py_ssize_t head = 0, walked = 0;
    int reached = 0;
    Keys keys;
    if (bind_slots(Py_TYPE(side)) < 0) goto done;
    keys_of(&keys, narrowed);
    if (ptrset_add(&seen, side) < 0 || nodes_push(&queue, side) < 0) goto done;
    serials = PyMem_Malloc((size_t)(limit > 0 ? limit : 1) * sizeof(long long));
    if (serials == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    reached = keys_has(&keys, side);
    if (reached < 0) goto done;
    while (head < queue.size && region.size < limit) {
        PyObject *n = queue.items[head++], *args;
        long long serial = 0;
        walked++;
        int r = window_end(n, &keys, env, first, &args, &serial);
        if (r < 0) goto done;
        if (r) continue;
        serials[region.size] = serial;
        r = nodes_push(&region, n);
        for (Py_ssize_t k = 0; r == 0 && k < PyTuple_GET_SIZE(args); k++) {
            PyObject *arg = PyTuple_GET_ITEM(args, k);
            int added = ptrset_add(&seen, arg);
            if (added <= 0) {
                r = added;
                continue;
            }
            if (nodes_push(&queue, arg) < 0) {
                r = -1;
                break;
            }
            int hit = keys_has(&keys, arg);
            if (hit < 0) r = -1;
            if (hit > 0) reached = 1;
        }
        Py_DECREF(args); /* the node holds its args: the borrowed operands stay alive */
        if (r < 0) goto done;
    }
    out = PyList_New(0);
    if (out == NULL || !reached) goto done;
    /* creation order (insertion sort: at most limit nodes; serials are unique) */
    for (Py_ssize_t i = 1; i < region.size; i++) {
        PyObject *n = region.items[i];
        long long s = serials[i];
        Py_ssize_t j = i;
        for (; j > 0 && serials[j - 1] > s; j--) {
            serials[j] = serials[j - 1];
            region.items[j] = region.items[j - 1];
        }
        serials[j] = s;
        region.items[j] = n;
    }
    /* the region's nodes with an operand that is narrowed or depends on a narrowed one (its
     * operands come before it) */
    for (Py_ssize_t i = 0; i < region.size; i++) {
        PyObject *n = region.items[i];
        PyObject *args = field(n, F_ARGS);
        if (args == NULL) goto fail;
        int depends = 0;
        for (Py_ssize_t k = 0; !depends && k < PyTuple_GET_SIZE(args); k++) {
            PyObject *arg = PyTuple_GET_ITEM(args, k);
            for (Py_ssize_t m = 0; !depends && m < moved.size; m++) {
                depends = moved.items[m] == arg;
            }
            if (!depends) depends = keys_has(&keys, arg);
        }
        Py_DECREF(args);
        if (depends < 0) goto fail;
        if (depends && (nodes_push(&moved, n) < 0 || PyList_Append(out, n) < 0)) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyMem_Free(queue.items);
    PyMem_Free(region.items);
    PyMem_Free(moved.items);
    PyMem_Free(serials);
    PyMem_Free(seen.slots);
    if (out == NULL) return NULL;
    return Py_BuildValue("(Nn)", out, walked);
}

/* 1 if op is the string name, 0 if not, -1 on error */
static int is_op(PyObject *op, PyObject *name) {
    if (op == name) return 1;
    if (!PyUnicode_Check(op)) return 0;
    int r = PyUnicode_Compare(op, name);
    if (r == -1 && PyErr_Occurred()) return -1;
    return r == 0;
}

/* pushes node's operands for the exposure walk: those with operands of their own (a leaf has
 * no finding), not visited, that the analysis has a range for; a where whose condition the
 * ranges decide only its condition and the side taken */
static int expose_args(Nodes *stack, PyObject *node, PyObject *args, PyObject *visited,
                       PyObject *ranges, PyObject *true_, PyObject *false_) {
    Py_ssize_t n = PyTuple_GET_SIZE(args), skip = -1;
    PyObject *op = field(node, F_OP);
    if (op == NULL) return -1;
    int where = is_op(op, s_where);
    Py_DECREF(op);
    if (where < 0) return -1;
    if (where && n == 3) {
        PyObject *decided = PyDict_GetItemWithError(ranges, PyTuple_GET_ITEM(args, 0));
        if (decided == NULL && PyErr_Occurred()) return -1;
        if (decided != NULL) {
            int t = PyObject_RichCompareBool(decided, true_, Py_EQ);
            int f = t ? 0 : PyObject_RichCompareBool(decided, false_, Py_EQ);
            if (t < 0 || f < 0) return -1;
            if (t) skip = 2;
            if (f) skip = 1;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k == skip) continue;
        PyObject *a = PyTuple_GET_ITEM(args, k), *aargs = field(a, F_ARGS);
        if (aargs == NULL) return -1;
        int inner = PyObject_IsTrue(aargs);
        Py_DECREF(aargs);
        if (inner > 0) {
            int seen = PySet_Contains(visited, a);
            inner = seen < 0 ? -1 : !seen;
        }
        if (inner > 0) inner = PyDict_Contains(ranges, a);
        if (inner < 0) return -1;
        if (inner && nodes_push(stack, a) < 0) return -1;
    }
    return 0;
}

PyDoc_STRVAR(expose_top_doc,
             "expose_top(stack, visited, findings, sides, env, ranges, found, work, TRUE, "
             "FALSE)\n\n"
             "The exposure walk over the top analysis' nodes from those on ``stack`` (emptied):\n"
             "visited nodes go into ``visited``, those with findings onto ``found``, the split\n"
             "sides met ((analysis, side) pairs) onto ``work``: graph/ranges.py's _expose_top.");

static PyObject *expose_top(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 10 || !PyList_Check(argv[0]) || !PyAnySet_Check(argv[1]) ||
        !PyDict_Check(argv[2]) || !PyDict_Check(argv[3]) || !PyDict_Check(argv[4]) ||
        !PyDict_Check(argv[5]) || !PyList_Check(argv[6]) || !PyList_Check(argv[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "expose_top(stack: list, visited: set, findings: dict, sides: dict, "
                        "env: dict, ranges: dict, found: list, work: list, TRUE, FALSE)");
        return NULL;
    }
    PyObject *list = argv[0], *visited = argv[1], *findings = argv[2], *sides = argv[3];
    PyObject *env = argv[4], *ranges = argv[5], *found = argv[6], *work = argv[7];
    PyObject *true_ = argv[8], *false_ = argv[9];
    Nodes stack = {NULL, 0, 0};
    int ok = 0;
    if (PyList_GET_SIZE(list)) bind_slots(Py_TYPE(PyList_GET_ITEM(list, 0)));
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(list); k++) {
        if (nodes_push(&stack, PyList_GET_ITEM(list, k)) < 0) goto done;
    }
    /* the caller holds the roots; every other node is an operand of one held */
    while (stack.size) {
        PyObject *node = stack.items[--stack.size];
        int r = PySet_Contains(visited, node);
        if (r < 0) goto done;
        if (r) continue;
        if (PySet_Add(visited, node) < 0) goto done;
        r = PyDict_Contains(findings, node);
        if (r < 0 || (r && PyList_Append(found, node) < 0)) goto done;
        PyObject *split = PyDict_GetItemWithError(sides, node);
        if (split == NULL && PyErr_Occurred()) goto done;
        PyObject *args = field(node, F_ARGS);
        if (args == NULL) goto done;
        if (!PyTuple_Check(args)) {
            Py_DECREF(args);
            PyErr_SetString(PyExc_TypeError, "node.args must be a tuple");
            goto done;
        }
        if (split == NULL) {
            r = PyTuple_GET_SIZE(args) ? contains(env, node) : 1;
            if (r == 0) r = expose_args(&stack, node, args, visited, ranges, true_, false_);
            Py_DECREF(args);
            if (r < 0) goto done;
            continue;
        }
        /* a split where: its condition and what is not a split side here, the sides in
         * their analyses */
        PyObject *pairs = PySequence_Fast(split, "sides values must be sequences");
        r = pairs == NULL || PyTuple_GET_SIZE(args) == 0 ? -1 : 0;
        if (r == 0) r = nodes_push(&stack, PyTuple_GET_ITEM(args, 0));
        for (Py_ssize_t k = 1; r == 0 && k < PyTuple_GET_SIZE(args); k++) {
            PyObject *a = PyTuple_GET_ITEM(args, k);
            int side = 0;
            for (Py_ssize_t m = 0; !side && m < PySequence_Fast_GET_SIZE(pairs); m++) {
                PyObject *pair = PySequence_Fast_GET_ITEM(pairs, m);
                if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                    PyErr_SetString(PyExc_TypeError, "a split is (analysis, side) pairs");
                    r = -1;
                    break;
                }
                side = PyTuple_GET_ITEM(pair, 1) == a;
            }
            if (r == 0 && !side) r = nodes_push(&stack, a);
        }
        for (Py_ssize_t m = 0; r == 0 && m < PySequence_Fast_GET_SIZE(pairs); m++) {
            r = PyList_Append(work, PySequence_Fast_GET_ITEM(pairs, m));
        }
        if (r < 0 && pairs != NULL && !PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "a split where has operands");
        }
        Py_XDECREF(pairs);
        Py_DECREF(args);
        if (r < 0) goto done;
    }
    ok = 1;
done:
    PyMem_Free(stack.items);
    if (PyList_SetSlice(list, 0, PyList_GET_SIZE(list), NULL) < 0 || !ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"live_nodes", (PyCFunction)(void (*)(void))live_nodes, METH_FASTCALL, live_nodes_doc},
    {"expose_top", (PyCFunction)(void (*)(void))expose_top, METH_FASTCALL, expose_top_doc},
    {"side_window", (PyCFunction)(void (*)(void))side_window, METH_FASTCALL, side_window_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.graph._walk",
    "The post-order walk of graph/traverse.py and the range analysis' window walk "
    "(see _walk.c).",
    -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void) {
    s_args = PyUnicode_InternFromString("args");
    s_op = PyUnicode_InternFromString("op");
    s_serial = PyUnicode_InternFromString("serial");
    s_state = PyUnicode_InternFromString("state");
    s_where = PyUnicode_InternFromString("where");
    if (s_args == NULL || s_op == NULL || s_serial == NULL || s_state == NULL ||
        s_where == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
