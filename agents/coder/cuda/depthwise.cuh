//! Shared by every depthwise convolution kernel of a .cu (emit_conv.py's _depthwise): a direct,
//! NCHW, one-pass kernel for a 2-D convolution whose groups equal its input channels (each output
//! channel reads one input channel: channel multiplier m = C_out / C_in).
//!
//! Why our own: such a convolution reads each input element KH*KW times and does KH*KW FMAs per
//! output, no reuse a GEMM could exploit, so it is bound by memory. cuDNN runs it as a grouped
//! direct kernel behind NCHW<->NHWC copies (level1/82 on an H200: 2.38 ms + a 0.70 ms copy) and
//! PyTorch's own depthwise kernel, one thread per output, reaches 0.84 TB/s (2.56 ms for 2.1 GB).
//! Here a block stages one input tile (the output tile's receptive field, zero-padded at the
//! borders) in shared memory once, so global memory is read about once and written once.
//!
//! The geometry is compile-time (sc_dw_geom: kernel, stride, dilation, the tile): the first version
//! took it at run time and ran level1/82 in 2.41 ms on the H200, 0.9 TB/s, bound by its own index
//! math (a division per staged element, 18 shared loads per output behind runtime loops). Now each
//! thread keeps R outputs of a column in registers and reads each of their input rows from shared
//! memory once, adding it into every output that row touches (a 3 x 3 kernel, R = 8: 3.75 shared
//! loads per output), the weights loaded once per plane (held in registers for 3x3, 48 registers on
//! sm_90; a 7x7 kernel compiles to 38, so ptxas re-reads some weights through L1 there).
//!
//! Strided convolutions: a staged row keeps its columns by phase (column % SW), so the taps a warp
//! reads at once are consecutive words whatever the stride; read in place, stride 2 made every
//! shared load a two-way bank conflict (level 3's EfficientNetMBConv, 5x5 stride 2: 1.19 ms where
//! cuDNN took 0.76). A block loops over planes with the next plane's tile in flight (cp.async, two
//! tiles, fp32 on sm_80+) while it computes this one: staging one plane a block left each block
//! waiting on its loads, then computing with the memory idle, as many blocks as fit at once.
//! Nsight Compute then had the strided kernel issuing integer work (ALU 57% busy, DRAM 22%): each
//! thread's staging offsets, bounds and shared addresses are worked out once a block (sc_dw_stager),
//! a plane's sample and channel in 32 bits (1.29 -> 0.86 ms on the H200, cuDNN's NHWC kernel 0.76).
//!
//! The input may be read through a prologue's loader (the pointwise chain before the convolution,
//! computed as staged) and each output stored through an epilogue's functor (the chain after it):
//! an inverted residual's batch norm, ReLU6, depthwise convolution, batch norm, ReLU6 as one kernel.

#ifndef SC_DEPTHWISE_H
#define SC_DEPTHWISE_H

// KH x KW kernel, stride SH x SW, dilation DH x DW; a 32 x 8 block, each thread R rows of Q columns
// (32 apart): the output tile is TH = 8R rows by TW = 32Q columns, its input tile IH x IW.
template <int KH_, int KW_, int SH_, int SW_, int DH_, int DW_, int R_, int Q_>
struct sc_dw_geom {
  static constexpr int KH = KH_, KW = KW_, SH = SH_, SW = SW_, DH = DH_, DW = DW_, R = R_, Q = Q_;
  static constexpr int TH = 8 * R, TW = 32 * Q;
  static constexpr int IH = (TH - 1) * SH + (KH - 1) * DH + 1, IW = (TW - 1) * SW + (KW - 1) * DW + 1;
  static constexpr int RIN = (R - 1) * SH + (KH - 1) * DH + 1;  // input rows one thread's outputs read
  // A staged row: its columns by phase (column % SW), PW a phase, so column c is at col(c).
  static constexpr int PW = (IW + SW - 1) / SW, ROW = PW * SW, TILE = IH * ROW;
  static SC_INLINE int col(int c) { return (c % SW) * PW + c / SW; }
  // Tap j of output column lx: staged column lx * SW + j * DW, whose phase is (j * DW) % SW.
  static SC_INLINE int tap(int lx, int j) { return ((j * DW) % SW) * PW + lx + (j * DW) / SW; }
};

struct sc_dw_spec {
  long long n, c, h, w;  // input
  long long oc, oh, ow;  // output (oc = c * mult)
  int ph, pw, mult;
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

// A block's two phases, shared by the kernel (a barrier between) and the CPU entry (one thread at
// a time), so the tests on the CPU run the GPU's index math. Phase 1 (sc_dw_stager): thread (tx, ty)
// of the 32 x 8 block stages its share of the plane's input tile, whose first element is input
// (iy0, ix0), zeros outside the image; a warp reads consecutive columns of a row. Phase 2
// (sc_dw_outputs): its outputs from the tile.
// A plane (sample n, output channel o) reads input channel o / mult of sample n: the row-major
// index of that channel's first input element. In 32 bits: emit_conv takes a convolution only where
// planes and a plane's elements number below 2^31 (64-bit divisions, three a plane and thread, were a
// sixth of the strided kernel's instructions).
SC_INLINE unsigned sc_dw_in_plane(const sc_dw_spec& s, unsigned plane, unsigned oc) {
  return plane / (unsigned)s.oc * (unsigned)s.c + oc / (unsigned)s.mult;
}
SC_INLINE long long sc_dw_base(const sc_dw_spec& s, unsigned plane, unsigned oc) {
  return (long long)sc_dw_in_plane(s, plane, oc) * s.h * s.w;
}

// The input as stored. The other reader is emit_conv's prologue loader: a struct whose call with a
// row-major input element gives that element's value in fp32, computed from the pointwise chain's
// own inputs (the chain before the convolution is then never stored: MobileNet's and EfficientNet's
// batch norm and ReLU6 between a 1x1 and a depthwise convolution).
template <class T>
struct sc_dw_ptr {
  const T* __restrict__ x;
  SC_INLINE float operator()(long long e) const { return sc_dw_load(x + e); }
};
// What an output stores: its value, or (emit_conv's epilogue functor, called with the output's
// row-major element and value) the pointwise chain after the convolution, whose end is stored in the
// result's place (batch norm and ReLU6 after the depthwise convolution of an inverted residual).
// The kernel stores a plane's outputs together: it asks the functor once a plane for what is the same
// over the plane (at_plane: a batch norm's channel parameters and rsqrt(var + eps)), then calls it with
// that for each output. Called with (element, value) alone, an epilogue's functor found the channel by
// a division and read the norm's parameters again at every output: the MobileNetV2 block's depthwise
// kernel took 115 us with it, as long as the kernel alone (68) and the chain as a pass of its own (48).
struct sc_dw_as_is {
  struct plane_t {};
  SC_INLINE plane_t at_plane(unsigned) const { return {}; }
  SC_INLINE float operator()(const plane_t&, long long, float v) const { return v; }
};

// A prologue staged as stored: the chain before the convolution reads one fp32 tensor at the element
// itself (`x`, an expanding 1x1 convolution's result) and otherwise only values the same over a plane
// (a batch norm's). Its tile is copied by cp.async like a plain input, and each thread then computes
// the chain in place over the elements it copied (F: an epilogue-form functor of x's value, at_plane
// once a plane); the elements outside the image stay zero. The CPU entry stages and transforms the
// same way, thread by thread. Called with an element (the loads path: before sm_80, or
// SC_DW_PIPELINE=0) it computes the chain from x there, finding the element's plane by a 64-bit
// division each time: that path is a fallback, not the one timed. The prologue by loads (emit_conv's
// STITCHCUDA_DW_STAGED=0) gave up cp.async: 300 us on an eval-mode MobileNetV2 block where the chain
// stored first and the kernel alone took 48 + 138 (H200, 2026-11-29).
template <class F>
struct sc_dw_staged {
  const float* __restrict__ x;
  F f;
  long long plane;  // the input's elements a plane (h * w)
  SC_INLINE float operator()(long long e) const {
    return f(f.at_plane((unsigned)(e / plane)), e, sc_dw_load(x + e));
  }
};

template <class Rd>
struct sc_dw_is_fp32_ptr {
  static constexpr bool value = false;
};
template <>
struct sc_dw_is_fp32_ptr<sc_dw_ptr<float>> {
  static constexpr bool value = true;
};
template <class F>
struct sc_dw_is_fp32_ptr<sc_dw_staged<F>> {
  static constexpr bool value = true;
};
// Whether the staged tile is then computed in place (a staged prologue).
template <class Rd>
struct sc_dw_transforms {
  static constexpr bool value = false;
};
template <class F>
struct sc_dw_transforms<sc_dw_staged<F>> {
  static constexpr bool value = true;
};

// Phase 1 for fp32 on sm_80+: the same tile by cp.async (4 bytes an element, zeros outside the
// image by a source size of 0), committed as one group; the caller waits for it before reading.
// Declared for every pass (the kernel names it in a branch only sm_80+ takes).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define SC_DW_ASYNC true
#else
#define SC_DW_ASYNC false
#endif
// 0 (emit_conv's STITCHCUDA_DW_PIPELINE=0, for same-run comparisons): one plane a block, staged by
// loads and stores as before the pipeline.
#ifndef SC_DW_PIPELINE
#define SC_DW_PIPELINE 1
#endif
SC_INLINE void sc_dw_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
SC_INLINE void sc_dw_wait_all_but_one() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}
// Phase 1 by cp.async: thread (tx, ty) stages tile rows ty + 8k and columns tx + 32m, the same
// for every plane of its block, so their source offsets, which of them lie inside the image and
// the tile, and their shared addresses are worked out once (sc_dw_stager), and a plane's staging
// is an add and a copy an element (it was a 64-bit multiply, four bounds checks and the column's
// phase: the 5x5 stride-2 kernel of level 3's EfficientNetMBConv issued mostly integer work).
template <class G>
struct sc_dw_stager {
  static constexpr int NK = (G::IH + 7) / 8, NM = (G::IW + 31) / 32;
  // (Two tiles within 48 KB keep both at most 24: a tile of at least 8 rows is at most 768 wide.)
  static_assert(NK <= 32 && NM <= 32, "a row or column mask has a bit per staged row or column");
  int row0, col0, w;  // the source offset of the thread's first element in its plane; the row pitch
  unsigned live_rows = 0, live_cols = 0;  // bit k, m: tile row ty + 8k, column tx + 32m exist
  unsigned in_rows = 0, in_cols = 0;  // bit k, m: inside the image (else staged as zero)

  SC_INLINE sc_dw_stager(const sc_dw_spec& s, long long iy0, long long ix0, int tx, int ty)
      : row0((int)((iy0 + ty) * s.w)), col0((int)(ix0 + tx)), w((int)s.w) {
#pragma unroll
    for (int k = 0; k < NK; ++k) {
      const long long gy = iy0 + ty + 8 * k;
      live_rows |= (unsigned)(ty + 8 * k < G::IH) << k;
      in_rows |= (unsigned)(gy >= 0 && gy < s.h) << k;
    }
#pragma unroll
    for (int m = 0; m < NM; ++m) {
      const long long gx = ix0 + tx + 32 * m;
      live_cols |= (unsigned)(tx + 32 * m < G::IW) << m;
      in_cols |= (unsigned)(gx >= 0 && gx < s.w) << m;
    }
  }

  // Every copy of this thread's share of the tile from `src` (the plane's first input element),
  // committed as one group; the caller waits for it before reading.
  __device__ __forceinline__ void stage(const float* __restrict__ src, float* tile) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned base = (unsigned)__cvta_generic_to_shared(tile + threadIdx.y * G::ROW);
#pragma unroll
    for (int m = 0; m < NM; ++m) {
      if (!((live_cols >> m) & 1u)) continue;
      const unsigned at = base + 4u * (unsigned)G::col(threadIdx.x + 32 * m);
      const float* from = src + (row0 + col0 + 32 * m);
#pragma unroll
      for (int k = 0; k < NK; ++k) {
        if (!((live_rows >> k) & 1u)) continue;
        const bool in = (in_rows >> k) & (in_cols >> m) & 1u;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(at + 4u * (8 * k * G::ROW)),
                     "l"(in ? from + 8 * k * w : src), "r"(in ? 4 : 0));
      }
    }
#endif
    sc_dw_commit();
  }

  // After this thread's copies of a plane landed (its own cp.async groups): the staged prologue's
  // chain over the elements it copied, in place. `base`: the plane's first input element. Padding
  // stays zero (the chain of zero is not the convolution's padding).
  // `in_plane`: its number among the input's planes (sc_dw_in_plane). The CPU entry calls it too.
  template <class F>
  SC_INLINE void transform(const sc_dw_staged<F>& rd, unsigned in_plane, long long base, float* tile, int tx,
                           int ty) const {
    const auto at = rd.f.at_plane(in_plane);
    float* mine = tile + ty * G::ROW;
#pragma unroll
    for (int m = 0; m < NM; ++m) {
      if (!((live_cols >> m) & 1u) || !((in_cols >> m) & 1u)) continue;
      float* col = mine + G::col(tx + 32 * m);
      const long long from = base + (row0 + col0 + 32 * m);
#pragma unroll
      for (int k = 0; k < NK; ++k) {
        if (!((live_rows >> k) & (in_rows >> k) & 1u)) continue;
        float& v = col[8 * k * G::ROW];
        v = rd.f(at, from + (long long)(8 * k) * w, v);
      }
    }
  }

  // The same share by loads and stores, through a reader: the input's pointer, or a prologue's
  // loader (its values computed as read: cp.async cannot). `base`: the plane's first input element.
  // The CPU entry stages through this too, thread by thread.
  template <class Rd>
  SC_INLINE void load(const Rd& rd, long long base, float* tile, int tx, int ty) const {
#pragma unroll
    for (int m = 0; m < NM; ++m) {
      if (!((live_cols >> m) & 1u)) continue;
      float* at = tile + ty * G::ROW + G::col(tx + 32 * m);
      const long long from = base + (row0 + col0 + 32 * m);
#pragma unroll
      for (int k = 0; k < NK; ++k) {
        if (!((live_rows >> k) & 1u)) continue;
        at[8 * k * G::ROW] = (in_rows >> k) & (in_cols >> m) & 1u ? rd(from + (long long)(8 * k) * w) : 0.f;
      }
    }
  }
};

// Phase 2: thread (tx, ty)'s outputs of the tile whose first output is (ty0, tx0): rows ty*R to
// ty*R + R - 1, columns tx + 32q. Each of their input rows is read once and added, tap row by tap
// row, into every output it touches (the conditions fold at compile time once unrolled); each
// output sums its taps in the order (i, j), as a loop over the kernel would.
template <class T, class G, class Ep>
SC_INLINE void sc_dw_outputs(const T* __restrict__ wt, const T* __restrict__ bias, T* __restrict__ y, const Ep& ep,
                             const sc_dw_spec& s, const float* tile, long long plane, unsigned oc, long long ty0,
                             long long tx0, int tx, int ty) {
  float wr[G::KH * G::KW];
#pragma unroll
  for (int k = 0; k < G::KH * G::KW; ++k) wr[k] = sc_dw_load(wt + oc * (G::KH * G::KW) + k);
  const float b = bias ? sc_dw_load(bias + oc) : 0.f;
  T* dst = y + plane * s.oh * s.ow;
  const auto at = ep.at_plane((unsigned)plane);
  const int ly0 = ty * G::R;
#pragma unroll
  for (int q = 0; q < G::Q; ++q) {
    const int lx = tx + 32 * q;
    const long long ox = tx0 + lx;
    if (ox >= s.ow) continue;
    float acc[G::R];
#pragma unroll
    for (int o = 0; o < G::R; ++o) acc[o] = b;
    const float* base = tile + (ly0 * G::SH) * G::ROW;
#pragma unroll
    for (int r = 0; r < G::RIN; ++r) {
      float v[G::KW];
#pragma unroll
      for (int j = 0; j < G::KW; ++j) v[j] = base[r * G::ROW + G::tap(lx, j)];
#pragma unroll
      for (int o = 0; o < G::R; ++o) {
        const int d = r - o * G::SH;  // = i * DH for tap row i of output o
        if (d >= 0 && d % G::DH == 0 && d / G::DH < G::KH) {
#pragma unroll
          for (int j = 0; j < G::KW; ++j) acc[o] = fmaf(v[j], wr[(d / G::DH) * G::KW + j], acc[o]);
        }
      }
    }
#pragma unroll
    for (int o = 0; o < G::R; ++o) {
      const long long oy = ty0 + ly0 + o;
      if (oy < s.oh) dst[oy * s.ow + ox] = static_cast<T>(ep(at, plane * s.oh * s.ow + oy * s.ow + ox, acc[o]));
    }
  }
}

// At most 64 registers (four blocks an SM, as their two tiles allow on sm_90): left free, ptxas kept
// the stager's 25 copy addresses of the 5x5 stride-2 kernel live across the plane loop (77 registers,
// three blocks); capped, it recomputes them, with no spills.
template <class T, class G, class Rd, class Ep>
__global__ void __launch_bounds__(256, 4) sc_dw_conv_kernel(const Rd rd, const T* __restrict__ wt,
                                                         const T* __restrict__ bias, T* __restrict__ y, const Ep ep,
                                                         sc_dw_spec s, int tiles_w, long long planes) {
  // emit_conv keeps the two tiles within the 48 KB of static shared memory every device gives a block.
  __shared__ float tiles[2][G::TILE];
  const long long ty0 = (long long)(blockIdx.x / tiles_w) * G::TH, tx0 = (long long)(blockIdx.x % tiles_w) * G::TW;
  const long long iy0 = ty0 * G::SH - s.ph, ix0 = tx0 * G::SW - s.pw;
  // cp.async copies stored fp32 only: a prologue's values are computed as they are staged.
  constexpr bool async = SC_DW_ASYNC && SC_DW_PIPELINE && sc_dw_is_fp32_ptr<Rd>::value;
  const unsigned oc = (unsigned)s.oc;
  int buf = 0;
  if constexpr (async) {
    const sc_dw_stager<G> stager(s, iy0, ix0, threadIdx.x, threadIdx.y);
    if (blockIdx.y < planes) stager.stage(rd.x + sc_dw_base(s, blockIdx.y, blockIdx.y % oc), tiles[0]);
    for (unsigned plane = blockIdx.y; plane < planes; plane += gridDim.y, buf ^= 1) {
      __syncthreads();  // the other tile, read for the previous plane, may be written again
      const unsigned next = plane + gridDim.y;
      if (next < planes)
        stager.stage(rd.x + sc_dw_base(s, next, next % oc), tiles[buf ^ 1]);
      else
        sc_dw_commit();  // an empty group, so that waiting for all but one still means this plane's
      sc_dw_wait_all_but_one();
      if constexpr (sc_dw_transforms<Rd>::value) {
        const unsigned in_plane = sc_dw_in_plane(s, plane, plane % oc);
        stager.transform(rd, in_plane, (long long)in_plane * s.h * s.w, tiles[buf], threadIdx.x, threadIdx.y);
      }
      __syncthreads();
      sc_dw_outputs<T, G>(wt, bias, y, ep, s, tiles[buf], plane, plane % oc, ty0, tx0, threadIdx.x, threadIdx.y);
    }
  } else {
    const sc_dw_stager<G> stager(s, iy0, ix0, threadIdx.x, threadIdx.y);
    for (unsigned plane = blockIdx.y; plane < planes; plane += gridDim.y, buf ^= 1) {
      __syncthreads();
      const unsigned o = plane % oc;
      stager.load(rd, sc_dw_base(s, plane, o), tiles[buf], threadIdx.x, threadIdx.y);
      __syncthreads();
      sc_dw_outputs<T, G>(wt, bias, y, ep, s, tiles[buf], plane, o, ty0, tx0, threadIdx.x, threadIdx.y);
    }
  }
}

// Blocks over the planes: as many as are resident at once (each loops over planes, the next one's
// tile in flight), at least one plane a block; a grid larger than that would run a second, partial
// wave of whole plane loops. Asked once per process and geometry (a static of this internal
// function, not shared between libraries). `x`: the input's pointer, or a prologue's loader.
template <class T, class G, class Rd, class Ep = sc_dw_as_is>
static int sc_dw_conv_launch(const sc_dw_spec& s, const Rd& rd, const void* w, const void* bias, void* y,
                             cudaStream_t stream, const Ep& ep = Ep{}) {
  static int resident = 0;
  if (resident <= 0) {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sc_dw_conv_kernel<T, G, Rd, Ep>, 256, 0) == cudaSuccess)
      resident = sms * per_sm;
    if (resident <= 0) {
      const cudaError_t e = cudaGetLastError();
      return (int)(e != cudaSuccess ? e : cudaErrorUnknown);
    }
  }
  const long long tiles_w = (s.ow + G::TW - 1) / G::TW, tiles_h = (s.oh + G::TH - 1) / G::TH;
  const long long tiles = tiles_w * tiles_h, planes = s.n * s.oc;
  long long per_tile = SC_DW_PIPELINE ? resident / tiles : planes;
  per_tile = per_tile < 1 ? 1 : per_tile > planes ? planes : per_tile > 65535 ? 65535 : per_tile;
  const dim3 grid((unsigned)tiles, (unsigned)per_tile);
  sc_dw_conv_kernel<T, G, Rd, Ep><<<grid, dim3(32, 8), 0, stream>>>(rd, static_cast<const T*>(w),
                                                                    static_cast<const T*>(bias), static_cast<T*>(y), ep,
                                                                    s, (int)tiles_w, planes);
  return (int)cudaGetLastError();
}

template <class T, class G>
static int sc_dw_conv_run(const sc_dw_spec& s, const void* x, const void* w, const void* bias, void* y,
                          cudaStream_t stream) {
  return sc_dw_conv_launch<T, G>(s, sc_dw_ptr<T>{static_cast<const T*>(x)}, w, bias, y, stream);
}

// The CPU entry: every block's phases in turn, its threads one after another.
template <class T, class G, class Rd, class Ep = sc_dw_as_is>
static void sc_dw_conv_host_rd(const sc_dw_spec& s, const Rd& rd, const void* w, const void* bias, void* y,
                               const Ep& ep = Ep{}) {
  const long long tiles_w = (s.ow + G::TW - 1) / G::TW, tiles_h = (s.oh + G::TH - 1) / G::TH;
  float* tile = new float[G::TILE];
  for (long long block = 0; block < tiles_w * tiles_h; ++block) {
    const long long ty0 = block / tiles_w * G::TH, tx0 = block % tiles_w * G::TW;
    for (long long plane = 0; plane < s.n * s.oc; ++plane) {
      const unsigned o = (unsigned)(plane % s.oc);
      for (int ty = 0; ty < 8; ++ty)
        for (int tx = 0; tx < 32; ++tx) {
          const sc_dw_stager<G> stager(s, ty0 * G::SH - s.ph, tx0 * G::SW - s.pw, tx, ty);
          if constexpr (sc_dw_transforms<Rd>::value) {  // as the GPU's cp.async path: copy, then compute
            stager.load(sc_dw_ptr<float>{rd.x}, sc_dw_base(s, (unsigned)plane, o), tile, tx, ty);
            stager.transform(rd, sc_dw_in_plane(s, (unsigned)plane, o), sc_dw_base(s, (unsigned)plane, o), tile, tx, ty);
          } else {
            stager.load(rd, sc_dw_base(s, (unsigned)plane, o), tile, tx, ty);
          }
        }
      for (int ty = 0; ty < 8; ++ty)
        for (int tx = 0; tx < 32; ++tx)
          sc_dw_outputs<T, G>(static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<T*>(y), ep, s,
                              tile, plane, o, ty0, tx0, tx, ty);
    }
  }
  delete[] tile;
}

template <class T, class G>
static void sc_dw_conv_host(const sc_dw_spec& s, const void* x, const void* w, const void* bias, void* y) {
  sc_dw_conv_host_rd<T, G>(s, sc_dw_ptr<T>{static_cast<const T*>(x)}, w, bias, y);
}
#endif
