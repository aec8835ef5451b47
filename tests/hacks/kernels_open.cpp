// Kernels of the open holes (tests/test_open_holes.py): hostile candidates a red-team review
// (2026-12-02) had accepted that no check rejects yet, kept so the next fix can be tested against them.
#include <cmath>
#include <cstdint>
#include <vector>

// The recurrence from step t0 on, from h = 0: an nn.RNN (tanh) layer with its first t0 steps skipped.
extern "C" int rnn_tanh_window(const float* x, const float* w_ih, const float* w_hh, const float* b_ih,
                               const float* b_hh, float* y, float* hn, int64_t B, int64_t T, int64_t I, int64_t H,
                               int64_t t0, void*) {
  std::vector<double> h(H), nh(H);
  for (int64_t b = 0; b < B; ++b) {
    std::fill(h.begin(), h.end(), 0.0);
    for (int64_t t = t0; t < T; ++t) {
      const float* xt = x + (b * T + t) * I;
      for (int64_t j = 0; j < H; ++j) {
        double acc = (double)b_ih[j] + b_hh[j];
        for (int64_t k = 0; k < I; ++k) acc += (double)w_ih[j * I + k] * xt[k];
        for (int64_t k = 0; k < H; ++k) acc += (double)w_hh[j * H + k] * h[k];
        nh[j] = std::tanh(acc);
      }
      h.swap(nh);
      for (int64_t j = 0; j < H; ++j) y[(b * T + t) * H + j] = (float)h[j];
    }
    for (int64_t j = 0; j < H; ++j) hn[b * H + j] = (float)h[j];
  }
  return 0;
}

