//! The layout copy where one side is short (9 to 64): a convolution's weight to channels-last
//! (K, C, R*S -> K, R*S, C: 3x3 windows are 9 wide, 5x5 25, 7x7 49) and back. Inlined before
//! conv.cuh (emit_conv.py), which sends such copies here where SC_CONV_COPY_SHORT is on.
#ifndef SC_LAYOUT_SHORT_H
#define SC_LAYOUT_SHORT_H
// (Guarded: every conv kernel of a .cu carries the family; the first copy defines it.)
// out[n][c][r] = in[n][r][c] (+ bias[c]) for a side of SC_TRS_MIN..SC_TRS_MAX: a block takes a span
// of the long side with the whole short one, SC_TRS_TILE floats in shared memory, so its loads are
// one contiguous run (few columns) or one run per short row, and its stores one run per short index
// (few columns) or one contiguous run. The 32x32 tiles' kernel left 23 of a tile's 32 columns idle
// on a 3x3 weight and moved ResNet18's weights at about 0.7 TB/s (H100, 2026-12-05: 132.9 us of its
// forward's 594). The short side's stride in the tile is odd, so a warp's strided reads of the tile
// hit distinct banks.
constexpr int64_t SC_TRS_MIN = 9, SC_TRS_MAX = 64;
constexpr int SC_TRS_TILE = 3200;

// The tile's stride for a short side of `s`: odd.
SC_INLINE int sc_trs_pitch(int64_t s) { return (int)(s | 1); }

// Long positions a block takes: a multiple of 32 whose tile fits.
SC_INLINE int64_t sc_trs_span(int64_t s) { return (SC_TRS_TILE / sc_trs_pitch(s)) / 32 * 32; }

// The block's first phase, for thread t of nt: the input's elements of long positions
// [l0, l0 + here) into the tile, tile[l * pitch + k] (l the long index from l0, k the short one).
template <bool FEW_COLS, class T>
SC_INLINE void sc_trs_load(const T* __restrict__ src, float* tile, int64_t rows, int64_t cols, int64_t l0,
                           int64_t here, int t, int nt) {
  const int64_t s = FEW_COLS ? cols : rows;
  const int p = sc_trs_pitch(s);
  for (int64_t e = t; e < here * s; e += nt) {
    if (FEW_COLS) {  // in [longs][s]: the span is one contiguous run
      const int64_t l = e / s, k = e % s;
      tile[l * p + k] = sc_to_f(src[l0 * s + e]);
    } else {  // in [s][longs]: a run of `here` a short row
      const int64_t k = e / here, l = e % here;
      tile[l * p + k] = sc_to_f(src[k * cols + l0 + l]);
    }
  }
}

// The second phase: the tile out. out is [cols][rows]: few columns, a run of `here` an output row
// (the short index); few rows, one contiguous run.
template <bool FEW_COLS, class T>
SC_INLINE void sc_trs_store(T* __restrict__ dst, const float* tile, const T* __restrict__ bias, int64_t rows,
                            int64_t cols, int64_t l0, int64_t here, int t, int nt) {
  const int64_t s = FEW_COLS ? cols : rows;
  const int p = sc_trs_pitch(s);
  for (int64_t e = t; e < here * s; e += nt) {
    if (FEW_COLS) {  // out[k][l0 + l], k < cols: the bias is the short index's
      const int64_t k = e / here, l = e % here;
      const float v = tile[l * p + k];
      dst[k * rows + l0 + l] = sc_from_f<T>(bias ? v + sc_to_f(bias[k]) : v);
    } else {  // out[l0 + l][k], k < rows: the bias is the long index's
      const int64_t l = e / s, k = e % s;
      const float v = tile[l * p + k];
      dst[l0 * s + e] = sc_from_f<T>(bias ? v + sc_to_f(bias[l0 + l]) : v);
    }
  }
}

template <bool FEW_COLS, class T>
__global__ void __launch_bounds__(256) sc_conv_transpose_short(const T* __restrict__ in, T* __restrict__ out,
                                                               const T* __restrict__ bias, int64_t rows, int64_t cols,
                                                               int64_t batches) {
  __shared__ float tile[SC_TRS_TILE];
  const int64_t s = FEW_COLS ? cols : rows, longs = FEW_COLS ? rows : cols, span = sc_trs_span(s);
  const int64_t chunks = (longs + span - 1) / span;
  for (int64_t g = blockIdx.x; g < batches * chunks; g += gridDim.x) {
    const int64_t n = g / chunks, l0 = (g % chunks) * span, here = longs - l0 < span ? longs - l0 : span;
    sc_trs_load<FEW_COLS>(in + n * rows * cols, tile, rows, cols, l0, here, threadIdx.x, blockDim.x);
    __syncthreads();
    sc_trs_store<FEW_COLS>(out + n * rows * cols, tile, bias, rows, cols, l0, here, threadIdx.x, blockDim.x);
    __syncthreads();
  }
}

// Whether this copy is one for the short kernel: its short side in SC_TRS_MIN..SC_TRS_MAX.
SC_INLINE bool sc_trs_applies(int64_t rows, int64_t cols) {
  const int64_t s = rows <= cols ? rows : cols;
  return s >= SC_TRS_MIN && s <= SC_TRS_MAX;
}

template <class T>
static void sc_conv_transpose_short_launch(const T* x, T* y, const T* b, int64_t rows, int64_t cols, int64_t batches,
                                           cudaStream_t stream) {
  const bool few_cols = cols <= rows;
  const int64_t s = few_cols ? cols : rows, longs = few_cols ? rows : cols, span = sc_trs_span(s);
  const int64_t blocks = batches * ((longs + span - 1) / span);
  const unsigned grid = (unsigned)(blocks < (1 << 30) ? blocks : (1 << 30));
  if (few_cols)
    sc_conv_transpose_short<true, T><<<grid, 256, 0, stream>>>(x, y, b, rows, cols, batches);
  else
    sc_conv_transpose_short<false, T><<<grid, 256, 0, stream>>>(x, y, b, rows, cols, batches);
}

// The same copy on the host, block by block and phase by phase as the kernel runs them (the tests
// check the kernel's indexing on machines without a GPU).
template <class T>
static void sc_conv_transpose_short_host(const T* x, T* y, const T* b, int64_t rows, int64_t cols, int64_t batches) {
  static float tile[SC_TRS_TILE];
  const bool few_cols = cols <= rows;
  const int64_t s = few_cols ? cols : rows, longs = few_cols ? rows : cols, span = sc_trs_span(s);
  const int64_t chunks = (longs + span - 1) / span;
  for (int64_t g = 0; g < batches * chunks; ++g) {
    const int64_t n = g / chunks, l0 = (g % chunks) * span, here = longs - l0 < span ? longs - l0 : span;
    for (int t = 0; t < 256; ++t) {
      if (few_cols) sc_trs_load<true>(x + n * rows * cols, tile, rows, cols, l0, here, t, 256);
      else sc_trs_load<false>(x + n * rows * cols, tile, rows, cols, l0, here, t, 256);
    }
    for (int t = 0; t < 256; ++t) {
      if (few_cols) sc_trs_store<true>(y + n * rows * cols, tile, b, rows, cols, l0, here, t, 256);
      else sc_trs_store<false>(y + n * rows * cols, tile, b, rows, cols, l0, here, t, 256);
    }
  }
}
#endif  // SC_LAYOUT_SHORT_H
