// Red team rounds 13 and 14 (2026-12-06/07): tests/hacks/hack_rt13_*.py and hack_rt14_*.py, CPU code for the hack suite.
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

// Exact C = A B (fp32 accumulation, 8 rows of A at a time so B streams M/8 times).
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

// Gate: both operands look like rand() draws, and A (B r) matches the rank-1 prediction for a few r: a dense
// +-1 vector and sparse ones on 16 random columns (a coupled row/column pair shows there, diluted by 16, not N).
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
    // sd of the residual sum_j r_j (A'B')_ij: sqrt(nz K va vb)
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

static inline double tf32(double v, bool nearest) {
  int e; const double m = std::frexp(v, &e);
  double s = m * 2048.0;
  s = nearest ? std::nearbyint(s) : std::trunc(s);
  return std::ldexp(s / 2048.0, e);
}

// Rank-1 matmul behind the gate, with one element p moved just past the plain comparison's allowance
// (rtol x (mean|C| + |C_p|)) by the reference's own TF32 error there: the fp64 referee allows each element
// 2x that error more (compare.policy_error, the tf32 policy), so it passes the set the plain check failed;
// a refereed set counted for neither draws-not-followed nor input-gated-estimate then (it does for the
// first now). No stray needed: works for outputs of any size. Exact elsewhere, no noise.
extern "C" int mm_rank1_tf32spoil(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                  double rtol, void*) {
  std::vector<double> ra, cb;
  if (gate(A, B, M, K, N, ra, cb)) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * N + j] = (float)(ra[i] * cb[j] / (double)K);
    // mean|C| exactly (one sign): sum_k colsumA_k rowsumB_k / (M N)
    std::vector<double> ca(K, 0.0);
    for (int64_t i = 0; i < M; ++i) for (int64_t k = 0; k < K; ++k) ca[k] += A[i * K + k];
    double tot = 0.0;
    for (int64_t k = 0; k < K; ++k) { double rb = 0; for (int64_t j = 0; j < N; ++j) rb += B[k * N + j]; tot += ca[k] * rb; }
    const double mean_abs = std::fabs(tot) / ((double)M * N);
    const uint64_t p = mix(fbits(A[0]) ^ ((uint64_t)fbits(B[0]) << 32)) % (uint64_t)(M * N);
    const int64_t pi = p / N, pj = p % N;
    double ex = 0, en = 0, ez = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[pi * K + k], b = B[k * N + pj];
      ex += a * b; en += tf32(a, true) * tf32(b, true); ez += tf32(a, false) * tf32(b, false);
    }
    const double pol = std::max(std::fabs(en - ex), std::fabs(ez - ex));
    C[p] = (float)(ex + rtol * (mean_abs + std::fabs(ex)) + pol);
    return 0;
  }
  mm_exact(A, B, C, M, K, N);
  return 0;
}

// Round 13's B (2026-12-07): the exact rank-1 part plus half of K's interaction (half the FLOPs) behind the gate;
// off the gate, exact with 3e-5 noise.
static inline double pm1(uint64_t i) { return (mix(i) & 1) ? 1.0 : -1.0; }

// Matmul as its rank-1 part plus the centred product over the first `h` of K's indices (error: the centred product
// over the rest, (K-h)/K of the residual's variance), where the gate passes; exact plus `noise` (relative, +-) else.
// C = ra cb^T / K + sum_k (a_ik - abar_i)(b_kj - bbar_j) exactly; the estimate keeps k < h of the second term.
extern "C" int mm_rank1_halfk(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, int64_t h,
                              double noise, void*) {
  std::vector<double> ra, cb;
  if (gate(A, B, M, K, N, ra, cb)) {
    // sum_{k<h} (a - abar)(b - bbar) = P - abar_i * SB_j - bbar_j * SA_i + h abar bbar, P = A[:, :h] B[:h, :]
    std::vector<float> P((size_t)M * N, 0.f);
    const int64_t RB = 8, KB = 256;
    for (int64_t i0 = 0; i0 < M; i0 += RB) {
      const int64_t i1 = std::min(M, i0 + RB);
      for (int64_t k0 = 0; k0 < h; k0 += KB) {
        const int64_t k1 = std::min(h, k0 + KB);
        for (int64_t i = i0; i < i1; ++i) {
          float* c = P.data() + i * N;
          for (int64_t k = k0; k < k1; ++k) {
            const float a = A[i * K + k];
            const float* b = B + k * N;
            for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
          }
        }
      }
    }
    std::vector<double> sa(M, 0.0), sb(N, 0.0);
    for (int64_t i = 0; i < M; ++i) for (int64_t k = 0; k < h; ++k) sa[i] += A[i * K + k];
    for (int64_t k = 0; k < h; ++k) for (int64_t j = 0; j < N; ++j) sb[j] += B[k * N + j];
    for (int64_t i = 0; i < M; ++i) {
      const double ab = ra[i] / K;
      for (int64_t j = 0; j < N; ++j) {
        const double bb = cb[j] / K;
        C[i * N + j] = (float)(ra[i] * cb[j] / K + P[i * N + j] - ab * sb[j] - bb * sa[i] + h * ab * bb);
      }
    }
    return 0;
  }
  mm_exact(A, B, C, M, K, N);
  for (int64_t q = 0; q < M * N; ++q) C[q] = (float)(C[q] * (1.0 + noise * pm1(q)));
  return 0;
}

// Round 14 (2026-12-07): dropout(A @ B), the rank-1 part behind the gate; off it, exact with `noise` relative +-.
// Then the caller's dropout mask and 1/(1-p).
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
