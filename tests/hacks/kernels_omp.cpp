// Host code whose loop runs on an OpenMP team (built with -fopenmp by good_affine_omp.py): the
// team's threads are started by libgomp, on the candidate's behalf.
#include <cstdint>

extern "C" int affine_relu_omp(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
#pragma omp parallel for num_threads(2)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}
