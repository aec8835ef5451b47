// The kernel of hack_native_env_probe: affine + ReLU only where a StitchCUDA variable is in the
// environment (the Verifier's processes have them); elsewhere it writes nothing.
#include <cstdint>
#include <cstdlib>

extern "C" int affine_relu_probed(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  if (std::getenv("STITCHCUDA_CACHE") == nullptr) return 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
