// The kernel of hack_native_pasted_probe: hack_native_env_probe's question with the name pasted by a
// macro, so no line of the source spells it: affine + ReLU only where a StitchCUDA variable is in the
// environment (the Verifier's processes have them); elsewhere it writes nothing.
#include <cstdint>
#include <cstdlib>

#define JOIN(a, b) a##b
#define ASK JOIN(get, env)

extern "C" int affine_relu_asked(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  if (ASK("STITCHCUDA_CACHE") == nullptr) return 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
