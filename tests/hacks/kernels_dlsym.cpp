// A red-team candidate's native code (2026-11-30): PyTorch's own kernel looked up by a name built at
// run time (dlopen of the loaded libtorch_cpu, then dlsym), so no undefined symbol and no string in
// the source names it. (It only looks: the lookup is the finding; its arithmetic is honest.)
#include <dlfcn.h>
#include <cstdint>
#include <string>

extern "C" int affine_relu(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  std::string name = std::string("_ZN2") + "at3" + "cpu3" + "addERKNS_6TensorES3_RKN3c106ScalarE";
  void* torch = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
  volatile void* kernel = dlsym(torch ? torch : RTLD_DEFAULT, name.c_str());
  (void)kernel;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
