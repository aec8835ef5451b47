// hack_library_vanishes: a library that unlinks its own file once loaded (a constructor), so the
// parent's check of the symbols it calls (native_symbols.py, run on the run folder's libraries after
// the worker exits) finds nothing to read. Its loop here is honest; a red-team candidate's linked
// at::cpu's kernels and was accepted (2026-12-01).
#include <dlfcn.h>
#include <unistd.h>
#include <cstdint>

__attribute__((constructor)) static void vanish() {
  Dl_info info;
  if (dladdr((void*)&vanish, &info) && info.dli_fname) unlink(info.dli_fname);
}

extern "C" int affine_relu(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
