//! Integer helpers of codegen.INT64_POINTWISE, inlined only into a .cu whose kernels call them.
// int64 arithmetic as PyTorch's integer kernels: Python's floor division and remainder, C's
// truncating ones. A zero divisor gives 0 where PyTorch raises (on the CPU) rather than trapping.
SC_INLINE int64_t sc_abs_i64(int64_t a) { return a < 0 ? -a : a; }
SC_INLINE int64_t sc_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
SC_INLINE int64_t sc_max_i64(int64_t a, int64_t b) { return a < b ? b : a; }
SC_INLINE int64_t sc_div_trunc_i64(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }
SC_INLINE int64_t sc_div_rem_i64(int64_t a, int64_t b) { return b == 0 ? 0 : a % b; }
SC_INLINE int64_t sc_div_floor_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
SC_INLINE int64_t sc_remainder_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// Shifts as PyTorch's: a count past the width (or negative) gives 0 to the left and the sign to the right.
SC_INLINE int64_t sc_shl_i64(int64_t a, int64_t b) {
  return (b < 0 || b >= 64) ? 0 : (int64_t)((uint64_t)a << b);
}
SC_INLINE int64_t sc_shr_i64(int64_t a, int64_t b) { return (b < 0 || b >= 64) ? (a >> 63) : (a >> b); }
