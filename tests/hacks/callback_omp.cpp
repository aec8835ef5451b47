// An OpenMP team (threads libgomp starts, allowed as good_affine_omp's are); one member calls a
// function pointer handed in as an int64: a ctypes callback into the candidate's Python.
#include <cstdint>
#include <omp.h>

extern "C" int team_call(int64_t fn, void*) {
  typedef void (*fn_t)(void);
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 1) ((fn_t)fn)();
  }
  return 0;
}
