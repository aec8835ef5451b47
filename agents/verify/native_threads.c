// Preloaded into the Verifier's worker (LD_PRELOAD): every pthread_create in the process leaves the
// creating call stack in a ring the worker reads around the candidate's code (its import and forward)
// and attributes to libraries (native_threads.py). Nothing arms it: an exported armed flag was cleared
// by a red-team candidate's native code (2026-12-01) around the thread it started; the record is
// static now, read only through sc_thread_count and sc_thread_frame.
// Every dlsym of an ATen C++ name (mangled, _ZN2at...) is kept too: PyTorch's kernels
// looked up by name run below the dispatcher, where no op recorder sees them (native_symbols.py).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SC_MAX_CALLS 256
#define SC_DEPTH 24

static long sc_thread_calls = 0;
static void* sc_thread_frames[SC_MAX_CALLS][SC_DEPTH + 1];  // [0]: the start routine, then the caller's stack
static int sc_thread_depth[SC_MAX_CALLS];

long sc_thread_count(void) { return __atomic_load_n(&sc_thread_calls, __ATOMIC_ACQUIRE); }

// Frame k of call i (0: the start routine), or 0 where the ring has moved past call i.
void* sc_thread_frame(long i, int k) {
  if (i < 0 || i >= sc_thread_count() || sc_thread_count() - i > SC_MAX_CALLS || k < 0 || k > SC_DEPTH) return 0;
  if (k >= sc_thread_depth[i % SC_MAX_CALLS]) return 0;
  return sc_thread_frames[i % SC_MAX_CALLS][k];
}

typedef int (*sc_create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  static sc_create_fn real = 0;
  if (!real) real = (sc_create_fn)dlsym(RTLD_NEXT, "pthread_create");
  long i = __atomic_load_n(&sc_thread_calls, __ATOMIC_ACQUIRE);
  int slot = (int)(i % SC_MAX_CALLS);
  sc_thread_frames[slot][0] = (void*)fn;
  sc_thread_depth[slot] = 1 + backtrace(&sc_thread_frames[slot][1], SC_DEPTH);
  // Counted once its slot is written, so a reader never reads a half-written entry as whole (two
  // threads creating at once may share a slot: both were created, and the count says so).
  __atomic_fetch_add(&sc_thread_calls, 1, __ATOMIC_ACQ_REL);
  return real(t, attr, fn, arg);
}

#define SC_MAX_SYMS 64
#define SC_SYM_LEN 192

// Kept static, read through sc_dlsym_count and sc_dlsym_name: no symbol of the process names the
// record, so native code cannot reset it by name. Only names in ATen's kernel namespaces are kept
// (at::cpu, at::cuda, at::native, at::meta, at::composite*), so lookups of other names cannot
// fill the table first; one past its end sets the sticky overflow.
static int sc_dlsym_calls = 0;
static int sc_dlsym_overflow = 0;
static char sc_dlsym_names[SC_MAX_SYMS][SC_SYM_LEN];

int sc_dlsym_count(void) { return sc_dlsym_overflow ? -1 : __atomic_load_n(&sc_dlsym_calls, __ATOMIC_ACQUIRE); }
const char* sc_dlsym_name(int i) { return (i >= 0 && i < SC_MAX_SYMS) ? sc_dlsym_names[i] : ""; }

typedef void* (*sc_dlsym_fn)(void*, const char*);

sc_dlsym_fn sc_real_dlsym(void) {
  static sc_dlsym_fn real = 0;
  // dlsym's own versions: glibc 2.34 and newer, then the first of x86-64's and aarch64's.
  static const char* versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", 0};
  for (int i = 0; !real && versions[i]; ++i) real = (sc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
  return real;
}

static int sc_kernel_space(const char* name) {
  static const char* spaces[] = {"_ZN2at3cpu", "_ZN2at4cuda", "_ZN2at6native", "_ZN2at4meta", "_ZN2at25composite",
                                 "_ZN2at38composite", "_ZN2at26composite", "_ZN2at24composite", 0};
  for (int i = 0; spaces[i]; ++i)
    if (strncmp(name, spaces[i], strlen(spaces[i])) == 0) return 1;
  return 0;
}

// Also kept: ATen's redispatch entries (at::_ops::OP::redispatch, c10's redispatchBoxed), which run
// an operator below the dispatch key the caller names, past the op recorder and the profiler (a
// red-team review, 2026-12-02, called at::_ops::mm_out::redispatch so), and the profiler's switches
// (at::enableRecordFunction, the callbacks' clear and remove), which no kernel namespace holds.
// And the dispatcher's tables and registration (native_symbols._DISPATCHER_CLASSES:
// a red-team library, 2026-12-05, ran aten::addmm's CPU kernel with callBoxedForDispatchKey).
static int sc_dispatcher_table(const char* name) {
  static const char* prefixes[] = {"_ZN3c1010Dispatcher", "_ZNK3c1010Dispatcher", "_ZN3c1014OperatorHandle",
                                   "_ZNK3c1014OperatorHandle", "_ZN3c1019TypedOperatorHandle", "_ZNK3c1019TypedOperatorHandle",
                                   "_ZN3c1014KernelFunction", "_ZNK3c1014KernelFunction", "_ZN3c1011BoxedKernel",
                                   "_ZNK3c1011BoxedKernel", "_ZN3c1017RegisterOperators", "_ZNK3c1017RegisterOperators",
                                   "_ZN3c1014OperatorKernel", "_ZN3c104impl13OperatorEntry", "_ZNK3c104impl13OperatorEntry",
                                   "_ZN5torch7Library", "_ZNK5torch7Library", "_ZN5torch11CppFunction", 0};
  for (int i = 0; prefixes[i]; ++i)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return 0;
}

static int sc_watched(const char* name) {
  if (strncmp(name, "_ZN2at", 6) == 0 && (sc_kernel_space(name) || strncmp(name, "_ZN2at4_ops", 11) == 0))
    return 1;
  if (sc_dispatcher_table(name)) return 1;
  if (strncmp(name, "_ZN2at", 6) != 0 && strncmp(name, "_ZN3c10", 7) != 0 && strncmp(name, "_ZNK3c10", 8) != 0)
    return 0;
  return strstr(name, "edispatch") || strstr(name, "RecordFunction") || strstr(name, "record_function") ||
         strstr(name, "Callback") || strstr(name, "tls_set_dispatch_key") ||
         strstr(name, "_force_tls_local_dispatch_key_set");
}

// And CPython's entries that run, compile or schedule Python code or reach frames: the same list as
// native_symbols._PYTHON_CODE (there for the libraries' undefined symbols, here for dlsym lookups).
static int sc_python_code(const char* name) {
  static const char* entries[] = {
      "PyRun_", "Py_CompileString", "Py_AddPendingCall", "_PyEval_AddPendingCall", "PyEval_EvalCode",
      "PyEval_EvalFrame", "_PyEval_EvalFrame", "PyEval_SetTrace", "PyEval_SetProfile", "PyImport_ExecCodeModule",
      "PyMarshal_Read", "PyEval_GetFrame", "PyThreadState_GetFrame", "PyEval_GetGlobals", "PyEval_GetLocals",
      "PyFrame_GetLocals", "PyFrame_GetGlobals", "PyFrame_GetBuiltins", "PyFrame_FastToLocals",
      "PyFrame_LocalsToFast", "PyCode_New", "PyUnstable_Code_New", "PyFunction_New", "PyFunction_SetDefaults",
      "PyFunction_SetKwDefaults", "PySys_AddAuditHook", "PySys_SetObject", "Py_RunMain", "Py_Main", "Py_BytesMain", 0};
  for (int i = 0; entries[i]; ++i)
    if (strncmp(name, entries[i], strlen(entries[i])) == 0) return 1;
  return 0;
}

void* dlsym(void* handle, const char* name) {
  sc_dlsym_fn real = sc_real_dlsym();
  if (name && (sc_watched(name) || sc_python_code(name))) {
    int i = __atomic_fetch_add(&sc_dlsym_calls, 1, __ATOMIC_ACQ_REL);
    if (i < SC_MAX_SYMS) {
      strncpy(sc_dlsym_names[i], name, SC_SYM_LEN - 1);
      sc_dlsym_names[i][SC_SYM_LEN - 1] = 0;
    } else {
      __atomic_store_n(&sc_dlsym_overflow, 1, __ATOMIC_RELEASE);
    }
  }
  return real ? real(handle, name) : 0;
}

// Every library loaded by path (ctypes.CDLL, a Python extension's import): its file as it was just
// before dlopen ran its constructors. A library that unlinked itself once loaded left the parent's
// native-symbol check nothing to read (a red-team candidate, 2026-12-01); the worker compares these
// with the files at the end (native_threads.Watch.loaded).
#define SC_MAX_LIBS 128
#define SC_PATH_LEN 512
static int sc_lib_calls = 0;
static char sc_lib_paths[SC_MAX_LIBS][SC_PATH_LEN];
static struct stat sc_lib_stats[SC_MAX_LIBS];

int sc_lib_count(void) { return __atomic_load_n(&sc_lib_calls, __ATOMIC_ACQUIRE); }
const char* sc_lib_path(int i) { return (i >= 0 && i < SC_MAX_LIBS && i < sc_lib_count()) ? sc_lib_paths[i] : ""; }
// (device, inode, size, modification time in ns) of library i as loaded, into out[4].
int sc_lib_stat(int i, long long* out) {
  if (i < 0 || i >= SC_MAX_LIBS || i >= sc_lib_count()) return -1;
  const struct stat* st = &sc_lib_stats[i];
  out[0] = (long long)st->st_dev;
  out[1] = (long long)st->st_ino;
  out[2] = (long long)st->st_size;
  out[3] = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
  return 0;
}

typedef void* (*sc_dlopen_fn)(const char*, int);

// Kept out of dlopen's own frame, so nothing of that frame outlives the record and the compiler
// ends dlopen with a jump into glibc's: glibc finds the library asking by the return address
// (a name without a slash is searched for along that library's RUNPATH), and a call from here
// would have asked as this library. native_threads.py's probe checks it before preloading.
static __attribute__((noinline)) void sc_record_lib(const char* file, int mode) {
  if (!file || !strchr(file, '/') || (mode & RTLD_NOLOAD)) return;
  struct stat st;
  char resolved[PATH_MAX];
  if (stat(file, &st) == 0 && realpath(file, resolved)) {
    int i = __atomic_load_n(&sc_lib_calls, __ATOMIC_ACQUIRE);
    if (i < SC_MAX_LIBS) {
      strncpy(sc_lib_paths[i], resolved, SC_PATH_LEN - 1);
      sc_lib_paths[i][SC_PATH_LEN - 1] = 0;
      sc_lib_stats[i] = st;
      __atomic_fetch_add(&sc_lib_calls, 1, __ATOMIC_ACQ_REL);
    }
  }
}

void* dlopen(const char* file, int mode) {
  static sc_dlopen_fn real = 0;
  if (!real) real = (sc_dlopen_fn)sc_real_dlsym()(RTLD_NEXT, "dlopen");
  sc_record_lib(file, mode);
  return real ? real(file, mode) : 0;
}
