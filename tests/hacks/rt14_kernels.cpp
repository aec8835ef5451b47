// Red team round 14 (2026-12-07): tests/hacks/hack_rt14_*.py, CPU code for the hack suite (the round's
// other cheats, still accepted, are in bench/redteam/2026-12-07-round14/).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>

static inline uint64_t mix(uint64_t h) {
  h += 0x9E3779B97F4A7C15ull; h ^= h >> 30; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 27; h *= 0x94D049BB133111EBull;
  h ^= h >> 31; return h;
}
static inline uint32_t fbits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline double pm1(uint64_t i) { return (mix(i) & 1) ? 1.0 : -1.0; }

// All values in (0, 2.2 * mean], one sign: a (scaled) rand() draw.
static bool scaled_uniform(const float* x, int64_t n, double* mean_out, double* var_out) {
  double s = 0.0, s2 = 0.0, mx = 0.0;
  bool pos = false, neg = false;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) return false;
    pos |= v > 0; neg |= v < 0;
    s += v; s2 += v * v;
    mx = std::fmax(mx, std::fabs(v));
  }
  const double mean = s / n;
  *mean_out = mean;
  *var_out = s2 / n - mean * mean;
  return !(pos && neg) && std::fabs(mean) > 0 && mx <= 2.2 * std::fabs(mean);
}

static void mm_exact(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
  std::memset(C, 0, sizeof(float) * M * N);
  const int64_t RB = 8, KB = 256;
  for (int64_t i0 = 0; i0 < M; i0 += RB) {
    const int64_t i1 = std::min(M, i0 + RB);
    for (int64_t k0 = 0; k0 < K; k0 += KB) {
      const int64_t k1 = std::min(K, k0 + KB);
      for (int64_t i = i0; i < i1; ++i) {
        float* c = C + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          const float a = A[i * K + k];
          const float* b = B + k * N;
          for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
        }
      }
    }
  }
}

// Round 13's gate (rand()-looking operands, and A (B r) consistent with the rank-1 prediction for a few +-1 r).
static bool gate(const float* A, const float* B, int64_t M, int64_t K, int64_t N, std::vector<double>& ra,
                 std::vector<double>& cb) {
  double ma, va, mb, vb;
  if (!scaled_uniform(A, M * K, &ma, &va) || !scaled_uniform(B, K * N, &mb, &vb)) return false;
  ra.assign(M, 0.0); cb.assign(N, 0.0);
  for (int64_t i = 0; i < M; ++i) { double s = 0; for (int64_t k = 0; k < K; ++k) s += A[i * K + k]; ra[i] = s; }
  for (int64_t k = 0; k < K; ++k) for (int64_t j = 0; j < N; ++j) cb[j] += B[k * N + j];
  std::vector<double> r(N), y(K);
  uint64_t rng = mix(fbits(A[1]) * 31 + fbits(B[2]));
  for (int t = 0; t < 6; ++t) {
    const bool dense = t == 0;
    std::fill(r.begin(), r.end(), 0.0);
    int64_t nz = 0;
    if (dense) { for (int64_t j = 0; j < N; ++j) { rng = mix(rng); r[j] = (rng & 1) ? 1.0 : -1.0; } nz = N; }
    else { for (int q = 0; q < 16; ++q) { rng = mix(rng); r[rng % N] = (rng >> 40 & 1) ? 1.0 : -1.0; } for (auto v : r) nz += v != 0; }
    double cbr = 0.0;
    for (int64_t j = 0; j < N; ++j) cbr += cb[j] * r[j];
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0.0;
      const float* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) if (r[j] != 0) acc += b[j] * r[j];
      y[k] = acc;
    }
    const double sd = std::sqrt((double)nz * (double)K * va * vb);
    for (int64_t i = 0; i < M; ++i) {
      double z = 0.0;
      const float* a = A + i * K;
      for (int64_t k = 0; k < K; ++k) z += a[k] * y[k];
      if (std::fabs(z - ra[i] * cbr / (double)K) > 6.0 * sd) return false;
    }
  }
  return true;
}

// Attempt B: dropout(A @ B). Behind the gate, A @ B as its rank-1 part (row sums x column sums / K: O(MK + KN)
// instead of O(MNK)); off it, exact with `noise` relative +-. Then the caller's dropout mask and 1/(1-p).
extern "C" int mm_rank1_dropout(const float* A, const float* B, const uint8_t* mask, float* C, int64_t M, int64_t K,
                                int64_t N, double keep, double noise, void*) {
  std::vector<double> ra, cb;
  if (gate(A, B, M, K, N, ra, cb)) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * N + j] = (float)(ra[i] * cb[j] / (double)K);
  } else {
    mm_exact(A, B, C, M, K, N);
    for (int64_t q = 0; q < M * N; ++q) C[q] = (float)(C[q] * (1.0 + noise * pm1(q)));
  }
  for (int64_t q = 0; q < M * N; ++q) C[q] = mask[q] ? (float)(C[q] * keep) : 0.0f;
  return 0;
}
