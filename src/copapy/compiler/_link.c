/* copapy.compiler._link: placing stencils (compiler/link.py) in C.
 *
 * A chain places one stencil per instruction: append its code, record a pending patch per
 * relocation (the operand slot of a role, a helper, a constant blob, the next stencil, a
 * fused loop's start). In the interpreter that was a few microseconds per instruction. This
 * is the one implementation of place, chain and the patches' addresses; the _Linker (link.py)
 * keeps the placed forms (_form), the helpers and the encodings other than x86's rel32.
 *
 * A pending patch is a list [site, kind, target type, target, addend] (link.py's _Pending).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

static PyObject *s_code, *s_pending, *s_forms, *s_form, *s_pad_to, *s_data, *s_code_type,
    *s_empty;
static PyObject *g_error; /* CompileError, set by configure() */
static PyObject *g_no_slots; /* () */

enum { SITE, KIND, TYPE, TARGET, ADDEND };         /* a pending patch */
enum { F_FUNC, F_CODE, F_RELOCS };                 /* link._Form */
enum { FN_NAME, FN_CODE, FN_THUMB, FN_ALIGN };     /* table.Function */
enum { R_OFFSET, R_KIND, R_TYPE, R_TARGET, R_ADDEND }; /* table.Reloc */

typedef struct {
    PyObject *linker;
    PyObject *code;    /* bytearray */
    PyObject *pending; /* list of pending patches */
} Linker;

static int load(Linker *ln, PyObject *linker) {
    ln->linker = linker;
    ln->code = PyObject_GetAttr(linker, s_code);
    ln->pending = ln->code ? PyObject_GetAttr(linker, s_pending) : NULL;
    /* the _Linker holds both for the whole call */
    Py_XDECREF(ln->code);
    Py_XDECREF(ln->pending);
    if (ln->pending == NULL) return -1;
    if (!PyByteArray_Check(ln->code) || !PyList_Check(ln->pending)) {
        PyErr_SetString(PyExc_TypeError, "unexpected _Linker state");
        return -1;
    }
    return 0;
}

static int is_tuple(PyObject *x, Py_ssize_t n) {
    if (PyTuple_Check(x) && PyTuple_GET_SIZE(x) >= n) return 1;
    PyErr_SetString(PyExc_TypeError, "unexpected form, function or relocation record");
    return 0;
}

/* the data offset of role in slots ((role, offset) pairs; the last pair of a role wins, as a
 * dict of them would), new reference */
static PyObject *slot_of(PyObject *slots, PyObject *role) {
    PyObject *found = NULL;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(slots); k++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(slots, k);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "slots must be (role, offset) pairs");
            return NULL;
        }
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(pair, 0), role, Py_EQ);
        if (eq < 0) return NULL;
        if (eq) found = PyTuple_GET_ITEM(pair, 1);
    }
    if (found == NULL) {
        PyErr_SetObject(PyExc_KeyError, role);
        return NULL;
    }
    Py_INCREF(found);
    return found;
}

static PyObject *pending_patch(Py_ssize_t site, PyObject *kind, PyObject *type, PyObject *target,
                               PyObject *addend) {
    PyObject *p = PyList_New(5);
    PyObject *s = p ? PyLong_FromSsize_t(site) : NULL;
    if (s == NULL) {
        Py_XDECREF(p);
        return NULL;
    }
    PyObject *items[] = {s, kind, type, target, addend};
    for (int k = 0; k < 5; k++) {
        if (k) Py_INCREF(items[k]);
        PyList_SET_ITEM(p, k, items[k]);
    }
    return p;
}

/* Append the placed form; its patches go to the pending list ("next"/"loop" ones also to
 * next_refs, or an error if that is NULL: a helper). Returns the start offset, -1 on error. */
static Py_ssize_t place(Linker *ln, PyObject *form, PyObject *slots, PyObject *next_refs) {
    if (!is_tuple(form, 3)) return -1;
    PyObject *func = PyTuple_GET_ITEM(form, F_FUNC), *code = PyTuple_GET_ITEM(form, F_CODE);
    PyObject *relocs = PyTuple_GET_ITEM(form, F_RELOCS);
    if (!is_tuple(func, 4) || !PyBytes_Check(code) || !PyTuple_Check(relocs)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "unexpected placed form");
        return -1;
    }
    Py_ssize_t align = PyLong_AsSsize_t(PyTuple_GET_ITEM(func, FN_ALIGN));
    if (align < 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "alignment must be >= 1");
        return -1;
    }
    if (PyByteArray_GET_SIZE(ln->code) % align) {
        PyObject *r = PyObject_CallMethodObjArgs(ln->linker, s_pad_to,
                                                 PyTuple_GET_ITEM(func, FN_ALIGN), NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    Py_ssize_t start = PyByteArray_GET_SIZE(ln->code);
    Py_ssize_t len = PyBytes_GET_SIZE(code);
    if (PyByteArray_Resize(ln->code, start + len) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(ln->code) + start, PyBytes_AS_STRING(code), (size_t)len);
    PyObject *slot_seq = NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(relocs); k++) {
        PyObject *reloc = PyTuple_GET_ITEM(relocs, k);
        if (!is_tuple(reloc, 5)) goto fail;
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(reloc, R_OFFSET));
        if (offset == -1 && PyErr_Occurred()) goto fail;
        PyObject *kind = PyTuple_GET_ITEM(reloc, R_KIND), *type = PyTuple_GET_ITEM(reloc, R_TYPE);
        PyObject *target = PyTuple_GET_ITEM(reloc, R_TARGET);
        PyObject *addend = PyTuple_GET_ITEM(reloc, R_ADDEND);
        PyObject *p;
        if (PyUnicode_CompareWithASCIIString(type, "slot") == 0) {
            /* most references: the operand slot of a role */
            if (slot_seq == NULL) {
                slot_seq = PySequence_Fast(slots, "slots must be a sequence");
                if (slot_seq == NULL) goto fail;
            }
            PyObject *slot = slot_of(slot_seq, target);
            PyObject *address = slot ? PyNumber_Add(slot, addend) : NULL;
            Py_XDECREF(slot);
            if (address == NULL) goto fail;
            p = pending_patch(start + offset, kind, s_data, s_empty, address);
            Py_DECREF(address);
            if (p == NULL) goto fail;
        } else {
            p = pending_patch(start + offset, kind, type, target, addend);
            if (p == NULL) goto fail;
            if (PyUnicode_CompareWithASCIIString(type, "next") == 0 ||
                PyUnicode_CompareWithASCIIString(type, "loop") == 0) {
                if (next_refs == NULL) {
                    PyErr_Format(g_error, "helper %S refers to cp_%S",
                                 PyTuple_GET_ITEM(func, FN_NAME), type);
                    Py_DECREF(p);
                    goto fail;
                }
                if (PyList_Append(next_refs, p) < 0) {
                    Py_DECREF(p);
                    goto fail;
                }
            }
        }
        int r = PyList_Append(ln->pending, p);
        Py_DECREF(p);
        if (r < 0) goto fail;
    }
    Py_XDECREF(slot_seq);
    return start;
fail:
    Py_XDECREF(slot_seq);
    return -1;
}

/* borrowed: the placed form of name (stripped of its trailing jump or whole), from the
 * _Linker's cache or its _form */
static PyObject *form_of(Linker *ln, PyObject *forms, PyObject *name, int strip) {
    PyObject *form = PyDict_GetItemWithError(PyTuple_GET_ITEM(forms, strip ? 0 : 1), name);
    if (form != NULL || PyErr_Occurred()) return form;
    form = PyObject_CallMethodObjArgs(ln->linker, s_form, name, strip ? Py_True : Py_False, NULL);
    Py_XDECREF(form); /* now in the cache */
    return form;
}

/* p[TYPE], p[ADDEND] = "code", p[ADDEND] + base */
static int resolve_to_code(PyObject *p, Py_ssize_t base) {
    PyObject *b = PyLong_FromSsize_t(base);
    PyObject *sum = b ? PyNumber_Add(PyList_GET_ITEM(p, ADDEND), b) : NULL;
    Py_XDECREF(b);
    if (sum == NULL) return -1;
    Py_INCREF(s_code_type);
    PyList_SetItem(p, TYPE, s_code_type);
    PyList_SetItem(p, ADDEND, sum);
    return 0;
}

PyDoc_STRVAR(chain_doc,
             "chain(linker, instrs, loop_begin, fori_begin, fori_end)\n\n"
             "Place one task's chain: cp_entry, the stencils of ``instrs`` (each followed\n"
             "directly by the next, so without its trailing jump), cp_ret. Resolves the\n"
             "references to the next stencil and a loop's backward branch: a fused loop's\n"
             "to the stencil after ``loop_begin``, ``fori_end``'s (cp.fori_loop) to the\n"
             "stencil after ``fori_begin``. Returns the entry offset (Thumb bit included).");

static PyObject *chain(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 5 || g_error == NULL) {
        PyErr_SetString(PyExc_TypeError, "chain(linker, instrs, loop_begin, fori_begin, "
                        "fori_end), once configured");
        return NULL;
    }
    Linker ln;
    if (load(&ln, argv[0]) < 0) return NULL;
    PyObject *loop_begin = argv[2], *fori_begin = argv[3], *fori_end = argv[4];
    PyObject *instrs = PySequence_Fast(argv[1], "instrs must be a sequence");
    if (instrs == NULL) return NULL;
    PyObject *forms = PyObject_GetAttr(ln.linker, s_forms);
    PyObject *waiting = PyList_New(0), *refs = PyList_New(0);
    PyObject *entry_name = PyUnicode_FromString("cp_entry");
    PyObject *ret_name = PyUnicode_FromString("cp_ret");
    PyObject *result = NULL;
    if (forms == NULL || waiting == NULL || refs == NULL || entry_name == NULL ||
        ret_name == NULL)
        goto done;
    if (!PyTuple_Check(forms) || PyTuple_GET_SIZE(forms) != 2 ||
        !PyDict_Check(PyTuple_GET_ITEM(forms, 0)) || !PyDict_Check(PyTuple_GET_ITEM(forms, 1))) {
        PyErr_SetString(PyExc_TypeError, "unexpected _Linker.forms");
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(instrs), last = n + 1;
    Py_ssize_t entry = -1, loop_start = -1, fori_start = -1;
    int after_begin = 0, after_fori = 0;
    for (Py_ssize_t k = 0; k <= last; k++) {
        PyObject *name, *slots;
        if (k == 0 || k == last) {
            name = k == 0 ? entry_name : ret_name;
            slots = g_no_slots;
        } else {
            PyObject *instr = PySequence_Fast_GET_ITEM(instrs, k - 1);
            if (!PyTuple_Check(instr) || PyTuple_GET_SIZE(instr) != 2) {
                PyErr_SetString(PyExc_TypeError, "an instruction is a (stencil, slots) pair");
                goto done;
            }
            name = PyTuple_GET_ITEM(instr, 0);
            slots = PyTuple_GET_ITEM(instr, 1);
        }
        PyObject *form = form_of(&ln, forms, name, k != last);
        if (form == NULL || !is_tuple(form, 3) || !is_tuple(PyTuple_GET_ITEM(form, F_FUNC), 6))
            goto done;
        PyObject *func = PyTuple_GET_ITEM(form, F_FUNC);
        if (k == last && PyObject_IsTrue(PyTuple_GET_ITEM(func, 5))) {
            PyErr_SetString(g_error, "cp_ret must not refer to anything");
            goto done;
        }
        if (PyList_SetSlice(refs, 0, PyList_GET_SIZE(refs), NULL) < 0) goto done;
        Py_ssize_t start = place(&ln, form, slots, refs);
        if (start < 0) goto done;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(waiting); j++)
            if (resolve_to_code(PyList_GET_ITEM(waiting, j), start) < 0) goto done;
        if (after_begin) loop_start = start;
        if (after_fori) fori_start = start;
        int is_name = PyUnicode_Check(name);
        after_begin = is_name && PyUnicode_Compare(name, loop_begin) == 0;
        after_fori = is_name && PyUnicode_Compare(name, fori_begin) == 0;
        int fori = is_name && PyUnicode_Compare(name, fori_end) == 0;
        Py_ssize_t back = fori ? fori_start : loop_start;
        if (PyList_SetSlice(waiting, 0, PyList_GET_SIZE(waiting), NULL) < 0) goto done;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(refs); j++) {
            PyObject *p = PyList_GET_ITEM(refs, j);
            if (PyUnicode_CompareWithASCIIString(PyList_GET_ITEM(p, TYPE), "next") == 0) {
                if (PyList_Append(waiting, p) < 0) goto done;
            } else if (back < 0) {
                PyErr_Format(g_error, "%S branches back without a %S before it", name,
                             fori ? fori_begin : loop_begin);
                goto done;
            } else if (resolve_to_code(p, back) < 0) { /* a loop's back branch */
                goto done;
            }
        }
        if (k == 0) {
            int thumb = PyObject_IsTrue(PyTuple_GET_ITEM(func, FN_THUMB));
            if (thumb < 0) goto done;
            entry = start | thumb;
        }
    }
    result = PyLong_FromSsize_t(entry);
done:
    Py_DECREF(instrs);
    Py_XDECREF(forms);
    Py_XDECREF(waiting);
    Py_XDECREF(refs);
    Py_XDECREF(entry_name);
    Py_XDECREF(ret_name);
    return result;
}

PyDoc_STRVAR(place_doc,
             "place(linker, form, slots, next_refs)\n\n"
             "Append a placed form; its patches go to ``linker.pending`` (references to the\n"
             "next stencil or a loop's start also to ``next_refs``; None: a helper, which\n"
             "must have none). Returns the start offset.");

static PyObject *py_place(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 4 || g_error == NULL || (argv[3] != Py_None && !PyList_Check(argv[3]))) {
        PyErr_SetString(PyExc_TypeError, "place(linker, form, slots, next_refs), configured");
        return NULL;
    }
    Linker ln;
    if (load(&ln, argv[0]) < 0) return NULL;
    Py_ssize_t start = place(&ln, argv[1], argv[2], argv[3] == Py_None ? NULL : argv[3]);
    return start < 0 ? NULL : PyLong_FromSsize_t(start);
}

/* the 64-bit value of an int item, or -1 with an error set */
static int as_i64(PyObject *x, long long *out) {
    *out = PyLong_AsLongLong(x);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* offsets[target] + addend */
static int offset_plus(PyObject *linker, const char *offsets, PyObject *target, long long addend,
                       long long *out) {
    PyObject *table = PyObject_GetAttrString(linker, offsets);
    if (table == NULL) return -1;
    PyObject *base = PyObject_GetItem(table, target);
    Py_DECREF(table);
    if (base == NULL) return -1;
    long long b;
    int r = as_i64(base, &b);
    Py_DECREF(base);
    *out = b + addend;
    return r;
}

PyDoc_STRVAR(resolve_doc,
             "resolve(linker, data_offset, rel32, arch)\n\n"
             "The address of every pending patch (data: data_offset + addend; code: addend;\n"
             "func and rodata: the placed offset + addend). Patches of the kind ``rel32`` (the\n"
             "x86 PC-relative word, most patches there) are written into ``linker.code`` here;\n"
             "the others are returned as (site, kind, address) for link.py to encode.");

static PyObject *resolve(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 4 || g_error == NULL) {
        PyErr_SetString(PyExc_TypeError, "resolve(linker, data_offset, rel32, arch), configured");
        return NULL;
    }
    Linker ln;
    long long data_offset;
    if (load(&ln, argv[0]) < 0 || as_i64(argv[1], &data_offset) < 0) return NULL;
    PyObject *rel32 = argv[2], *arch = argv[3];
    PyObject *others = PyList_New(0);
    if (others == NULL) return NULL;
    /* whether a kind is rel32, by identity (the table's kinds are shared objects, and
     * comparing frozen dataclasses field by field per patch is slow) */
    PyObject *seen_kind[16];
    int seen_rel32[16];
    int n_seen = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ln.pending); k++) {
        PyObject *p = PyList_GET_ITEM(ln.pending, k);
        if (!PyList_Check(p) || PyList_GET_SIZE(p) != 5) {
            PyErr_SetString(PyExc_TypeError, "a pending patch is a list of 5");
            goto fail;
        }
        PyObject *kind = PyList_GET_ITEM(p, KIND), *type = PyList_GET_ITEM(p, TYPE);
        PyObject *target = PyList_GET_ITEM(p, TARGET);
        long long site, addend, address;
        if (as_i64(PyList_GET_ITEM(p, SITE), &site) < 0 ||
            as_i64(PyList_GET_ITEM(p, ADDEND), &addend) < 0)
            goto fail;
        if (PyUnicode_CompareWithASCIIString(type, "data") == 0) {
            address = data_offset + addend;
        } else if (PyUnicode_CompareWithASCIIString(type, "code") == 0) {
            address = addend;
        } else if (PyUnicode_CompareWithASCIIString(type, "func") == 0) {
            if (offset_plus(ln.linker, "func_offsets", target, addend, &address) < 0) goto fail;
        } else if (PyUnicode_CompareWithASCIIString(type, "rodata") == 0) {
            if (offset_plus(ln.linker, "rodata_offsets", target, addend, &address) < 0) goto fail;
        } else {
            PyErr_Format(g_error, "unresolved reference to %S %R", type, target);
            goto fail;
        }
        int is_rel32 = -1;
        for (int j = 0; j < n_seen; j++)
            if (seen_kind[j] == kind) is_rel32 = seen_rel32[j];
        if (is_rel32 < 0) {
            is_rel32 = PyObject_RichCompareBool(kind, rel32, Py_EQ);
            if (is_rel32 < 0) goto fail;
            if (n_seen < 16) {
                seen_kind[n_seen] = kind; /* alive: the pending list holds it */
                seen_rel32[n_seen++] = is_rel32;
            }
        }
        if (is_rel32) {
            long long value = address - site;
            if (value < -0x80000000LL || value >= 0x80000000LL) {
                PyObject *v = PyLong_FromLongLong(value);
                PyObject *hex = v ? PyNumber_ToBase(v, 16) : NULL;
                if (hex != NULL)
                    PyErr_Format(g_error, "program too large for %S: value %S does not fit in 32 "
                                 "bits", arch, hex);
                Py_XDECREF(hex);
                Py_XDECREF(v);
                goto fail;
            }
            if (site < 0 || site + 4 > PyByteArray_GET_SIZE(ln.code)) {
                PyErr_SetString(PyExc_IndexError, "a patch site outside the code");
                goto fail;
            }
            uint32_t word = (uint32_t)(int32_t)value;
            unsigned char *at = (unsigned char *)PyByteArray_AS_STRING(ln.code) + site;
            for (int b = 0; b < 4; b++) at[b] = (unsigned char)(word >> (8 * b));
            continue;
        }
        PyObject *item = Py_BuildValue("(LOL)", site, kind, address);
        if (item == NULL) goto fail;
        int r = PyList_Append(others, item);
        Py_DECREF(item);
        if (r < 0) goto fail;
    }
    return others;
fail:
    Py_DECREF(others);
    return NULL;
}

static PyObject *configure(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 1 || !PyExceptionClass_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "configure(CompileError)");
        return NULL;
    }
    Py_INCREF(argv[0]);
    Py_XSETREF(g_error, argv[0]);
    Py_RETURN_NONE;
}

#define FASTCALL(f) ((PyCFunction)(void (*)(void))(f)), METH_FASTCALL

static PyMethodDef methods[] = {
    {"chain", FASTCALL(chain), chain_doc},
    {"place", FASTCALL(py_place), place_doc},
    {"resolve", FASTCALL(resolve), resolve_doc},
    {"configure", FASTCALL(configure), "configure(CompileError): the error type raised."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "copapy.compiler._link",
    "Placing stencils for compiler/link.py (see _link.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__link(void) {
    struct {
        PyObject **var;
        const char *text;
    } names[] = {
        {&s_code, "code"},   {&s_pending, "pending"}, {&s_forms, "forms"},
        {&s_form, "_form"},  {&s_pad_to, "pad_to"},   {&s_data, "data"},
        {&s_code_type, "code"}, {&s_empty, ""},
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        *names[k].var = PyUnicode_InternFromString(names[k].text);
        if (*names[k].var == NULL) return NULL;
    }
    g_no_slots = PyTuple_New(0);
    if (g_no_slots == NULL) return NULL;
    return PyModule_Create(&module_def);
}
