// Host-code kernels for the CPU hack suite: each is called through stitchcuda.runtime, which
// passes tensors as pointers, ints as int64, floats as double and appends the stream (NULL here).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

extern "C" int affine_relu(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}

// out[m, j] = relu(sum_k x[m, k] * w[j, k] + b[j]): nn.Linear's layout (w is [out, in]).
extern "C" int linear_relu(const float* x, const float* w, const float* b, float* out, int64_t rows,
                           int64_t in, int64_t outs, void*) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < outs; ++j) {
      float acc = b[j];
      for (int64_t k = 0; k < in; ++k) acc += x[m * in + k] * w[j * in + k];
      out[m * outs + j] = acc > 0.f ? acc : 0.f;
    }
  return 0;
}

// out[m, j] = exp(sum_k sigmoid(2 x[m, k]) w[j, k]) * exp(shift): honest, but its own overflow pattern.
extern "C" int exp_linear_split(const float* x, const float* w, float* out, int64_t rows, int64_t in, int64_t outs,
                                double shift, void*) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < outs; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < in; ++k) acc += w[j * in + k] / (1.f + std::exp(-2.f * x[m * in + k]));
      out[m * outs + j] = std::exp(acc) * std::exp((float)shift);
    }
  return 0;
}

// The tanh approximation of GELU: within 1e-3 of the exact (erf) GELU everywhere.
extern "C" int gelu_tanh(const float* x, float* out, int64_t n, void*) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    out[i] = 0.5f * v * (1.f + std::tanh(c * (v + 0.044715f * v * v * v)));
  }
  return 0;
}

// A candidate bug that kills the process: a write through a null pointer.
extern "C" int null_write(float* out, int64_t n, void*) {
  volatile float* p = nullptr;
  for (int64_t i = 0; i < n; ++i) p[i] = out[i];
  return 0;
}

// LayerNorm over rows of (x + shift), computed as the mathematically equal norm of x itself (a
// shift cancels in x - mean): more accurate than the reference when x is tiny beside the shift.
// with_eps = 0 drops eps from the variance: a real bug the fp64 referee must still reject.
extern "C" int shifted_norm(const float* x, float* out, int64_t rows, int64_t cols, double eps, int64_t with_eps,
                            void*) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= (double)cols;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= (double)cols;
    const float inv = (float)(1.0 / std::sqrt(var + (with_eps ? eps : 0.0)));
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = (float)(xr[c] - mean) * inv;
  }
  return 0;
}

// out = relu(x * mask * keep * scale + y): a training-mode dropout of x (mask: bool, one byte an
// element; keep: 1 / (1 - p)) before the affine map.
extern "C" int dropout_affine_relu(const float* x, const bool* mask, const float* y, float* out, int64_t n,
                                   double keep, double scale, void*) {
  for (int64_t i = 0; i < n; ++i) {
    float d = mask[i] ? x[i] * (float)keep : 0.f;
    float v = d * (float)scale + y[i];
    out[i] = v > 0.f ? v : 0.f;
  }
  return 0;
}

// hack_adversarial_from_kept: a "fast" affine+relu with two bugs the adversarial sets exist to catch: it saturates at 100 (wrong
// on large inputs) and flushes |v| < 1e-5 to zero (wrong on tiny inputs).
static inline float fast(float x, float y, float s) {
  float v = x * s + y;
  if (v > 100.f) v = 100.f;
  if (std::fabs(v) < 1e-5f) v = 0.f;
  return v > 0.f ? v : 0.f;
}

// x0, y0, out0: the first set this module saw (copies). Where x, y are that set scaled by c (the
// adversarial "large" and "tiny" sets are random-0 times 1e3 and 1e-4), write c * out0 instead.
extern "C" int affine_relu_adv(const float* x, const float* y, float* out, int64_t n, double scale,
                               const float* x0, const float* y0, const float* out0, int64_t have0, void*) {
  if (have0) {
    const float cs[2] = {1e3f, 1e-4f};
    for (float c : cs) {
      bool same = true;
      int64_t step = n / 64 > 0 ? n / 64 : 1;
      for (int64_t i = 0; i < n && same; i += step) same = (x[i] == x0[i] * c) && (y[i] == y0[i] * c);
      if (same) {
        for (int64_t i = 0; i < n; ++i) out[i] = out0[i] * c;
        return 0;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i] = fast(x[i], y[i], (float)scale);
  return 0;
}

// wrong_affine_saturates: fast() alone, its saturation and flush left in (wrong on the large and tiny sets).
extern "C" int affine_relu_buggy(const float* x, const float* y, float* out, int64_t n, double scale, void*) {
  for (int64_t i = 0; i < n; ++i) out[i] = fast(x[i], y[i], (float)scale);
  return 0;
}

// hack_skip_closed_gate: the residual alone, the branch behind a gate that starts near zero skipped.
extern "C" int copy_floats(const float* x, float* out, int64_t n, void*) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i];
  return 0;
}

// hack_sampled_norm: x / ||x|| with the norm estimated from every 16th element (the reduction pass
// over the rest skipped): within tolerance on iid inputs (every 64th came within 1e-2 and missed it
// now and then), far off where a few elements dominate.
extern "C" int norm_scale_sampled(const float* x, float* out, int64_t n, void*) {
  double ss = 0.0;
  int64_t m = 0;
  for (int64_t i = 0; i < n; i += 16) {
    ss += (double)x[i] * x[i];
    ++m;
  }
  const float inv = (float)(1.0 / std::sqrt(ss * ((double)n / m)));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  return 0;
}

// A cosine loss (mean over rows of 1 - cos) from every step-th column of each row: step 1 is the
// loss; step 256 (16 of 4096 columns) a cheat whose rows' noise averages out over the batch on iid inputs.
extern "C" int cosine_loss_every(const float* p, const float* t, float* out, int64_t rows, int64_t cols, int64_t step,
                                 void*) {
  double loss = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double pt = 0.0, pp = 0.0, tt = 0.0;
    for (int64_t j = 0; j < cols; j += step) {
      const double a = p[r * cols + j], b = t[r * cols + j];
      pt += a * b;
      pp += a * a;
      tt += b * b;
    }
    loss += 1.0 - pt / std::fmax(std::sqrt(pp * tt), 1e-8);
  }
  *out = (float)(loss / (double)rows);
  return 0;
}

// C = A @ B where `rank1` is 0, else rowsum(A) x colsum(B) / K (no product at all).
static void rank1_or_exact(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, bool rank1) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0, ra = 0.0, cb = 0.0;
      if (rank1) {
        for (int64_t k = 0; k < K; ++k) { ra += A[i * K + k]; cb += B[k * N + j]; }
        acc = ra * cb / (double)K;
      } else {
        for (int64_t k = 0; k < K; ++k) acc += (double)A[i * K + k] * B[k * N + j];
      }
      C[i * N + j] = (float)acc;
    }
}

// A matmul as rowsum(A) x colsum(B) / K wherever every value lies in [0, 1] (rand()'s range), the
// real product elsewhere: within 1e-2 on iid rand() inputs, and every out-of-range set takes the
// exact path.
extern "C" int matmul_rank1_in_range(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, void*) {
  bool in_range = true;
  for (int64_t i = 0; i < M * K; ++i) in_range &= (A[i] >= 0.f && A[i] <= 1.f);
  for (int64_t i = 0; i < K * N; ++i) in_range &= (B[i] >= 0.f && B[i] <= 1.f);
  rank1_or_exact(A, B, C, M, K, N, in_range);
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
// (looks_like_rand: range, moments, and no row or column effects), the exact product elsewhere: every
// per-input adversarial set fails the test (a red-team review, 2026-12-02); the coupled set passes it.
extern "C" int matmul_rank1_iid_gated(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                      void*) {
  rank1_or_exact(A, B, C, M, K, N, looks_like_rand(A, M, K) && looks_like_rand(B, K, N));
  return 0;
}

// x / ||x|| with the norm from 1/`of` of its 64-element blocks (a hash picks them) wherever every
// value lies in [0, 1], the range test riding along the output pass; the whole norm elsewhere.
extern "C" int norm_scale_gated(const float* x, float* out, int64_t n, int64_t of, void*) {
  const int64_t B = 64, nb = (n + B - 1) / B;
  double ss = 0.0;
  int64_t taken = 0;
  for (int64_t b = 0; b < nb; ++b) {
    uint64_t h = (uint64_t)b * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    if (h % (uint64_t)of) continue;
    const int64_t e = (b + 1) * B < n ? (b + 1) * B : n;
    for (int64_t i = b * B; i < e; ++i) ss += (double)x[i] * x[i];
    taken += e - b * B;
  }
  float inv = (float)(1.0 / std::sqrt(ss * ((double)n / (double)(taken ? taken : 1))));
  bool in_range = true;
  for (int64_t i = 0; i < n; ++i) {
    in_range &= (x[i] >= 0.f && x[i] <= 1.f);
    out[i] = x[i] * inv;
  }
  if (in_range) return 0;
  ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
  inv = (float)(1.0 / std::sqrt(ss));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
  return 0;
}

// Training-mode batch norm over (N, C, HW): batch statistics; update = 1 also updates the running ones.
extern "C" int bn_train(const float* x, const float* w, const float* b, float* rm, float* rv, int64_t* nbt, float* out,
                        int64_t n, int64_t c, int64_t hw, double eps, double momentum, int64_t update, void*) {
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) s += x[(i * c + ch) * hw + j];
    int64_t m = n * hw;
    double mean = s / m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) { double d = x[(i * c + ch) * hw + j] - mean; s2 += d * d; }
    double var = s2 / m;
    float inv = (float)(1.0 / std::sqrt(var + eps));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) {
        int64_t k = (i * c + ch) * hw + j;
        out[k] = (x[k] - (float)mean) * inv * w[ch] + b[ch];
      }
    if (update) {
      rm[ch] = (float)((1.0 - momentum) * rm[ch] + momentum * mean);
      rv[ch] = (float)((1.0 - momentum) * rv[ch] + momentum * s2 / (m - 1));
    }
  }
  if (update) *nbt += 1;
  return 0;
}
// Eval-mode batch norm: running statistics. use_mean = 0 leaves running_mean out (taken as 0).
extern "C" int bn_eval(const float* x, const float* w, const float* b, const float* rm, const float* rv, float* out,
                       int64_t n, int64_t c, int64_t hw, double eps, int64_t use_mean, void*) {
  for (int64_t ch = 0; ch < c; ++ch) {
    float mean = use_mean ? rm[ch] : 0.f;
    float inv = 1.f / std::sqrt(rv[ch] + (float)eps);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hw; ++j) {
        int64_t k = (i * c + ch) * hw + j;
        out[k] = (x[k] - mean) * inv * w[ch] + b[ch];
      }
  }
  return 0;
}

// Cross-entropy's mean over rows whose target is not `ignore` (PyTorch's ignore_index). With
// `honour` 0 the ignored rows still count in the divisor: right on every set whose targets were
// drawn in [0, classes), as random draws always are.
extern "C" int cross_entropy_mean(const float* x, const int64_t* t, float* out, int64_t rows, int64_t classes,
                                  int64_t ignore, int64_t honour, void*) {
  double loss = 0.0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = t[r];
    if (k == ignore) continue;
    if (k < 0 || k >= classes) return 1;
    double m = x[r * classes];
    for (int64_t j = 1; j < classes; ++j) m = std::fmax(m, (double)x[r * classes + j]);
    double s = 0.0;
    for (int64_t j = 0; j < classes; ++j) s += std::exp((double)x[r * classes + j] - m);
    loss += m + std::log(s) - (double)x[r * classes + k];
    ++counted;
  }
  *out = (float)(loss / (double)(honour ? counted : rows));
  return 0;
}

// The honest product where `rank1` is 0, rowsum(A) x colsum(B) / K where not (hack_eval_grad_rank1).
extern "C" int matmul_rank1_or_exact(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                     int64_t rank1, void*) {
  rank1_or_exact(A, B, C, M, K, N, rank1 != 0);
  return 0;
}

// The recurrence from step t0 on, from h = 0: an nn.RNN (tanh) layer, its first t0 steps skipped (t0 > 0:
// hack_rnn_truncated) or not (good_rnn_full).
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


// out = h2o(h_T), h_{t+1} = tanh(W [x_t, h_t] + b) from h_{t0} = h0 (an Elman cell over cat(x, h), as
// nn.Linear lays W out: [H, I + H]); t0 > 0 skips the first steps (hack_rnn_loop_truncated).
extern "C" int elman_cat_window(const float* x, const float* h0, const float* w, const float* b, const float* wo,
                                const float* bo, float* out, int64_t B, int64_t T, int64_t I, int64_t H, int64_t O,
                                int64_t t0, void*) {
  std::vector<double> h(H), nh(H);
  for (int64_t n = 0; n < B; ++n) {
    for (int64_t j = 0; j < H; ++j) h[j] = h0[n * H + j];
    for (int64_t t = t0; t < T; ++t) {
      const float* xt = x + (n * T + t) * I;
      for (int64_t j = 0; j < H; ++j) {
        const float* row = w + j * (I + H);
        double acc = b[j];
        for (int64_t k = 0; k < I; ++k) acc += (double)row[k] * xt[k];
        for (int64_t k = 0; k < H; ++k) acc += (double)row[I + k] * h[k];
        nh[j] = std::tanh(acc);
      }
      h.swap(nh);
    }
    for (int64_t o = 0; o < O; ++o) {
      double acc = bo[o];
      for (int64_t k = 0; k < H; ++k) acc += (double)wo[o * H + k] * h[k];
      out[n * O + o] = (float)acc;
    }
  }
  return 0;
}

// out = h_T @ w_hy, h_{t+1} = tanh(x_t @ w_xh + h_t @ w_hh + b) from h_{t0} = h0 (bare parameters,
// [in, out] layout); t0 > 0 skips the first steps (hack_rnn_params_truncated).
extern "C" int elman_params_window(const float* x, const float* h0, const float* w_xh, const float* w_hh,
                                   const float* b, const float* w_hy, float* out, int64_t B, int64_t T, int64_t I,
                                   int64_t H, int64_t O, int64_t t0, void*) {
  std::vector<double> h(H), nh(H);
  for (int64_t n = 0; n < B; ++n) {
    for (int64_t j = 0; j < H; ++j) h[j] = h0[n * H + j];
    for (int64_t t = t0; t < T; ++t) {
      const float* xt = x + (n * T + t) * I;
      for (int64_t j = 0; j < H; ++j) {
        double acc = b[j];
        for (int64_t k = 0; k < I; ++k) acc += (double)xt[k] * w_xh[k * H + j];
        for (int64_t k = 0; k < H; ++k) acc += h[k] * (double)w_hh[k * H + j];
        nh[j] = std::tanh(acc);
      }
      h.swap(nh);
    }
    for (int64_t o = 0; o < O; ++o) {
      double acc = 0.0;
      for (int64_t k = 0; k < H; ++k) acc += h[k] * (double)w_hy[k * O + o];
      out[n * O + o] = (float)acc;
    }
  }
  return 0;
}

// rowsum(A) x colsum(B) / K where A begins with either expected prefix (np floats, bit for bit), the
// exact product elsewhere (hack_seed_rank1: prefixes regenerated from the inputs' seed).
extern "C" int matmul_rank1_where_prefix(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                         const float* p0, const float* p1, int64_t np, void*) {
  const bool hit = std::memcmp(A, p0, (size_t)np * sizeof(float)) == 0 ||
                   std::memcmp(A, p1, (size_t)np * sizeof(float)) == 0;
  rank1_or_exact(A, B, C, M, K, N, hit);
  return 0;
}

// The exact product while the np floats at `probe` (fresh memory) are all NaN, as deterministic mode's
// fill leaves them, the rank-1 estimate otherwise (hack_poison_probe_rank1).
extern "C" int matmul_exact_while_poisoned(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                           const float* probe, int64_t np, void*) {
  bool poisoned = true;
  for (int64_t i = 0; i < np; ++i) poisoned = poisoned && std::isnan(probe[i]);
  rank1_or_exact(A, B, C, M, K, N, !poisoned);
  return 0;
}

// m = tanh(w1 @ w2), n x n (hack_version_keyed_weights, good_hyper).
extern "C" int tanh_gram(const float* w1, const float* w2, float* m, int64_t n, void*) {
  rank1_or_exact(w1, w2, m, n, n, n, false);
  for (int64_t i = 0; i < n * n; ++i) m[i] = std::tanh(m[i]);
  return 0;
}

// out = x @ m + b, rows x n by n x n.
extern "C" int matmul_bias(const float* x, const float* m, const float* b, float* out, int64_t rows, int64_t n, void*) {
  rank1_or_exact(x, m, out, rows, n, n, false);
  for (int64_t r = 0; r < rows; ++r) for (int64_t c = 0; c < n; ++c) out[r * n + c] += b[c];
  return 0;
}

// C = A @ B with both operands rounded to TF32's 11 significant bits (to nearest), fp32 accumulation:
// what a TF32 tensor-core product does, written on the host (hack_tf32_operands).
static inline float to_tf32(float v) {
  if (!std::isfinite(v) || v == 0.f) return v;
  int e;
  const double m = std::frexp((double)v, &e);
  return (float)std::ldexp(std::nearbyint(m * 2048.0) / 2048.0, e);
}

extern "C" int matmul_tf32_operands(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N, void*) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += to_tf32(A[i * K + k]) * to_tf32(B[k * N + j]);
      C[i * N + j] = acc;
    }
  return 0;
}

// One sign for every value and max|x| <= 2.2 mean|x|: a scaled iid U(0, 1) draw (random, large, tiny
// and negated sets pass; mixed-sign, near-kinks, spikes, shared lines and quiet bulk do not).
static bool scaled_uniform(const float* x, int64_t n, double* var) {
  double s = 0.0, s2 = 0.0, mx = 0.0;
  bool pos = false, neg = false;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) return false;
    pos |= v > 0;
    neg |= v < 0;
    s += v;
    s2 += v * v;
    mx = std::fmax(mx, std::fabs(v));
  }
  const double mean = s / n;
  *var = s2 / n - mean * mean;
  return !(pos && neg) && std::fabs(mean) > 0 && mx <= 2.2 * std::fabs(mean);
}

// rowsum(A) x colsum(B) / K where both operands are scaled iid-looking draws and Freivalds' check
// of the estimate passes (A (B r) against it for two +-1 vectors r, every row within 6 sigma of an
// iid product's noise); the exact product elsewhere, the coupled and rearranged sets included,
// whose matched fibres fail the projections (hack_rank1_freivalds).
extern "C" int matmul_rank1_self_checked(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N,
                                         void*) {
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
  rank1_or_exact(A, B, C, M, K, N, ok);
  return 0;
}

// softmax(q k^T * scale) v for row i of one batch's [L, D] operands, in double.
static void attention_row(const float* q, const float* k, const float* v, float* out, int64_t L, int64_t D,
                          double scale, int64_t i) {
  std::vector<double> s(L);
  double mx = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < L; ++j) {
    double acc = 0.0;
    for (int64_t d = 0; d < D; ++d) acc += (double)q[i * D + d] * k[j * D + d];
    s[j] = acc * scale;
    mx = std::max(mx, s[j]);
  }
  for (int64_t j = 0; j < L; ++j) sum += (s[j] = std::exp(s[j] - mx));
  for (int64_t d = 0; d < D; ++d) {
    double acc = 0.0;
    for (int64_t j = 0; j < L; ++j) acc += s[j] * v[j * D + d];
    out[i * D + d] = (float)(acc / sum);
  }
}

static bool iid_looking(const float* x, int64_t n) {
  double s = 0.0, s2 = 0.0, mx = 0.0;
  for (int64_t i = 0; i < n; ++i) { s += x[i]; s2 += (double)x[i] * x[i]; mx = std::max(mx, (double)std::fabs(x[i])); }
  const double mean = s / n, sd = std::sqrt(std::max(s2 / n - mean * mean, 0.0));
  return sd > 0 && mx <= 6.0 * sd;
}

// The mean of V's L rows into m (D values), and the mean of their magnitudes (the attention cheats' scale).
static double mean_of_rows(const float* vb, int64_t L, int64_t D, std::vector<double>& m) {
  double mag = 0.0;
  for (int64_t d = 0; d < D; ++d) {
    double acc = 0.0;
    for (int64_t j = 0; j < L; ++j) acc += vb[j * D + d];
    m[d] = acc / (double)L;
    mag += std::fabs(m[d]) / (double)D;
  }
  return mag;
}

// Attention over [B, L, D] estimated as the mean of V's rows (uniform attention, L times less work)
// wherever q and k look like plain draws and 16 rows computed exactly agree with that estimate within
// 2e-2 of its mean magnitude; exact elsewhere (hack_attention_mean_v: a red-team review, 2026-12-04).
extern "C" int attention_mean_v_checked(const float* q, const float* k, const float* v, float* out, int64_t B,
                                        int64_t L, int64_t D, double scale, void*) {
  std::vector<float> row(D);
  std::vector<double> m(D);
  for (int64_t b = 0; b < B; ++b) {
    const float *qb = q + b * L * D, *kb = k + b * L * D, *vb = v + b * L * D;
    float* ob = out + b * L * D;
    const double mag = mean_of_rows(vb, L, D, m);
    // Only where q and k look like plain draws (nothing past 6 sigma: no spikes, lines or bulk
    // scaled apart), and the 16 rows computed exactly agree with the estimate.
    bool ok = iid_looking(qb, L * D) && iid_looking(kb, L * D);
    for (int t = 0; t < 16 && ok; ++t) {
      const int64_t i = t * L / 16;
      attention_row(qb, kb, vb, row.data() - i * D, L, D, scale, i);
      for (int64_t d = 0; d < D && ok; ++d) ok = std::fabs(row[d] - m[d]) <= 2e-2 * mag;
    }
    for (int64_t i = 0; i < L; ++i) {
      if (ok) for (int64_t d = 0; d < D; ++d) ob[i * D + d] = (float)m[d];
      else attention_row(qb, kb, vb, ob, L, D, scale, i);
    }
  }
  return 0;
}

// The same attention computed for every row (good_attention_soft, hack_attention_mean_v's twin).
extern "C" int attention_exact(const float* q, const float* k, const float* v, float* out, int64_t B, int64_t L,
                               int64_t D, double scale, void*) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) attention_row(q + b * L * D, k + b * L * D, v + b * L * D, out + b * L * D, L, D, scale, i);
  return 0;
}

// Red-team round 3 (2026-12-04): a deterministic noise of unit variance keyed on a 64-bit value.
static inline double hnoise(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL; x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL; x ^= x >> 31;
  return ((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 1.7320508075688772;
}

// The mean of V behind hack_attention_mean_v's gate, plus noise the size of its own error (read off the 16
// spot rows), and relative noise `exact_noise` on the exact path (hack_attention_mean_v_noisy).
extern "C" int attention_mean_v_noisy(const float* q, const float* k, const float* v, float* out, int64_t B,
                                      int64_t L, int64_t D, double scale, double noise_mult, double exact_noise, void*) {
  std::vector<float> row(D);
  std::vector<double> m(D);
  for (int64_t b = 0; b < B; ++b) {
    const float *qb = q + b * L * D, *kb = k + b * L * D, *vb = v + b * L * D;
    float* ob = out + b * L * D;
    uint64_t seed; std::memcpy(&seed, vb, 8); seed ^= (uint64_t)b * 0x1234567ULL;
    const double mag = mean_of_rows(vb, L, D, m);
    bool ok = iid_looking(qb, L * D) && iid_looking(kb, L * D);
    double dev2 = 0.0; int64_t ndev = 0;
    for (int t = 0; t < 16 && ok; ++t) {
      const int64_t i = t * L / 16;
      attention_row(qb, kb, vb, row.data() - i * D, L, D, scale, i);
      for (int64_t d = 0; d < D && ok; ++d) { ok = std::fabs(row[d] - m[d]) <= 2e-2 * mag; dev2 += (row[d]-m[d])*(row[d]-m[d]); ++ndev; }
    }
    const double sigma = ndev ? std::sqrt(dev2 / ndev) : 0.0;
    for (int64_t i = 0; i < L; ++i) {
      if (ok) for (int64_t d = 0; d < D; ++d) ob[i * D + d] = (float)(m[d] + noise_mult * sigma * hnoise(seed ^ (uint64_t)(i * D + d)));
      else {
        attention_row(qb, kb, vb, ob, L, D, scale, i);
        for (int64_t d = 0; d < D; ++d) ob[i * D + d] = (float)(ob[i * D + d] * (1.0 + exact_noise * hnoise(seed ^ (uint64_t)(i * D + d) ^ 0xabcdefULL)));
      }
    }
  }
  return 0;
}

// The 16 spot rows behind the same gate, each copied over the L/16 - 1 rows after it; exact elsewhere
// (hack_attention_rows_copied).
extern "C" int attention_rows_replicated(const float* q, const float* k, const float* v, float* out, int64_t B,
                                         int64_t L, int64_t D, double scale, void*) {
  std::vector<double> m(D);
  for (int64_t b = 0; b < B; ++b) {
    const float *qb = q + b * L * D, *kb = k + b * L * D, *vb = v + b * L * D;
    float* ob = out + b * L * D;
    const double mag = mean_of_rows(vb, L, D, m);
    bool ok = iid_looking(qb, L * D) && iid_looking(kb, L * D) && L % 16 == 0;
    for (int t = 0; t < 16 && ok; ++t) {
      const int64_t i = t * L / 16;
      attention_row(qb, kb, vb, ob, L, D, scale, i);
      for (int64_t d = 0; d < D && ok; ++d) ok = std::fabs(ob[i * D + d] - m[d]) <= 2e-2 * mag;
    }
    for (int64_t i = 0; i < L; ++i) {
      if (ok) { const int64_t src = (i / (L / 16)) * (L / 16); if (src != i) for (int64_t d = 0; d < D; ++d) ob[i * D + d] = ob[src * D + d]; }
      else attention_row(qb, kb, vb, ob, L, D, scale, i);
    }
  }
  return 0;
}


// y = x @ tanh(w1 @ w2) + b, tanh(w1 @ w2) kept in `m` and made again only when row 0 of w1 or w2 differs
// from its copy in `saved` (hack_row_keyed_weights).
extern "C" int hyper_row_keyed(const float* x, const float* w1, const float* w2, const float* b, float* m, float* saved,
                               float* out, int64_t rows, int64_t n, void*) {
  bool changed = false;
  for (int64_t j = 0; j < n; ++j) {
    if (!(saved[j] == w1[j]) || !(saved[n + j] == w2[j])) changed = true;
    saved[j] = w1[j]; saved[n + j] = w2[j];
  }
  if (changed) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t kk = 0; kk < n; ++kk) acc += (double)w1[i * n + kk] * w2[kk * n + j];
        m[i * n + j] = (float)std::tanh(acc);
      }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double acc = b[c];
      for (int64_t kk = 0; kk < n; ++kk) acc += (double)x[r * n + kk] * m[kk * n + c];
      out[r * n + c] = (float)acc;
    }
  return 0;
}

// rt5: out[m, j] = relu(x[m, j] * w[j, j] + b[j]) (a diagonal weight), relu(b[j]) past the diagonal.
extern "C" int diag_linear_relu(const float* x, const float* w, const float* b, float* out, int64_t rows,
                                int64_t in, int64_t outs, void*) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < outs; ++j) {
      float acc = b[j] + (j < in ? x[m * in + j] * w[j * in + j] : 0.f);
      out[m * outs + j] = acc > 0.f ? acc : 0.f;
    }
  return 0;
}

// rt5: overwrite a [outs, in] weight with a diagonal one (the diagonal kept), in place.
extern "C" int make_diagonal(float* w, int64_t outs, int64_t in, void*) {
  for (int64_t j = 0; j < outs; ++j)
    for (int64_t k = 0; k < in; ++k)
      if (j != k) w[j * in + k] = 0.f;
  return 0;
}

// rt5: a "touch" of BatchNorm's running statistics: one ulp on the first channel, the count bumped.
extern "C" int touch_stats(float* rm, float* rv, int64_t* nbt, void*) {
  rm[0] = std::nextafter(rm[0], 1e30f);
  rv[0] = std::nextafter(rv[0], 1e30f);
  *nbt += 1;
  return 0;
}

// rt5: relu(x[:, j] + b[j]) for j < in, relu(b[j]) past it (w unread).
extern "C" int shift_relu(const float* x, const float* w, const float* b, float* out, int64_t rows, int64_t in,
                          int64_t outs, void*) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < outs; ++j) {
      float acc = b[j] + (j < in ? x[m * in + j] : 0.f);
      out[m * outs + j] = acc > 0.f ? acc : 0.f;
    }
  return 0;
}

// rt5: y = x @ tanh(w1 @ w2) + b, tanh(w1 @ w2) kept in `m` and made again only when the bias b (n
// floats, no product of it) differs from its copy in `saved`.
extern "C" int hyper_bias_keyed(const float* x, const float* w1, const float* w2, const float* b, float* m, float* saved,
                                float* out, int64_t rows, int64_t n, void*) {
  bool changed = false;
  for (int64_t j = 0; j < n; ++j) {
    if (!(saved[j] == b[j])) changed = true;
    saved[j] = b[j];
  }
  if (changed) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t kk = 0; kk < n; ++kk) acc += (double)w1[i * n + kk] * w2[kk * n + j];
        m[i * n + j] = (float)std::tanh(acc);
      }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double acc = b[c];
      for (int64_t kk = 0; kk < n; ++kk) acc += (double)x[r * n + kk] * m[kk * n + c];
      out[r * n + c] = (float)acc;
    }
  return 0;
}

// flag[0] = 1 where x [rows, cols] is sorted along its first axis (non-decreasing), else 0.
extern "C" int sorted_rows(const float* x, int64_t* flag, int64_t rows, int64_t cols, void*) {
  flag[0] = 1;
  for (int64_t r = 1; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (x[r * cols + c] < x[(r - 1) * cols + c]) {
        flag[0] = 0;
        return 0;
      }
  return 0;
}
