//! Tensor-core and async-copy primitives shared by the kernels that drive mma.sync themselves
//! (attention.cuh): TF32 rounding and 3xTF32's head/tail split, cp.async with zero fill, and the
//! m16n8k8 TF32 and m16n8k16 fp16/bf16 products. sm_80 and newer; on older archs (and in the host
//! pass of nvcc) they compile to nothing, and the emitters never launch their kernels there.
#ifndef SC_TENSOR_CORE_H
#define SC_TENSOR_CORE_H

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define SC_TC_ARCH 1
#endif

template <class A, class B>
struct sc_tc_same { static constexpr bool value = false; };
template <class A>
struct sc_tc_same<A, A> { static constexpr bool value = true; };

__device__ __forceinline__ uint32_t sc_tc_tf32(float x) {
#ifdef SC_TC_ARCH
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
#else
  return __float_as_uint(x);
#endif
}

// 3xTF32's head of x: TF32 to nearest, or truncated where rounding would carry a finite x past the
// largest float (as gemm_split.cuh's sc_tf32_hi_lo).
__device__ __forceinline__ uint32_t sc_tc_head(float x) {
  const uint32_t h = sc_tc_tf32(x);
  return isfinite(__uint_as_float(h)) || !isfinite(x) ? h : (__float_as_uint(x) & 0xFFFFE000u);
}
// Its tail: what the head leaves, itself as TF32; 0 where x is not finite (the head alone then
// carries it, as fp32 arithmetic would, instead of inf - inf).
__device__ __forceinline__ uint32_t sc_tc_tail(float x, uint32_t h) {
  const float hf = __uint_as_float(h);
  return isfinite(hf) ? sc_tc_tf32(x - hf) : 0u;
}

// 16 bytes global -> shared, asynchronously; zeros instead where !ok (src is then not read).
__device__ __forceinline__ void sc_tc_cp16(void* dst, const void* src, bool ok) {
#ifdef SC_TC_ARCH
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
#endif
}
__device__ __forceinline__ void sc_tc_commit() {
#ifdef SC_TC_ARCH
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void sc_tc_wait() {
#ifdef SC_TC_ARCH
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// c += a b, 16x8x8 in TF32 (operands as TF32 bit patterns), fp32 accumulation.
__device__ __forceinline__ void sc_tc_mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
#ifdef SC_TC_ARCH
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// c += a b from TF32 heads (and, with SPLIT, tails: 3xTF32, the small terms first).
template <bool SPLIT>
__device__ __forceinline__ void sc_tc_mma_split(float* c, const uint32_t* ah, const uint32_t* al, const uint32_t* bh,
                                                const uint32_t* bl) {
  if constexpr (SPLIT) {
    sc_tc_mma_tf32(c, al, bh);
    sc_tc_mma_tf32(c, ah, bl);
  }
  sc_tc_mma_tf32(c, ah, bh);
}

// c += a b, 16x8x16 in fp16 or bf16 (two per 32-bit register, the lower index in the low half).
template <class T>
__device__ __forceinline__ void sc_tc_mma16(float* c, const uint32_t* a, const uint32_t* b) {
#ifdef SC_TC_ARCH
  if constexpr (sc_tc_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// Two fp32 values as one register of fp16 or bf16, x in the low half.
template <class T>
__device__ __forceinline__ uint32_t sc_tc_pack(float x, float y) {
  if constexpr (sc_tc_same<T, __half>::value) {
    const __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}
// Two 16-bit values as one register, x in the low half.
template <class T>
__device__ __forceinline__ uint32_t sc_tc_pack2(T x, T y) {
  return (uint32_t)*reinterpret_cast<const uint16_t*>(&x) | ((uint32_t)*reinterpret_cast<const uint16_t*>(&y) << 16);
}

#endif
