// hack_native_thread_flood: an OpenMP team of 300 (threads libgomp starts: not the candidate's) and
// then the loop on a std::thread of the library's own. The native watch kept the first 64 thread
// starts of a window, so the team pushed the library's own thread out of its record.
#include <cstdint>
#include <thread>

extern "C" int affine_relu_flood(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  int seen = 0;
#pragma omp parallel num_threads(300) reduction(+ : seen)
  seen += 1;
  std::thread t([=] {
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i] * (float)scale + y[i];
      out[i] = v > 0.f ? v : 0.f;
    }
  });
  t.join();
  return seen > 0 ? 0 : 1;
}
