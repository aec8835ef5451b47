//! Special functions of codegen.POINTWISE that CUDA's math library lacks on one side (digamma on
//! both, erfinv on the host), inlined only into a .cu whose kernels call them. Written after
//! PyTorch's own (aten/src/ATen/native/Math.h), whose special values they keep.
SC_INLINE float sc_digamma(float x) {
  if (x == 0.0f) return copysignf(INFINITY, -x);
  float reflected = 0.0f;
  if (x < 0.0f) {
    if (x == truncf(x)) return NAN;
    // digamma(x) = digamma(1 - x) - pi / tan(pi x), with tan taken of x's fraction (more exact).
    const double r = (double)x - trunc((double)x);
    reflected = (float)(3.14159265358979323846 / tan(3.14159265358979323846 * r));
    x = 1.0f - x;
  }
  float result = 0.0f;
  while (x < 10.0f) {
    result -= 1.0f / x;
    x += 1.0f;
  }
  if (x == 10.0f) return result + 2.25175258906672110764f - reflected;
  float y = 0.0f;
  if (x < 1.0e17f) {
    const float z = 1.0f / (x * x);
    const float a[] = {8.33333333333333333333E-2f, -2.10927960927960927961E-2f, 7.57575757575757575758E-3f,
                       -4.16666666666666666667E-3f, 3.96825396825396825397E-3f, -8.33333333333333333333E-3f,
                       8.33333333333333333333E-2f};
    float p = a[0];
    for (int i = 1; i < 7; ++i) p = p * z + a[i];
    y = z * p;
  }
  return result + logf(x) - (0.5f / x) - y - reflected;
}

SC_INLINE float sc_erfinv(float y) {
#ifdef __CUDA_ARCH__
  return erfinvf(y);
#else
  // PyTorch's CPU calc_erfinv: a rational approximation in two ranges, then two Newton steps on erf.
  if (y < -1.0f || y > 1.0f || y != y) return NAN;
  if (y == 1.0f) return INFINITY;
  if (y == -1.0f) return -INFINITY;
  const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  const double d[2] = {3.543889200, 1.637067800};
  const double ya = fabs((double)y);
  double x;
  if (ya <= 0.7) {
    const double z = (double)y * y;
    x = (double)y * (((a[3] * z + a[2]) * z + a[1]) * z + a[0]) / ((((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0);
  } else {
    const double z = sqrt(-log((1.0 - ya) / 2.0));
    x = copysign(((c[3] * z + c[2]) * z + c[1]) * z + c[0], (double)y) / ((d[1] * z + d[0]) * z + 1.0);
  }
  const double two_over_sqrt_pi = 1.12837916709551257390;
  x -= (erf(x) - y) / (two_over_sqrt_pi * exp(-x * x));
  x -= (erf(x) - y) / (two_over_sqrt_pi * exp(-x * x));
  return (float)x;
#endif
}
