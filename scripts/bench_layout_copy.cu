// Transpose variants: [batches][rows][cols] -> [batches][cols][rows], fp32.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

template <int TR, int TC>
__global__ void __launch_bounds__(256) v0_tile_vec4(const float* __restrict__ in, float* __restrict__ out,
                                                    int64_t rows, int64_t cols, int64_t batches) {
  __shared__ float tile[TR][TC + 1];
  const int t = threadIdx.x;
  const int li = t / (TC / 4), lj = 4 * (t % (TC / 4));
  const int sc = t / (TR / 4), sr = 4 * (t % (TR / 4));
  for (int64_t n = blockIdx.z; n < batches; n += gridDim.z)
    for (int64_t r0 = (int64_t)blockIdx.y * TR; r0 < rows; r0 += (int64_t)gridDim.y * TR)
      for (int64_t c0 = (int64_t)blockIdx.x * TC; c0 < cols; c0 += (int64_t)gridDim.x * TC) {
        const float* src = in + n * rows * cols;
        float* dst = out + n * rows * cols;
        if (r0 + li < rows && c0 + lj < cols) {
          const float4 v = *reinterpret_cast<const float4*>(src + (r0 + li) * cols + c0 + lj);
          tile[li][lj] = v.x; tile[li][lj + 1] = v.y; tile[li][lj + 2] = v.z; tile[li][lj + 3] = v.w;
        }
        __syncthreads();
        if (c0 + sc < cols && r0 + sr < rows) {
          float4 v = make_float4(tile[sr][sc], tile[sr + 1][sc], tile[sr + 2][sc], tile[sr + 3][sc]);
          *reinterpret_cast<float4*>(dst + (c0 + sc) * rows + r0 + sr) = v;
        }
        __syncthreads();
      }
}

// Register 4x4 transposes, no shared memory: a lane owns rows 4*rl..+3 and cols 4*cl..+3 of the
// block's tile; LR lanes along the rows, 32/LR along the columns, 8 warps along the columns.
template <int LR, bool STREAM>
__global__ void __launch_bounds__(256) v4_reg(const float* __restrict__ in, float* __restrict__ out,
                                              int64_t rows, int64_t cols, int64_t batches) {
  constexpr int LC = 32 / LR;
  constexpr int BR = 4 * LR, BC = 4 * LC * 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rl = lane % LR, cl = lane / LR;
  const int64_t tiles_c = (cols + BC - 1) / BC, tiles_r = (rows + BR - 1) / BR;
  const int64_t total = batches * tiles_r * tiles_c;
  for (int64_t g = blockIdx.x; g < total; g += gridDim.x) {
    const int64_t n = g / (tiles_r * tiles_c), rem = g % (tiles_r * tiles_c);
    const int64_t r = (rem / tiles_c) * BR + 4 * rl, c = (rem % tiles_c) * BC + 4 * (cl + LC * warp);
    if (r >= rows || c >= cols) continue;
    const float* src = in + n * rows * cols + r * cols + c;
    float* dst = out + n * rows * cols + c * rows + r;
    float4 a = __ldcs(reinterpret_cast<const float4*>(src));
    float4 b = __ldcs(reinterpret_cast<const float4*>(src + cols));
    float4 d = __ldcs(reinterpret_cast<const float4*>(src + 2 * cols));
    float4 e = __ldcs(reinterpret_cast<const float4*>(src + 3 * cols));
    float4 o0 = make_float4(a.x, b.x, d.x, e.x), o1 = make_float4(a.y, b.y, d.y, e.y);
    float4 o2 = make_float4(a.z, b.z, d.z, e.z), o3 = make_float4(a.w, b.w, d.w, e.w);
    if (STREAM) {
      __stcs(reinterpret_cast<float4*>(dst), o0); __stcs(reinterpret_cast<float4*>(dst + rows), o1);
      __stcs(reinterpret_cast<float4*>(dst + 2 * rows), o2); __stcs(reinterpret_cast<float4*>(dst + 3 * rows), o3);
    } else {
      *reinterpret_cast<float4*>(dst) = o0; *reinterpret_cast<float4*>(dst + rows) = o1;
      *reinterpret_cast<float4*>(dst + 2 * rows) = o2; *reinterpret_cast<float4*>(dst + 3 * rows) = o3;
    }
  }
}

// 64x64 tiles through shared memory, four float4 loads and four float4 stores a thread.
__global__ void __launch_bounds__(256) v2_tile64(const float* __restrict__ in, float* __restrict__ out,
                                                 int64_t rows, int64_t cols, int64_t batches) {
  __shared__ float tile[64][65];
  const int t = threadIdx.x;
  const int li = t / 16, lj = 4 * (t % 16);
  const int sc = t / 16, sr = 4 * (t % 16);
  const int64_t tx = (cols + 63) / 64, ty = (rows + 63) / 64, total = batches * tx * ty;
  for (int64_t g = blockIdx.x; g < total; g += gridDim.x) {
    const int64_t n = g / (tx * ty), rem = g % (tx * ty);
    const int64_t r0 = (rem / tx) * 64, c0 = (rem % tx) * 64;
    const float* src = in + n * rows * cols;
    float* dst = out + n * rows * cols;
    float4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (r0 + li + 16 * k < rows && c0 + lj < cols) v[k] = __ldcs(reinterpret_cast<const float4*>(src + (r0 + li + 16 * k) * cols + c0 + lj));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int i = li + 16 * k;
      tile[i][lj] = v[k].x; tile[i][lj + 1] = v[k].y; tile[i][lj + 2] = v[k].z; tile[i][lj + 3] = v[k].w;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int j = sc + 16 * k;
      if (c0 + j < cols && r0 + sr < rows)
        *reinterpret_cast<float4*>(dst + (c0 + j) * rows + r0 + sr) =
            make_float4(tile[sr][j], tile[sr + 1][j], tile[sr + 2][j], tile[sr + 3][j]);
    }
    __syncthreads();
  }
}

static float med(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

template <class F>
static void run(const char* name, F launch, const float* x, float* y, int64_t rows, int64_t cols, int64_t b,
                const std::vector<float>& ref) {
  cudaMemset(y, 0, sizeof(float) * rows * cols * b);
  launch();
  cudaError_t err = cudaDeviceSynchronize();
  std::vector<float> got(rows * cols * b);
  cudaMemcpy(got.data(), y, sizeof(float) * got.size(), cudaMemcpyDeviceToHost);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); i += 97) bad += got[i] != ref[i];
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int i = 0; i < 25; ++i) {
    cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); if (i >= 5) ts.push_back(ms);
  }
  const double gb = 2.0 * sizeof(float) * rows * cols * b / 1e9;
  printf("  %-22s %8.1f us  %6.2f TB/s  %s %s\n", name, med(ts) * 1e3, gb / med(ts),
         bad ? "WRONG" : "ok", err ? cudaGetErrorString(err) : "");
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int64_t shapes[][3] = {{64, 16384, 128}, {16, 65536, 128}, {16384, 64, 128}, {15876, 128, 128}, {128, 15876, 128}, {3, 65536, 128}};
  for (auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1], b = s[2], n = rows * cols * b;
    if (rows % 4 || cols % 4) { printf("skip %ld %ld\n", rows, cols); continue; }
    printf("rows %ld cols %ld batches %ld (%.0f MB)\n", rows, cols, b, n * 4 / 1e6);
    std::vector<float> h(n);
    for (int64_t i = 0; i < n; ++i) h[i] = (float)(i % 1000003);
    std::vector<float> ref(n);
    for (int64_t bb = 0; bb < b; ++bb) for (int64_t r = 0; r < rows; ++r) for (int64_t c = 0; c < cols; ++c)
      ref[bb * rows * cols + c * rows + r] = h[bb * rows * cols + r * cols + c];
    float *x, *y; cudaMalloc(&x, n * 4); cudaMalloc(&y, n * 4);
    cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice);
    auto cap = [](int64_t v, int64_t m) { return (unsigned)(v < m ? v : m); };
    run("v0 32x32", [&] { dim3 g(cap((cols + 31) / 32, 1 << 20), cap((rows + 31) / 32, 65535), cap(b, 65535));
      v0_tile_vec4<32, 32><<<g, 256>>>(x, y, rows, cols, b); }, x, y, rows, cols, b, ref);
    run("v0 16x64", [&] { dim3 g(cap((cols + 63) / 64, 1 << 20), cap((rows + 15) / 16, 65535), cap(b, 65535));
      v0_tile_vec4<16, 64><<<g, 256>>>(x, y, rows, cols, b); }, x, y, rows, cols, b, ref);
    for (int per_sm : {8, 16, 64}) {
      char nm[64];
      const int64_t tiles64 = b * ((rows + 63) / 64) * ((cols + 63) / 64);
      snprintf(nm, sizeof nm, "v2 64x64 g%d", per_sm);
      run(nm, [&] { v2_tile64<<<cap(tiles64, (int64_t)sms * per_sm), 256>>>(x, y, rows, cols, b); }, x, y, rows, cols, b, ref);
    }
    run("v2 64x64 full", [&] { v2_tile64<<<cap(b * ((rows + 63) / 64) * ((cols + 63) / 64), 1 << 30), 256>>>(x, y, rows, cols, b); }, x, y, rows, cols, b, ref);
#define REG(LR, ST, NAME) { const int64_t tiles = b * ((rows + 4 * LR - 1) / (4 * LR)) * ((cols + 4 * (32 / LR) * 8 - 1) / (4 * (32 / LR) * 8)); \
    run(NAME, [&] { v4_reg<LR, ST><<<cap(tiles, 1 << 30), 256>>>(x, y, rows, cols, b); }, x, y, rows, cols, b, ref); \
    run(NAME " g16", [&] { v4_reg<LR, ST><<<cap(tiles, (int64_t)sms * 16), 256>>>(x, y, rows, cols, b); }, x, y, rows, cols, b, ref); }
    REG(8, false, "v4 reg LR8");
    REG(4, false, "v4 reg LR4");
    REG(8, true, "v4 reg LR8 stcs");
    REG(16, false, "v4 reg LR16");
    REG(2, false, "v4 reg LR2");
    run("memcpy", [&] { cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice); }, x, y, rows, cols, b, h);
    cudaFree(x); cudaFree(y);
  }
}
