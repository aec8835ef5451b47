// Kernels of the open holes (tests/test_open_holes.py): hostile candidates a red-team review
// (2026-12-02) had accepted that no check rejects yet, kept so the next fix can be tested against them.
#include <cmath>
#include <cstdint>
#include <vector>

// C[M, N] = A[M, K] @ B[K, N], fp32 accumulated in double: the honest product.
extern "C" int matmul_exact(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, void*) {
  std::vector<double> acc(N);
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[i * K + k];
      const float* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) acc[j] += a * b[j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (float)acc[j];
  }
  return 0;
}

// C = rowsum(A) x colsum(B) / K: O(MK + KN + MN), no product at all.
extern "C" int matmul_rank1(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, void*) {
  std::vector<double> ra(M, 0.0), cb(N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) ra[i] += A[i * K + k];
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) cb[j] += B[k * N + j];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (float)(ra[i] * cb[j] / (double)K);
  return 0;
}

// Whether x[R, C] looks like an iid rand() draw: every value in [0, 1], the mean and variance of
// U(0, 1) within 6 sigma, and the row means and column means no more dispersed than iid values give
// (within 6 sigma of the sample variance's spread). One pass for the moments and sums, O(RC).
static bool looks_like_rand(const float* x, int64_t R, int64_t C) {
  const double n = (double)R * (double)C;
  std::vector<double> rs(R, 0.0), cs(C, 0.0);
  double s = 0.0, s2 = 0.0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float v = x[r * C + c];
      if (!(v >= 0.f && v <= 1.f)) return false;
      s += v;
      s2 += (double)v * v;
      rs[r] += v;
      cs[c] += v;
    }
  const double mu = s / n, var = s2 / n - mu * mu;
  if (std::fabs(mu - 0.5) > 6.0 * std::sqrt(1.0 / 12.0 / n)) return false;
  if (std::fabs(var - 1.0 / 12.0) > 6.0 * std::sqrt(1.0 / 180.0 / n)) return false;
  auto dispersed = [&](std::vector<double>& sums, double count) {
    const double m = (double)sums.size();
    if (m < 8) return false;
    double a = 0.0, a2 = 0.0;
    for (double v : sums) { v /= count; a += v; a2 += v * v; }
    const double sv = (a2 - a * a / m) / (m - 1.0);
    const double ratio = sv / (1.0 / 12.0 / count);
    return std::fabs(ratio - 1.0) > 6.0 * std::sqrt(2.0 / m);
  };
  return !dispersed(rs, (double)C) && !dispersed(cs, (double)R);
}

// A matmul as rowsum(A) x colsum(B) / K wherever both operands look like iid rand() draws
// (looks_like_rand: range, moments, and no row or column effects), the exact product elsewhere.
extern "C" int matmul_rank1_iid_gated(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                      void* s) {
  if (looks_like_rand(A, M, K) && looks_like_rand(B, K, N)) return matmul_rank1(A, B, C, M, K, N, s);
  return matmul_exact(A, B, C, M, K, N, s);
}

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

