//! Shared by every depthwise convolution kernel of a .cu (emit_conv.py's _depthwise): a direct,
//! NCHW, one-pass kernel for a 2-D convolution whose groups equal its input channels (each output
//! channel reads one input channel: channel multiplier m = C_out / C_in).
//!
//! Why our own: such a convolution reads each input element KH*KW times and does KH*KW FMAs per
//! output, no reuse a GEMM could exploit, so it is bound by memory. cuDNN runs it as a grouped
//! direct kernel behind NCHW<->NHWC copies (level1/82 on an H200: 2.38 ms + a 0.70 ms copy) and
//! PyTorch's own depthwise kernel, one thread per output, reaches 0.84 TB/s (2.56 ms for 2.1 GB).
//! Here a block stages one input tile (the output tile's receptive field, zero-padded at the
//! borders) in shared memory once and computes a 16 x 64 output tile from it, so global memory is
//! read about once and written once.

#ifndef SC_DEPTHWISE_H
#define SC_DEPTHWISE_H

#define SC_DW_TH 16  // output rows per block: blockDim.y (8) x 2
#define SC_DW_TW 64  // output columns per block: blockDim.x (32) x 2

struct sc_dw_spec {
  long long n, c, h, w;  // input
  long long oc, oh, ow;  // output (oc = c * mult)
  int kh, kw, sh, sw, ph, pw, dh, dw, mult;
  int tile_h, tile_w;  // the input tile a block stages: (TH - 1) * sh + (kh - 1) * dh + 1, likewise w
};

// Reads through the read-only cache on the GPU; a plain load in the CPU entry (tests). sc_to_f:
// the prelude's conversion of a storage value to fp32.
template <class T>
SC_INLINE float sc_dw_load(const T* p) {
#ifdef __CUDA_ARCH__
  return sc_to_f(__ldg(p));
#else
  return sc_to_f(*p);
#endif
}

// A block's two phases, shared by the kernel (256 threads, a barrier between) and the CPU entry
// (one thread at a time), so the tests on the CPU run the GPU's index math.
// Phase 1: thread `tid` of `nthreads` stages its share of plane's input tile (zeros outside the
// image) and of its channel's weights.
template <class T>
SC_INLINE void sc_dw_stage(const T* __restrict__ x, const T* __restrict__ wt, const sc_dw_spec& s, float* tile,
                           float* wsm, long long plane, long long iy0, long long ix0, int tid, int nthreads) {
  const long long n = plane / s.oc, oc = plane % s.oc;
  const T* src = x + (n * s.c + oc / s.mult) * s.h * s.w;
  const int cells = s.tile_h * s.tile_w, taps = s.kh * s.kw;
  for (int i = tid; i < cells; i += nthreads) {
    const long long gy = iy0 + i / s.tile_w, gx = ix0 + i % s.tile_w;
    tile[i] = (gy >= 0 && gy < s.h && gx >= 0 && gx < s.w) ? sc_dw_load(src + gy * s.w + gx) : 0.f;
  }
  for (int i = tid; i < taps; i += nthreads) wsm[i] = sc_dw_load(wt + oc * taps + i);
}

// Phase 2: thread (tx, ty)'s 2 x 2 outputs of the tile whose first output is (ty0, tx0).
template <class T>
SC_INLINE void sc_dw_outputs(const T* __restrict__ bias, T* __restrict__ y, const sc_dw_spec& s, const float* tile,
                             const float* wsm, long long plane, long long ty0, long long tx0, int tx, int ty) {
  const float b = bias ? sc_dw_load(bias + plane % s.oc) : 0.f;
  T* dst = y + plane * s.oh * s.ow;
  for (int r = 0; r < 2; ++r) {
    const int ly = ty + 8 * r;
    const long long oy = ty0 + ly;
    for (int q = 0; q < 2; ++q) {
      const int lx = tx + 32 * q;
      const long long ox = tx0 + lx;
      if (oy >= s.oh || ox >= s.ow) continue;
      float acc = b;
      const float* row = tile + (ly * s.sh) * s.tile_w + lx * s.sw;
      for (int i = 0; i < s.kh; ++i)
        for (int j = 0; j < s.kw; ++j) acc = fmaf(row[i * s.dh * s.tile_w + j * s.dw], wsm[i * s.kw + j], acc);
      dst[oy * s.ow + ox] = static_cast<T>(acc);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256) sc_dw_conv_kernel(const T* __restrict__ x, const T* __restrict__ wt,
                                                         const T* __restrict__ bias, T* __restrict__ y,
                                                         sc_dw_spec s, long long tiles_w, long long planes) {
  extern __shared__ float sc_dw_smem[];
  float* tile = sc_dw_smem;                        // tile_h x tile_w
  float* wsm = sc_dw_smem + s.tile_h * s.tile_w;  // kh x kw
  const long long ty0 = (long long)(blockIdx.x / tiles_w) * SC_DW_TH, tx0 = (long long)(blockIdx.x % tiles_w) * SC_DW_TW;
  for (long long plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    __syncthreads();  // the previous plane's tile is no longer read
    sc_dw_stage(x, wt, s, tile, wsm, plane, ty0 * s.sh - s.ph, tx0 * s.sw - s.pw, threadIdx.y * 32 + threadIdx.x, 256);
    __syncthreads();
    sc_dw_outputs(bias, y, s, tile, wsm, plane, ty0, tx0, threadIdx.x, threadIdx.y);
  }
}

template <class T>
static int sc_dw_conv_run(const sc_dw_spec& s, const void* x, const void* w, const void* bias, void* y,
                          cudaStream_t stream) {
  const long long tiles_w = (s.ow + SC_DW_TW - 1) / SC_DW_TW, tiles_h = (s.oh + SC_DW_TH - 1) / SC_DW_TH;
  const long long planes = s.n * s.oc;
  // emit_conv keeps the tile within the 48 KB every device gives a block without opting in.
  const size_t smem = sizeof(float) * ((size_t)s.tile_h * s.tile_w + (size_t)s.kh * s.kw);
  const dim3 grid((unsigned)(tiles_w * tiles_h), (unsigned)(planes < 65535 ? planes : 65535));
  sc_dw_conv_kernel<T><<<grid, dim3(32, 8), smem, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                            static_cast<const T*>(bias), static_cast<T*>(y), s,
                                                            tiles_w, planes);
  return (int)cudaGetLastError();
}

// The CPU entry: every block's phases in turn, its threads one after another.
template <class T>
static void sc_dw_conv_host(const sc_dw_spec& s, const void* x, const void* w, const void* bias, void* y) {
  const long long tiles_w = (s.ow + SC_DW_TW - 1) / SC_DW_TW, tiles_h = (s.oh + SC_DW_TH - 1) / SC_DW_TH;
  float* tile = new float[(size_t)s.tile_h * s.tile_w + (size_t)s.kh * s.kw];
  float* wsm = tile + (size_t)s.tile_h * s.tile_w;
  for (long long block = 0; block < tiles_w * tiles_h; ++block) {
    const long long ty0 = block / tiles_w * SC_DW_TH, tx0 = block % tiles_w * SC_DW_TW;
    for (long long plane = 0; plane < s.n * s.oc; ++plane) {
      sc_dw_stage(static_cast<const T*>(x), static_cast<const T*>(w), s, tile, wsm, plane, ty0 * s.sh - s.ph,
                  tx0 * s.sw - s.pw, 0, 1);
      for (int ty = 0; ty < 8; ++ty)
        for (int tx = 0; tx < 32; ++tx)
          sc_dw_outputs(static_cast<const T*>(bias), static_cast<T*>(y), s, tile, wsm, plane, ty0, tx0, tx, ty);
    }
  }
  delete[] tile;
}
#endif
