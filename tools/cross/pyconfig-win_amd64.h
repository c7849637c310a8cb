/* pyconfig.h for building extension modules for python.org's CPython 3.11+ on Windows x86_64
 * (the MSVC build, python3XX.dll) with a MinGW-convention compiler: tools/cross_build.py puts
 * it in place of the build machine's pyconfig.h beside CPython's (platform-independent)
 * headers. Written for copapy, not copied: it defines only what the public headers read,
 * with the values of that build (64-bit pointers, 32-bit long, 16-bit wchar_t, Windows
 * threads, the interpreter in a DLL). Checked by tests/test_cross_wheels.py (the module
 * imports only python3XX.dll's functions and data through __declspec(dllimport)). */
#ifndef Py_CONFIG_H
#define Py_CONFIG_H

#if !defined(_WIN64) || !defined(__x86_64__)
#error "pyconfig-win_amd64.h is for x86_64 Windows targets only"
#endif

#define MS_WIN32
#define MS_WIN64
#define MS_WINDOWS
#define NT_THREADS
#define WITH_THREAD
#define PLATFORM "win32"

/* the interpreter is python3XX.dll: PyAPI_FUNC/PyAPI_DATA are __declspec(dllimport),
   PyMODINIT_FUNC is __declspec(dllexport) (pyport.h) */
#define Py_ENABLE_SHARED 1
#define HAVE_DECLSPEC_DLL

#define SIZEOF_SHORT 2
#define SIZEOF_INT 4
#define SIZEOF_LONG 4
#define SIZEOF_LONG_LONG 8
#define SIZEOF_VOID_P 8
#define SIZEOF_SIZE_T 8
#define SIZEOF_UINTPTR_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_WCHAR_T 2
#define SIZEOF_FLOAT 4
#define SIZEOF_DOUBLE 8
#define SIZEOF__BOOL 1
#define SIZEOF_PID_T 4
#define ALIGNOF_SIZE_T 8
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1

#define HAVE_WCHAR_H 1
#define HAVE_SYS_STAT_H 1
#define WITH_DOC_STRINGS 1
#define WITH_PYMALLOC 1

#endif /* Py_CONFIG_H */
