// Run (on the GPU machine, from the repository root; builds this file, times it beside torch.compile):
//   python3 scripts/bench_pointwise.py
//
// Hand-written shapes of the shipped example's chain (examples/gated_block.py: x * scale + shift ->
// gelu * sigmoid(gate) -> clamp + 0.1 x over 8192 x 4096 fp32), a library that
// scripts/bench_pointwise.py loads with ctypes: pw_count(), pw_name(v), pw_run(v, x, gate, scale,
// shift, out, stream). Each variant is one point of:
//   T      threads a block (128: Triton's XBLOCK=1024 with 4 warps; 256: the generated kernels)
//   U      float4 chunks a thread and tensor, T chunks apart (Triton's layout), all loads first
//   LOOP   a grid-stride loop over a full grid (the generated kernels) or one pass, exact grid
//   VB     scale and shift as one float4 each (codegen.HoistedLoad) or one scalar load a lane with
//          its index ((uint32_t)i % 4096u, as the generated kernels read them)
//   FDIV   __fdividef in the sigmoid (as Triton's fp32 division lowers) or an IEEE division
//   I32    32-bit chunk indices or 64-bit
//   LB     __launch_bounds__
// Sizes are compile-time constants, as in the generated kernels. The math is the generated
// kernels' (prelude.cuh, fast_math.cuh): __expf, erff's gelu, a clamp that keeps NaN.
#include <cuda_runtime.h>
#include <cstdint>
#include <type_traits>

constexpr int64_t ROWS = 8192, FEAT = 4096, N = ROWS * FEAT, CHUNKS = N / 4;

__device__ __forceinline__ float gelu(float x) { return x * 0.5f * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float clamp_nan(float x, float lo, float hi) { return x != x ? x : fminf(fmaxf(x, lo), hi); }
template <bool FDIV>
__device__ __forceinline__ float sigmoid(float x) {
  const float d = 1.0f + __expf(-x);
  return FDIV ? __fdividef(1.0f, d) : 1.0f / d;
}
template <bool FDIV>
__device__ __forceinline__ float chain(float x, float g, float s, float h) {
  return clamp_nan(gelu(x * s + h) * sigmoid<FDIV>(g), -4.0f, 4.0f) + x * 0.1f;
}

template <int T, int U, bool LOOP, bool VB, bool FDIV, bool I32, int LB>
__global__ void __launch_bounds__(LB) pw(const float* __restrict__ x, const float* __restrict__ gate,
                                         const float* __restrict__ scale, const float* __restrict__ shift,
                                         float* __restrict__ out) {
  using I = typename std::conditional<I32, uint32_t, int64_t>::type;
  const I step = (I)gridDim.x * (I)(T * U);
  for (I first = (I)blockIdx.x * (I)(T * U) + (I)threadIdx.x; first < (I)CHUNKS; first += step) {
    float4 a[U], g[U], sc[U], sh[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const I c = first + (I)(u * T);
      if (c < (I)CHUNKS) {
        a[u] = reinterpret_cast<const float4*>(x)[c];
        g[u] = reinterpret_cast<const float4*>(gate)[c];
        if (VB) {
          const int64_t j = (int64_t)((uint32_t)c % (uint32_t)(FEAT / 4));  // as codegen narrows it
          sc[u] = reinterpret_cast<const float4*>(scale)[j];
          sh[u] = reinterpret_cast<const float4*>(shift)[j];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const I c = first + (I)(u * T);
      if (c >= (I)CHUNKS) continue;
      if (!VB) {
        const I i = c * 4;
        const auto at = [&](const float* p, int l) { return p[(int64_t)((uint32_t)(i + l) % (uint32_t)FEAT)]; };
        sc[u] = make_float4(at(scale, 0), at(scale, 1), at(scale, 2), at(scale, 3));
        sh[u] = make_float4(at(shift, 0), at(shift, 1), at(shift, 2), at(shift, 3));
      }
      float4 o;
      o.x = chain<FDIV>(a[u].x, g[u].x, sc[u].x, sh[u].x);
      o.y = chain<FDIV>(a[u].y, g[u].y, sc[u].y, sh[u].y);
      o.z = chain<FDIV>(a[u].z, g[u].z, sc[u].z, sh[u].z);
      o.w = chain<FDIV>(a[u].w, g[u].w, sc[u].w, sh[u].w);
      reinterpret_cast<float4*>(out)[c] = o;
    }
    if (!LOOP) break;
  }
}

using Launch = void (*)(const float*, const float*, const float*, const float*, float*, cudaStream_t);

// The full grid in both cases: at this size sc_grid's cap (4096 blocks an SM) is never reached, so
// LOOP differs from one pass by the loop's own instructions only.
template <int T, int U, bool LOOP, bool VB, bool FDIV, bool I32, int LB>
void launch(const float* x, const float* g, const float* s, const float* h, float* o, cudaStream_t stream) {
  constexpr unsigned grid = (unsigned)((CHUNKS + T * U - 1) / (T * U));
  pw<T, U, LOOP, VB, FDIV, I32, LB><<<grid, T, 0, stream>>>(x, g, s, h, o);
}

struct Variant {
  const char* name;
  Launch run;
};

// The first is the reference the others' outputs are compared with: the generated kernel's shape.
static const Variant VARIANTS[] = {
    {"t256 u1 loop  scalar ieee i64 lb256 (generated)", launch<256, 1, true, false, false, false, 256>},
    {"t256 u1 loop  vec    ieee i64 lb256", launch<256, 1, true, true, false, false, 256>},
    {"t256 u1 loop  scalar fdiv i64 lb256", launch<256, 1, true, false, true, false, 256>},
    {"t256 u1 exact scalar ieee i64 lb256", launch<256, 1, false, false, false, false, 256>},
    {"t256 u1 exact vec    fdiv i32 lb256", launch<256, 1, false, true, true, true, 256>},
    {"t256 u2 exact vec    fdiv i32 lb256", launch<256, 2, false, true, true, true, 256>},
    {"t128 u1 exact vec    fdiv i32 lb128", launch<128, 1, false, true, true, true, 128>},
    {"t128 u2 exact scalar ieee i64 lb128", launch<128, 2, false, false, false, false, 128>},
    {"t128 u2 exact vec    ieee i64 lb128", launch<128, 2, false, true, false, false, 128>},
    {"t128 u2 exact vec    ieee i32 lb128", launch<128, 2, false, true, false, true, 128>},
    {"t128 u2 exact vec    fdiv i64 lb128", launch<128, 2, false, true, true, false, 128>},
    {"t128 u2 exact vec    fdiv i32 lb128 (Triton-like)", launch<128, 2, false, true, true, true, 128>},
    {"t128 u2 exact vec    fdiv i32 lb256", launch<128, 2, false, true, true, true, 256>},
    {"t128 u2 loop  vec    fdiv i32 lb128", launch<128, 2, true, true, true, true, 128>},
    {"t128 u4 exact vec    fdiv i32 lb128", launch<128, 4, false, true, true, true, 128>},
};

extern "C" int pw_count() { return (int)(sizeof(VARIANTS) / sizeof(VARIANTS[0])); }
extern "C" const char* pw_name(int v) { return VARIANTS[v].name; }
extern "C" int pw_run(int v, const float* x, const float* g, const float* s, const float* h, float* o,
                      cudaStream_t stream) {
  VARIANTS[v].run(x, g, s, h, o, stream);
  return (int)cudaGetLastError();
}
