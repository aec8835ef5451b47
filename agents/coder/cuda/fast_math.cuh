//! exp through the SFU (ex2.approx, as Triton lowers fp32 exp): codegen writes these in place of
//! expf and sc_sigmoid where STITCHCUDA_FAST_EXP=1 (codegen.fast_exp_on says why it is off). The
//! host entries (CPU tests) keep expf.
SC_INLINE float sc_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  return expf(x);
#endif
}
SC_INLINE float sc_sigmoid_fast(float x) { return 1.0f / (1.0f + sc_exp(-x)); }
