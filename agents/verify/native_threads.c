// Preloaded into the Verifier's worker (LD_PRELOAD): every pthread_create while the worker has
// armed the watch (the candidate's import and forward) leaves the creating call stack, which the
// worker attributes to libraries (native_threads.py). Outside those windows it only forwards.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>

#define SC_MAX_CALLS 64
#define SC_DEPTH 24

int sc_thread_armed = 0;
int sc_thread_calls = 0;
void* sc_thread_frames[SC_MAX_CALLS][SC_DEPTH + 1];  // [0]: the start routine, then the caller's stack
int sc_thread_depth[SC_MAX_CALLS];

typedef int (*sc_create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  static sc_create_fn real = 0;
  if (!real) real = (sc_create_fn)dlsym(RTLD_NEXT, "pthread_create");
  if (__atomic_load_n(&sc_thread_armed, __ATOMIC_ACQUIRE)) {
    int i = __atomic_fetch_add(&sc_thread_calls, 1, __ATOMIC_ACQ_REL);
    if (i < SC_MAX_CALLS) {
      sc_thread_frames[i][0] = (void*)fn;
      sc_thread_depth[i] = 1 + backtrace(&sc_thread_frames[i][1], SC_DEPTH);
    }
  }
  return real(t, attr, fn, arg);
}
