// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: e^x (and float erf) from plain arithmetic, so compilers vectorise them on CPUs, where
// a call to the C library's exp or erf runs one element at a time. exp is Cephes' expf / exp: range
// reduction x = k ln2 + r (|r| <= ln2/2, Cody-Waite split of ln2), a polynomial (float) or Pade (double)
// approximation of e^r, then 2^k assembled in the exponent bits. About 1 ulp over the whole range,
// subnormal results included; overflow gives inf, underflow 0, NaN stays NaN.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "core/kokkos_compat.hpp"

namespace kten::detail {

// IEEE layout of T: the integer of its width, mantissa bits, exponent bias. x is clamped to
// [lo, hi]: e^hi overflows (the largest finite e^x is at 88.7228 for float, 709.7827 for double)
// and e^lo is under half the smallest subnormal, so the clamped ends round to inf and 0 by
// themselves, without a select per edge.
template <class T> struct ExpTraits;
template <> struct ExpTraits<float> {
  using Int = std::int32_t;
  static constexpr int mantissa = 23, bias = 127;
  static constexpr float hi = 89.f, lo = -104.f;  // ln(2^-150) = -103.97
};
template <> struct ExpTraits<double> {
  using Int = std::int64_t;
  static constexpr int mantissa = 52, bias = 1023;
  static constexpr double hi = 710.0, lo = -746.0;  // ln(2^-1075) = -745.13
};

// er * 2^k, NaN unchanged. 2^k is built as two powers of two, each a normal number over the
// whole range of k (|k| <= 1076), so er * s1 is exact and the one rounding is the last
// product's: subnormal results, 0 and inf come out right without a branch.
template <class T>
KOKKOS_INLINE_FUNCTION T exp_finish(T x, T er, T k) {
  using E = ExpTraits<T>;
  using Int = typename E::Int;
  const Int ki = static_cast<Int>(k), k1 = ki >> 1, k2 = ki - k1;
  const Int b1 = (k1 + E::bias) << E::mantissa, b2 = (k2 + E::bias) << E::mantissa;
  T s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const T v = er * s1 * s2;
  return x == x ? v : x;
}

// No early returns, so the loop body stays branch-free; only NaN is selected at the end. The clamp
// sends NaN to lo, so converting k to an integer and shifting it are defined for every input.
KOKKOS_INLINE_FUNCTION float exp_approx(float x) {
  constexpr float hi = ExpTraits<float>::hi, lo = ExpTraits<float>::lo;
  const float xc = x > lo ? (x < hi ? x : hi) : lo;
  // Round to nearest by adding and removing 1.5 * 2^23 (floor() would stop GCC vectorising).
  const float k = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return exp_finish(x, p * z + r + 1.f, k);
}

KOKKOS_INLINE_FUNCTION double exp_approx(double x) {
  constexpr double hi = ExpTraits<double>::hi, lo = ExpTraits<double>::lo;
  const double xc = x > lo ? (x < hi ? x : hi) : lo;
  const double k = (xc * 1.4426950408889634073599 + 6755399441055744.0) - 6755399441055744.0;
  double r = xc - k * 6.93145751953125e-1;
  r = r - k * 1.42860682030941723212e-6;
  const double rr = r * r;
  const double px = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr + 9.99999999999999999910e-1);
  const double qx = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr + 2.27265548208155028766e-1) * rr +
                    2.00000000000000000009e0;
  return exp_finish(x, 1.0 + 2.0 * (px / (qx - px)), k);
}

// erf(x) for float without a branch, given gauss = e^(-x^2) (GELU's gradient needs it too, so it
// is computed once): x + x P(x^2) for |x| < 0.921875 (the leading x exact, P small), else
// 1 - gauss Q(1/|x|) with the sign of x, Q's argument clamped to |x| <= 4 (beyond, gauss Q is
// below half an ulp of 1, so the result is +-1); both halves are computed and one selected, so
// the loop vectorises. P (degree 5) and Q (degree 8) are least-squares fits of erf(x)/x - 1 and
// erfc(x) e^(x^2), weighted for relative error, made for kten. At most 1.7 ulp from erf over 2.2
// million floats spread over [-6, 6] and down to the subnormals (CUDA's erff: 2 ulp); odd, so
// erf(-0) = -0; +-inf give +-1; NaN stays NaN (it takes the second half, where every step keeps it).
KOKKOS_INLINE_FUNCTION float erf_from_gauss(float x, float gauss) {
  constexpr float split = 0.921875f;
  const float a = x < 0.f ? -x : x;
  const float x2 = x * x;
  float p = -6.024636095e-4f;
  p = p * x2 + 5.000901408e-3f;
  p = p * x2 + -2.677296102e-2f;
  p = p * x2 + 1.128203943e-1f;
  p = p * x2 + -3.761252463e-1f;
  p = p * x2 + 1.283791661e-1f;
  const float small = x + x * p;
  const float t = 1.f / (a < split ? split : (a > 4.f ? 4.f : a));
  float q = -4.888390191e-3f;
  q = q * t + 7.075222675e-3f;
  q = q * t + 6.665717065e-2f;
  q = q * t + -2.893145978e-1f;
  q = q * t + 5.285825134e-1f;
  q = q * t + -4.846502542e-1f;
  q = q * t + 4.521742836e-2f;
  q = q * t + 5.586096644e-1f;
  q = q * t + 2.947454923e-4f;
  const float large = 1.f - gauss * q;
  return a < split ? small : (x < 0.f ? -large : large);
}

// float64 keeps the device library's erf (no vectorised form yet), gauss unused.
KOKKOS_INLINE_FUNCTION double erf_from_gauss(double x, double) { return compat::math::erf(x); }

template <class T>
KOKKOS_INLINE_FUNCTION T erf_approx(T x) {
  if constexpr (std::is_same_v<T, float>) return erf_from_gauss(x, exp_approx(-(x * x)));
  else return erf_from_gauss(x, T(0));
}

}  // namespace kten::detail
