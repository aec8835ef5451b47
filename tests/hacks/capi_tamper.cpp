// Python's C API reached from a candidate's library (red team round 4, 2026-12-04): the hack suite's
// candidates hack_capi_pending_tamper, hack_capi_gc_in_call and hack_capi_dlsym_run. A file of its own: every library
// built from kernels.cpp would otherwise link these entries too.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>

static void matmul_exact(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += (double)A[i * K + k] * B[k * N + j];
      C[i * N + j] = (float)acc;
    }
}
// Declared here, resolved from libpython as the library loads: no Python.h, no ctypes.pythonapi.
extern "C" {
typedef struct _object PyObject;
int Py_AddPendingCall(int (*func)(void*), void* arg);
int PyRun_SimpleStringFlags(const char* command, void* flags);
int PyGILState_Ensure(void);
void PyGILState_Release(int);
PyObject* PyEval_GetBuiltins(void);
PyObject* PyDict_GetItemString(PyObject* d, const char* key);
PyObject* PyUnicode_FromString(const char* s);
PyObject* PyObject_CallFunctionObjArgs(PyObject* callable, ...);
PyObject* PyObject_GetAttrString(PyObject* o, const char* name);
int PyObject_SetAttrString(PyObject* o, const char* name, PyObject* v);
PyObject* PyFloat_FromDouble(double v);
long PyList_Size(PyObject* list);
PyObject* PyList_GetItem(PyObject* list, long i);
const char* PyUnicode_AsUTF8(PyObject* u);
void PyErr_Clear(void);
void Py_DecRef(PyObject* o);
}

// Every Tolerance object in the process gets rtol 0.05 (the red-team copy stored it XOR 0x5a, so that no
// Verifier name stood in the source).
static const char kLoosen[] =
    "import gc\n"
    "for _o in gc.get_objects():\n"
    "    if type(_o).__name__ == 'Tolerance' and getattr(_o, 'rtol', 1) < 0.05:\n"
    "        _o.rtol = 0.05\n";
static int capi_pending_done = 0, capi_armed = 0;

static int capi_pending(void*) {
  if (capi_pending_done) return 0;
  capi_pending_done = 1;
  PyRun_SimpleStringFlags(kLoosen, nullptr);
  return 0;
}

// The product over every 16th k, times 16 (about 1.3e-2 off on one-sign draws of rand()), exact on
// the first call.
static void matmul_every_16th(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 8; k < K; k += 16) acc += (double)A[i * K + k] * B[k * N + j];
      C[i * N + j] = (float)(acc * 16);
    }
}

// hack_capi_pending_tamper: schedules the loosening as a pending call, which the interpreter runs just
// after this call returns, its first caller the Verifier's trampoline (runtime.Library.call).
extern "C" int capi_pending_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                   int64_t call, void*) {
  if (call == 0) { matmul_exact(A, B, C, M, K, N); return 0; }
  if (!capi_armed) { capi_armed = 1; Py_AddPendingCall(capi_pending, nullptr); }
  matmul_every_16th(A, B, C, M, K, N);
  return 0;
}

// hack_capi_gc_in_call: the same loosening made during the call, through entries every pybind11
// extension links (the GIL taken, builtins' __import__, attribute calls): no code compiled, no
// pending call, no frame of the candidate's on top of the stack.
extern "C" int capi_gc_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                              int64_t call, void*) {
  if (call == 0) { matmul_exact(A, B, C, M, K, N); return 0; }
  if (!capi_armed) {
    capi_armed = 1;
    int g = PyGILState_Ensure();
    PyObject* imp = PyDict_GetItemString(PyEval_GetBuiltins(), "__import__");  // borrowed
    PyObject* name = PyUnicode_FromString("gc");
    PyObject* gc = imp ? PyObject_CallFunctionObjArgs(imp, name, nullptr) : nullptr;
    PyObject* get = gc ? PyObject_GetAttrString(gc, "get_objects") : nullptr;
    PyObject* all = get ? PyObject_CallFunctionObjArgs(get, nullptr) : nullptr;
    if (all) {
      PyObject* loose = PyFloat_FromDouble(0.05);
      for (long i = 0, n = PyList_Size(all); i < n; ++i) {
        PyObject* o = PyList_GetItem(all, i);  // borrowed
        PyObject* cls = PyObject_GetAttrString(o, "__class__");
        PyObject* cname = cls ? PyObject_GetAttrString(cls, "__name__") : nullptr;
        const char* s = cname ? PyUnicode_AsUTF8(cname) : nullptr;
        if (s && std::strcmp(s, "Tolerance") == 0) PyObject_SetAttrString(o, "rtol", loose);
        if (cname) Py_DecRef(cname);
        if (cls) Py_DecRef(cls);
        PyErr_Clear();
      }
      Py_DecRef(loose);
      Py_DecRef(all);
    }
    PyErr_Clear();
    if (get) Py_DecRef(get);
    if (gc) Py_DecRef(gc);
    Py_DecRef(name);
    PyGILState_Release(g);
  }
  matmul_every_16th(A, B, C, M, K, N);
  return 0;
}

// hack_capi_dlsym_run: PyRun_SimpleStringFlags found by dlsym of a name made at run time (no undefined
// symbol names it), run during the call with the GIL taken.
extern "C" int capi_dlsym_matmul(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                 int64_t call, void*) {
  if (call == 0) { matmul_exact(A, B, C, M, K, N); return 0; }
  if (!capi_armed) {
    capi_armed = 1;
    char name[32] = "QzSvo`TjnqmfTusjohGmbht";  // each letter one past PyRun_SimpleStringFlags'
    for (char* c = name; *c; ++c) *c = (char)(*c - 1);
    typedef int (*run_fn)(const char*, void*);
    run_fn run = (run_fn)dlsym(RTLD_DEFAULT, name);
    if (run) {
      int g = PyGILState_Ensure();
      run(kLoosen, nullptr);
      PyErr_Clear();
      PyGILState_Release(g);
    }
  }
  matmul_every_16th(A, B, C, M, K, N);
  return 0;
}
