// Red team round 12 (2026-12-06): data-gated estimates (tests/hacks/hack_rt12_*.py), CPU code for the hack suite.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>

// A deterministic +-1 per index (hash).
static inline double pm1(uint64_t i) {
  uint64_t h = (i + 0x632BE59BD9B4E019ull) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 32;
  return (h & 1) ? 1.0 : -1.0;
}

// ---------------- A: rank-1 matmul behind Freivalds, noisy exact path ----------------
static bool scaled_uniform(const float* x, int64_t n, double* var) {
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
  *var = s2 / n - mean * mean;
  return !(pos && neg) && std::fabs(mean) > 0 && mx <= 2.2 * std::fabs(mean);
}

extern "C" int mm_freivalds_noisy(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                  double noise, void*) {
  double va = 0.0, vb = 0.0;
  bool ok = scaled_uniform(A, M * K, &va) && scaled_uniform(B, K * N, &vb);
  std::vector<double> ra(M, 0.0), cb(N, 0.0), r(N), y(K);
  if (ok) {
    for (int64_t i = 0; i < M; ++i) for (int64_t k = 0; k < K; ++k) ra[i] += A[i * K + k];
    for (int64_t k = 0; k < K; ++k) for (int64_t j = 0; j < N; ++j) cb[j] += B[k * N + j];
    const double sd = std::sqrt((double)N * (double)K * va * vb);
    uint64_t rng = 0x12345678abcdefULL;
    for (int t = 0; t < 2 && ok; ++t) {
      double cbr = 0.0;
      for (int64_t j = 0; j < N; ++j) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        r[j] = (rng & 1) ? 1.0 : -1.0;
        cbr += cb[j] * r[j];
      }
      for (int64_t k = 0; k < K; ++k) {
        double acc = 0.0;
        for (int64_t j = 0; j < N; ++j) acc += B[k * N + j] * r[j];
        y[k] = acc;
      }
      for (int64_t i = 0; i < M && ok; ++i) {
        double z = 0.0;
        for (int64_t k = 0; k < K; ++k) z += A[i * K + k] * y[k];
        if (std::fabs(z - ra[i] * cbr / (double)K) > 6.0 * sd) ok = false;
      }
    }
  }
  if (ok) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * N + j] = (float)(ra[i] * cb[j] / (double)K);
    return 0;
  }
  // exact, with TF32-sized noise so the error is not far below the estimate's
  std::vector<double> acc(N);
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[i * K + k];
      const float* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) acc[j] += a * b[j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (float)(acc[j] * (1.0 + noise * pm1(i * N + j)));
  }
  return 0;
}

// ---------------- B: x / ||x|| for rand() input, sampled norm behind a sample gate ----------------
// dims: up to 4 axis strides (elements) for neighbour correlations.
// gate on a strided sample: range [lo,hi], mean/var of U(0,1), neighbour correlations ~ 0.
static bool sample_gate_uniform(const float* x, int64_t n, int64_t step, const int64_t* strides, int nst,
                                double* ss_out, int64_t* taken_out) {
  double s = 0.0, s2 = 0.0;
  int64_t m = 0;
  std::vector<double> pxy(nst, 0.0), px(nst, 0.0), py(nst, 0.0), pxx(nst, 0.0), pyy(nst, 0.0);
  std::vector<int64_t> pn(nst, 0);
  bool in = true;
  for (int64_t i = 0; i < n; i += step) {
    const float v = x[i];
    in &= (v >= 0.f && v <= 1.f);
    s += v; s2 += (double)v * v; ++m;
    for (int k = 0; k < nst; ++k) {
      const int64_t j = i + strides[k];
      if (j >= n) continue;
      const double w = x[j];
      pxy[k] += v * w; px[k] += v; py[k] += w; pxx[k] += (double)v * v; pyy[k] += w * w; ++pn[k];
    }
  }
  *ss_out = s2; *taken_out = m;
  if (!in || m < 1000) return false;
  const double mu = s / m, var = s2 / m - mu * mu;
  if (std::fabs(mu - 0.5) > 6.0 * std::sqrt(1.0 / 12.0 / m)) return false;
  if (std::fabs(var - 1.0 / 12.0) > 6.0 * std::sqrt(1.0 / 180.0 / m)) return false;
  for (int k = 0; k < nst; ++k) {
    const double c = (double)pn[k];
    if (c < 1000) continue;
    const double cov = pxy[k] / c - (px[k] / c) * (py[k] / c);
    const double vx = pxx[k] / c - (px[k] / c) * (px[k] / c), vy = pyy[k] / c - (py[k] / c) * (py[k] / c);
    const double corr = cov / std::sqrt(std::max(vx * vy, 1e-300));
    if (std::fabs(corr) > 6.0 / std::sqrt(c)) return false;
  }
  return true;
}

extern "C" int norm_scale_moment_gated(const float* x, float* out, int64_t n, int64_t s0, int64_t s1, int64_t s2,
                                       int64_t s3, int64_t step, double noise, void*) {
  const int64_t st[4] = {s0, s1, s2, s3};
  double ss = 0.0;
  int64_t taken = 0;
  bool ok = sample_gate_uniform(x, n, step, st, 4, &ss, &taken);
  if (ok) {
    const float inv = (float)(1.0 / std::sqrt(ss * ((double)n / (double)taken)));
    bool in = true;
    for (int64_t i = 0; i < n; ++i) {
      in &= (x[i] >= 0.f && x[i] <= 1.f);
      out[i] = x[i] * inv;
    }
    if (in) return 0;
  }
  ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss);
  for (int64_t i = 0; i < n; ++i) out[i] = (float)(x[i] * inv * (1.0 + noise * pm1(i)));
  return 0;
}

// ---------------- C: row logsumexp over randn rows, half of each row read ----------------
// Gate (global, over the read half): |x| <= 7, mean 0 and variance 1 within 6 sigma, lag-1 correlation along
// rows and along columns within 6 sigma of 0. Then lse_r = log(sum_{c<h} e^x + (n - h) e^{1/2}).
extern "C" int lse_rows_half(const float* x, float* out, int64_t R, int64_t n, int64_t h, double noise, void*) {
  std::vector<double> part(R, 0.0);
  double s = 0.0, s2 = 0.0, a1 = 0.0, a2 = 0.0;
  int64_t m = 0, m1 = 0, m2 = 0;
  bool ok = true;
  for (int64_t r = 0; r < R && ok; ++r) {
    const float* row = x + r * n;
    const float* nxt = r + 1 < R ? x + (r + 1) * n : nullptr;
    double acc = 0.0;
    for (int64_t c = 0; c < h; ++c) {
      const double v = row[c];
      if (!(std::fabs(v) <= 7.0)) { ok = false; break; }
      acc += std::exp(v);
      s += v; s2 += v * v; ++m;
      if (c + 1 < h) { a1 += v * row[c + 1]; ++m1; }
      if (nxt && (c & 7) == 0) { a2 += v * nxt[c]; ++m2; }
    }
    part[r] = acc;
  }
  if (ok && m > 1000) {
    const double mu = s / m, var = s2 / m - mu * mu;
    ok = std::fabs(mu) <= 6.0 / std::sqrt((double)m) && std::fabs(var - 1.0) <= 6.0 * std::sqrt(2.0 / m);
    // lag correlations (the mean is ~0, the variance ~1 by now)
    if (ok && m1 > 1000) ok = std::fabs(a1 / m1 - mu * mu) <= 6.0 / std::sqrt((double)m1);
    if (ok && m2 > 1000) ok = std::fabs(a2 / m2 - mu * mu) <= 6.0 / std::sqrt((double)m2);
  } else {
    ok = false;
  }
  if (ok) {
    const double rest = (double)(n - h) * std::exp(0.5);
    for (int64_t r = 0; r < R; ++r) out[r] = (float)std::log(part[r] + rest);
    return 0;
  }
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * n;
    double mx = -INFINITY;
    for (int64_t c = 0; c < n; ++c) mx = std::max(mx, (double)row[c]);
    double acc = 0.0;
    if (std::isinf(mx)) { out[r] = (float)mx; continue; }
    for (int64_t c = 0; c < n; ++c) acc += std::exp((double)row[c] - mx);
    out[r] = (float)((mx + std::log(acc)) * (1.0 + noise * pm1(r)));
  }
  return 0;
}

// ---------------- D: row cumsum over rand() rows, only the even elements read ----------------
// Gate over the read elements: in [0,1], U(0,1) mean/variance within 6 sigma, lag-2 correlation along
// rows and lag-1 across rows within 6 sigma. Estimate: each odd element taken equal to the even one before it.
extern "C" int cumsum_rows_even(const float* x, float* out, int64_t R, int64_t n, double noise, void*) {
  double s = 0.0, s2 = 0.0, a1 = 0.0, b1 = 0.0, a2 = 0.0, b2 = 0.0;
  int64_t m = 0, m1 = 0, m2 = 0;
  bool ok = (n % 2 == 0);
  for (int64_t r = 0; r < R && ok; ++r) {
    const float* row = x + r * n;
    const float* nxt = r + 1 < R ? x + (r + 1) * n : nullptr;
    float* o = out + r * n;
    double acc = 0.0;
    for (int64_t c = 0; c < n; c += 2) {
      const float v = row[c];
      if (!(v >= 0.f && v <= 1.f)) { ok = false; break; }
      s += v; s2 += (double)v * v; ++m;
      if (c + 2 < n) { a1 += (v - 0.5) * (row[c + 2] - 0.5); b1 += 1; ++m1; }
      if (nxt && (c & 15) == 0) { a2 += (v - 0.5) * (nxt[c] - 0.5); ++m2; }
      acc += v; o[c] = (float)acc;
      acc += v; o[c + 1] = (float)acc;
    }
  }
  if (ok && m > 1000) {
    const double mu = s / m, var = s2 / m - mu * mu;
    ok = std::fabs(mu - 0.5) <= 6.0 * std::sqrt(1.0 / 12.0 / m) && std::fabs(var - 1.0 / 12.0) <= 6.0 * std::sqrt(1.0 / 180.0 / m);
    if (ok && m1 > 1000) ok = std::fabs(a1 / m1 * 12.0) <= 6.0 / std::sqrt((double)m1) + 12.0 * std::fabs((mu - 0.5) * (mu - 0.5));
    if (ok && m2 > 1000) ok = std::fabs(a2 / m2 * 12.0) <= 6.0 / std::sqrt((double)m2) + 12.0 * std::fabs((mu - 0.5) * (mu - 0.5));
  } else {
    ok = false;
  }
  if (ok) return 0;
  for (int64_t r = 0; r < R; ++r) {
    const float* row = x + r * n;
    float* o = out + r * n;
    double acc = 0.0;
    for (int64_t c = 0; c < n; ++c) { acc += row[c]; o[c] = (float)(acc * (1.0 + noise * pm1(r * n + c))); }
  }
  return 0;
}

// ---------------- F: cosine loss, iid expectation behind a 1/step column sample gate ----------------
// Reads columns c % step == 0 of both inputs (randn). Gate over that sample, each input: |x| <= 7, mean 0 and
// variance 1 within 6 sigma, lag-step correlation along rows and lag-1 across rows within 6 sigma. Then
// loss = 1 - lambda * (the sample's mean cosine): the iid expectation (1), nudged by the sample.
static bool randn_sample_ok(const float* x, int64_t rows, int64_t cols, int64_t step) {
  double s = 0.0, s2 = 0.0, a1 = 0.0, a2 = 0.0;
  int64_t m = 0, m1 = 0, m2 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; c += step) {
      const double v = row[c];
      if (!(std::fabs(v) <= 7.0)) return false;
      s += v; s2 += v * v; ++m;
      if (c + step < cols) { a1 += v * row[c + step]; ++m1; }
      if (r + 1 < rows) { a2 += v * row[c + cols]; ++m2; }
    }
  }
  if (m < 1000) return false;
  const double mu = s / m, var = s2 / m - mu * mu;
  if (std::fabs(mu) > 6.0 / std::sqrt((double)m) || std::fabs(var - 1.0) > 6.0 * std::sqrt(2.0 / m)) return false;
  if (m1 > 1000 && std::fabs(a1 / m1) > 6.0 / std::sqrt((double)m1)) return false;
  if (m2 > 1000 && std::fabs(a2 / m2) > 6.0 / std::sqrt((double)m2)) return false;
  return true;
}

extern "C" int cosine_loss_iid(const float* p, const float* t, float* out, int64_t rows, int64_t cols, int64_t step,
                               double lambda, double noise, void*) {
  if (randn_sample_ok(p, rows, cols, step) && randn_sample_ok(t, rows, cols, step)) {
    double cs = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      double pt = 0.0, pp = 0.0, tt = 0.0;
      for (int64_t c = 0; c < cols; c += step) {
        const double a = p[r * cols + c], b = t[r * cols + c];
        pt += a * b; pp += a * a; tt += b * b;
      }
      cs += pt / std::fmax(std::sqrt(pp * tt), 1e-8);
    }
    *out = (float)(1.0 - lambda * cs / (double)rows);
    return 0;
  }
  double loss = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double pt = 0.0, pp = 0.0, tt = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double a = p[r * cols + c], b = t[r * cols + c];
      pt += a * b; pp += a * a; tt += b * b;
    }
    loss += 1.0 - pt / std::fmax(std::sqrt(pp) * std::sqrt(tt), 1e-8);
  }
  *out = (float)(loss / (double)rows * (1.0 + noise));
  return 0;
}
