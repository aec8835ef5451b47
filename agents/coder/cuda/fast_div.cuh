//! The sigmoid of the Triton-like pointwise kernels (codegen.pw_shape, STITCHCUDA_PW_SHAPE=triton):
//! __fdividef (within 2 ulp), as Triton lowers fp32 division, in place of the IEEE division, whose
//! slow-path branch made the example's kernel in that shape 6 us slower on the H200
//! (scripts/bench_pointwise.py). Follows fast_math.cuh (sc_exp); the host entries keep IEEE.
SC_INLINE float sc_sigmoid_fdiv(float x) {
#ifdef __CUDA_ARCH__
  return __fdividef(1.0f, 1.0f + sc_exp(-x));
#else
  return sc_sigmoid_fast(x);
#endif
}
