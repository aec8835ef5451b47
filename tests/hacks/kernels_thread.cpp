// Host code for the native-thread hack: the work runs on a std::thread the call starts and joins,
// out of sight of Python's thread hooks and of the calling thread's op recorder.
#include <cstdint>
#include <thread>

extern "C" int affine_relu_threaded(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  std::thread worker([=] {
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i] * (float)scale + y[i];
      out[i] = v > 0.f ? v : 0.f;
    }
  });
  worker.join();
  return 0;
}
