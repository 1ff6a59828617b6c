// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: elementwise functors and helpers shared by the kernels of several operations.

#include <cstdint>

#include <type_traits>

#include "core/kokkos_compat.hpp"
#include <kten/tensor.hpp>

#include "dispatch/dispatch.hpp"
#include "fast_div.hpp"
#include "vector_math.hpp"

namespace kten::detail {

namespace math = compat::math;

struct Add { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return a + b; } };
struct Sub { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return a - b; } };
struct Mul { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return a * b; } };
struct Div { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return a / b; } };

struct Exp { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return exp_approx(x); } };
struct Log { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::log(x); } };
struct Sqrt { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::sqrt(x); } };
struct Abs { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::fabs(x); } };
struct Neg { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return -x; } };
struct Relu { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x <= T(0) ? T(0) : x; } };
/// \brief relu's gradient, the same test as Relu: where relu passed x (x > 0 or NaN), g passes.
struct ReluGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return x <= T(0) ? T(0) : g; } };
/// \brief abs's gradient: g times the sign of x, whose sign is 0 at 0 and at NaN (PyTorch's sgn).
struct AbsGrad {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return x > T(0) ? g : x < T(0) ? -g : T(0); }
};
/// \brief sigmoid's gradient from its output y: g y (1 - y).
struct SigmoidGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T y, T g) const { return g * y * (T(1) - y); } };
/// \brief tanh's gradient from its output y: g (1 - y^2).
struct TanhGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T y, T g) const { return g * (T(1) - y * y); } };
struct Sigmoid {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return T(1) / (T(1) + exp_approx(-x)); }
};
struct Tanh { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::tanh(x); } };

// The ops below and their gradients compute what PyTorch 1.13's CPU kernels and derivatives.yaml
// compute, in the same order, so the edge values (0, inf, NaN, ties) agree.
struct Sin { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::sin(x); } };
/// \brief sin's gradient: g cos(x).
struct SinGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return g * math::cos(x); } };
struct Cos { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::cos(x); } };
/// \brief cos's gradient: g (-sin(x)).
struct CosGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return g * -math::sin(x); } };
struct Log1p { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::log1p(x); } };
/// \brief log1p's gradient: g / (x + 1).
struct Log1pGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return g / (x + T(1)); } };
struct Expm1 { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::expm1(x); } };
/// \brief expm1's gradient from its output y: g (y + 1).
struct Expm1Grad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T y, T g) const { return g * (y + T(1)); } };
struct Erf { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return erf_approx(x); } };
/// \brief erf's gradient: 2/sqrt(pi) e^(-x^2) g.
struct ErfGrad {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return T(1.1283791670955126) * exp_approx(-(x * x)) * g; }
};
/// \brief Exact (erf) GELU: x Phi(x) = x/2 (1 + erf(x / sqrt 2)).
struct Gelu {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x * T(0.5) * (T(1) + erf_approx(x * T(0.7071067811865476))); }
};
/// \brief GELU's gradient: g (Phi(x) + x phi(x)); NaN at +-inf (inf * 0), as PyTorch.
struct GeluGrad {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const {
    const T z = x * T(0.7071067811865476);
    const T gauss = exp_approx(-(z * z));  // e^(-x^2 / 2), shared by erf and the density
    const T cdf = T(0.5) * (T(1) + erf_from_gauss(z, gauss));
    const T pdf = T(0.3989422804014327) * gauss;
    return g * (cdf + x * pdf);
  }
};
/// \brief SiLU: x sigmoid(x) = x / (1 + e^-x) (NaN at -inf, as PyTorch).
struct Silu { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x / (T(1) + exp_approx(-x)); } };
/// \brief SiLU's gradient: g s (1 + x (1 - s)) with s = sigmoid(x).
struct SiluGrad {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const {
    const T s = T(1) / (T(1) + exp_approx(-x));
    return g * s * (T(1) + x * (T(1) - s));
  }
};
/// \brief softplus: log(1 + e^(beta x)) / beta, x itself where beta x > threshold.
struct Softplus {
  double beta, threshold;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const {
    const T bx = x * T(beta);
    return bx > T(threshold) ? x : math::log1p(exp_approx(bx)) / T(beta);
  }
};
/// \brief softplus's gradient: g z / (z + 1) with z = e^(beta x), g itself where beta x > threshold.
struct SoftplusGrad {
  double beta, threshold;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const {
    const T bx = x * T(beta), z = exp_approx(bx);
    return bx > T(threshold) ? g : g * z / (z + T(1));
  }
};
/// \brief clamp: min(max(x, lo), hi) (hi where lo > hi); every element NaN when a bound is NaN.
struct Clamp {
  double lo, hi;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const {
    const T l = T(lo), h = T(hi);
    if (l != l || h != h) return l + h;
    const T m = x < l ? l : x;
    return h < m ? h : m;
  }
};
/// \brief clamp's gradient: g where lo <= x <= hi (bounds included), else 0 (NaN x included).
struct ClampGrad {
  double lo, hi;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return x >= T(lo) && x <= T(hi) ? g : T(0); }
};
// --- leaky_relu (issue 31, normalisation and small layers) ---
/// \brief leaky_relu: x where x > 0, else slope x (NaN stays NaN).
struct LeakyRelu {
  double slope;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x > T(0) ? x : x * T(slope); }
};
/// \brief leaky_relu's gradient: g where x > 0, else slope g (PyTorch's, 0 and NaN included).
struct LeakyReluGrad {
  double slope;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return x > T(0) ? g : g * T(slope); }
};

/// \brief x^e for a scalar e. PyTorch computes some exponents another way, and so does this: 0 and
/// 1 (1 and x, NaN included), 0.5 (sqrt: -0 stays -0, -inf gives NaN), -0.5 (1 / sqrt), -1, 2, 3, -2
/// (products); others through pow.
struct PowScalar {
  enum Kind { general, zero, one, half, minus_half, minus_one, two, three, minus_two };
  Kind kind;
  double e;
  static PowScalar of(double e) {
    const Kind kind = e == 0 ? zero : e == 1 ? one : e == 0.5 ? half : e == -0.5 ? minus_half : e == -1 ? minus_one
                    : e == 2 ? two : e == 3 ? three : e == -2 ? minus_two : general;
    return {kind, e};
  }
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const {
    switch (kind) {
      case zero: return T(1);
      case one: return x;
      case half: return math::sqrt(x);
      case minus_half: return T(1) / math::sqrt(x);
      case minus_one: return T(1) / x;
      case two: return x * x;
      case three: return x * x * x;
      case minus_two: return T(1) / (x * x);
      default: return math::pow(x, T(e));
    }
  }
};
/// \brief pow(x, e)'s gradient for e != 0: g (e x^(e-1)), x^(e-1) as PowScalar computes it.
struct PowScalarGrad {
  PowScalar lower;  // x -> x^(e-1)
  double e;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return g * (T(e) * lower(x)); }
};
struct Pow { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return math::pow(a, b); } };
/// \brief d(a^b)/da without g: b a^(b-1) (masked to 0 where b == 0 by ZeroWhereExponentZero).
struct PowBaseFactor { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return b * math::pow(a, b - T(1)); } };
/// \brief t, except 0 where the exponent b is 0, whatever t is (PyTorch's where(b == 0, 0, g ...)).
struct ZeroWhereExponentZero { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T t, T b) const { return b == T(0) ? T(0) : t; } };
/// \brief d(a^b)/db without g: a^b log(a), 0 where a == 0 and b >= 0 (PyTorch's mask).
struct PowExponentFactor {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const {
    return a == T(0) && b >= T(0) ? T(0) : math::pow(a, b) * math::log(a);
  }
};
/// \brief torch.maximum: the larger, NaN when either is NaN.
struct Maximum {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return a != a ? a : b != b ? b : a < b ? b : a; }
};
/// \brief torch.minimum: the smaller, NaN when either is NaN.
struct Minimum {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T a, T b) const { return a != a ? a : b != b ? b : b < a ? b : a; }
};
/// \brief The share of maximum's (larger) or minimum's gradient that goes to `self`: 1/2 at a tie,
/// 0 where `other` is the result, else 1 (NaN on either side included, as PyTorch 1.13).
struct ExtremumShare {
  bool larger;
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T self, T other) const {
    return self == other ? T(0.5) : (larger ? self < other : other < self) ? T(0) : T(1);
  }
};
/// \brief w g, but 0 where the share w is 0 whatever g is (PyTorch's masked_fill of the gradient).
struct ShareOf { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T w, T g) const { return w == T(0) ? T(0) : w * g; } };

template <class T> struct AddScalar { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x + s; } };
template <class T> struct ScalarSub { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return s - x; } };
template <class T> struct MulScalar { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x * s; } };
template <class T> struct DivScalar { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x / s; } };
template <class T> struct ScalarDiv { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return s / x; } };

inline constexpr int kMaxRank = 8;

/// \brief How a flat row-major index over `extent` maps to the elements of two operands: per-operand
/// strides in elements (0 along broadcast or expanded axes, anything for a view); plain data for
/// kernels. A view is "a broadcast with arbitrary strides".
struct BroadcastIndex {
  int rank = 0;
  std::int64_t extent[kMaxRank] = {};
  std::int64_t stride_a[kMaxRank] = {};
  std::int64_t stride_b[kMaxRank] = {};
  /// \brief Division by each extent: a multiply-high, not a 64-bit division (dozens of
  /// instructions on a GPU, which decodes every element's index: a gather ran at 0.14 of a copy).
  FastDiv by[kMaxRank];
  /// \brief The offsets of flat index i in operand a and operand b.
  KOKKOS_INLINE_FUNCTION void offsets(std::int64_t i, std::int64_t& ia, std::int64_t& ib) const {
    std::int64_t rest = i;
    ia = 0;
    ib = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const std::int64_t q = by[d].div(rest), c = rest - q * extent[d];
      rest = q;
      ia += c * stride_a[d];
      ib += c * stride_b[d];
    }
  }
};

/// \brief How a strided kernel walks its flat index: `row == 0`, one element per index (GPUs: adjacent
/// threads write adjacent outputs); else one row of `row` elements (the innermost merged axis) per
/// index (host: one index decomposition per row instead of one per element, and a plain loop along
/// the row that vectorises when the inputs' inner stride is 1).
struct StridedWalk {
  std::int64_t row = 0;
  std::int64_t indices = 0;  ///< \brief how many indices the kernel runs over
};

/// \brief The walk for a backend: rows on the host when there is an axis, elements otherwise.
template <class Backend>
StridedWalk strided_walk(const BroadcastIndex& s, std::int64_t numel) {
  if (!Backend::is_host || s.rank == 0 || numel == 0) return {0, numel};
  const std::int64_t row = s.extent[s.rank - 1];
  return {row, numel / row};
}

/// \brief The index of a flat row-major loop over `shape` into two strided operands (strides per
/// axis of `shape`, 0 where broadcast): axes of extent 1 are dropped and adjacent axes that both
/// operands step through evenly are merged, so a contiguous pair becomes one axis. ShapeError when
/// more than kMaxRank axes remain.
BroadcastIndex strided_index(const char* op, const Shape& shape, const Shape& strides_a, const Shape& strides_b);

/// \brief `x`'s strides along the axes of a broadcast result of shape `out` (0 where x is broadcast).
Shape broadcast_strides(const Tensor& x, const Shape& out);

/// \brief Copies src's elements into dst's (one device, dtype and shape; either may be strided;
/// dst must not overlap itself), one kernel indexing both through their strides.
void strided_copy(const char* op, const Tensor& src, const Tensor& dst);

/// \brief The output shape of a broadcast and how to index the inputs.
struct Broadcast {
  bool same_shape = false;
  Shape shape;
};

/// \brief NumPy broadcasting of two shapes; ShapeError names the operation and the clash.
Broadcast broadcast_shapes(const char* op, const Shape& a, const Shape& b);

/// \brief The gradient of relu at x: 0 where x <= 0, else grad (NaN x included, as in PyTorch).
Tensor relu_grad(const Tensor& x, const Tensor& grad);

/// \brief Sets every element of `t` to `value`, converted as astype() converts (for int64 the
/// caller checks that one can hold it: check_scalar_fits).
void fill(const Tensor& t, double value);

/// \brief t *= factor in place, `factor` a 0-d tensor on t's device with t's dtype (read there: no
/// host synchronisation).
void scale_in_place(const Tensor& t, const Tensor& factor);

/// \brief x as a To, the conversion of astype(): to bool x != 0 (NaN -> true, as PyTorch); a float
/// to int64 truncated toward zero and saturated, NaN -> 0 (a cast would be undefined there, and
/// devices differ); anything else a static_cast.
template <class To, class From>
KOKKOS_INLINE_FUNCTION To convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_same_v<To, std::int64_t> && std::is_floating_point_v<From>) {
    if (x != x) return 0;
    if (x >= From(0x1p63)) return std::int64_t(0x7fffffffffffffff);
    if (x < From(-0x1p63)) return -std::int64_t(0x7fffffffffffffff) - 1;
    return static_cast<std::int64_t>(x);
  } else {
    return static_cast<To>(x);
  }
}

/// \brief The element type of an operation's result: the operands' (SameType), or a fixed one
/// (bool for comparisons).
struct SameType {};

/// \brief The dtype of a result of element type Result (SameType: `operand`'s).
template <class Result>
DType result_dtype(const Tensor& operand) {
  if constexpr (std::is_same_v<Result, SameType>) return operand.dtype();
  else return dtype_of<Result>();
}

/// \brief The result as a launch() operand: dispatched with the inputs (SameType) or Fixed<Result>.
template <class Result>
decltype(auto) result_operand(const Tensor& out) {
  if constexpr (std::is_same_v<Result, SameType>) return (out);
  else return Fixed<Result>{out};
}

/// \brief out[i] = op(x[i]) (out may be x).
template <class T, class Op, class Out = T>
struct UnaryKernel {
  const T* x;
  Out* out;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = op(x[i]); }
};

/// \brief out[i] = op(a[i], b[i]) for operands of one shape.
template <class T, class Op, class Out = T>
struct BinaryKernel {
  const T* a;
  const T* b;
  Out* out;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = op(a[i], b[i]); }
};

/// \brief out[i] = op(x[ix]) for a strided x (out contiguous): ix through the index's stride_a.
template <class T, class Op, class Out = T>
struct StridedUnaryKernel {
  const T* x;
  Out* out;
  Op op;
  BroadcastIndex s;
  std::int64_t row;  // StridedWalk::row
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    std::int64_t ix, unused;
    if (row == 0) {
      s.offsets(i, ix, unused);
      out[i] = op(x[ix]);
      return;
    }
    s.offsets(i * row, ix, unused);
    const std::int64_t sx = s.stride_a[s.rank - 1];
    Out* o = out + i * row;
    if (sx == 1) {
      for (std::int64_t j = 0; j < row; ++j) o[j] = op(x[ix + j]);
    } else {
      for (std::int64_t j = 0; j < row; ++j) o[j] = op(x[ix + j * sx]);
    }
  }
};

/// \brief out[io] = x[ix]: a copy between two strided tensors of one shape.
template <class T>
struct StridedCopyKernel {
  const T* x;
  T* out;
  BroadcastIndex s;  // stride_a: x's, stride_b: out's
  std::int64_t row;  // StridedWalk::row
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    std::int64_t ix, io;
    if (row == 0) {
      s.offsets(i, ix, io);
      out[io] = x[ix];
      return;
    }
    s.offsets(i * row, ix, io);
    const std::int64_t sx = s.stride_a[s.rank - 1], so = s.stride_b[s.rank - 1];
    if (sx == 1 && so == 1) {
      for (std::int64_t j = 0; j < row; ++j) out[io + j] = x[ix + j];
    } else {
      for (std::int64_t j = 0; j < row; ++j) out[io + j * so] = x[ix + j * sx];
    }
  }
};

/// \brief A new contiguous tensor op(x) of x's shape and device, of x's dtype (or Result's);
/// make_op(T{}) gives the functor for element type T, float or double unless `accepts` is any. A
/// strided x is read through its strides (no copy).
template <class Result = SameType, Accepts accepts = Accepts::floats, class MakeOp>
Tensor elementwise_unary(const char* label, const Tensor& x, MakeOp make_op) {
  check_defined(x, label);
  Tensor out = empty(x.shape(), x.device(), result_dtype<Result>(x));
  if (x.is_contiguous()) {
    launch<accepts>(label, [&](const auto& backend, auto* in, auto* o) {
      using T = std::remove_pointer_t<decltype(in)>;
      using Out = std::remove_pointer_t<decltype(o)>;
      for_each_index(label, backend, x.numel(), UnaryKernel<T, decltype(make_op(T{})), Out>{in, o, make_op(T{})});
    }, x, result_operand<Result>(out));
    return out;
  }
  const BroadcastIndex index = strided_index(label, x.shape(), x.strides(), out.strides());
  launch_views<accepts>(label, [&](const auto& backend, auto* in, auto* o) {
    using T = std::remove_pointer_t<decltype(in)>;
    using Out = std::remove_pointer_t<decltype(o)>;
    const StridedWalk walk = strided_walk<std::decay_t<decltype(backend)>>(index, x.numel());
    for_each_index(label, backend, walk.indices,
                   StridedUnaryKernel<T, decltype(make_op(T{})), Out>{in, o, make_op(T{}), index, walk.row}, x.numel());
  }, x, result_operand<Result>(out));
  return out;
}

/// \brief A new tensor op(x): a unary elementwise operation is a functor and this one call.
template <class Op>
Tensor unary(const char* label, const Tensor& x, Op op = Op{}) {
  return elementwise_unary(label, x, [op](auto) { return op; });
}

/// \brief out[i] = op(a[ia], b[ib]): the flat output index is decomposed into coordinates and
/// re-composed into each input's offset through its strides (0 along broadcast axes).
template <class T, class Op, class Out = T>
struct BroadcastBinaryKernel {
  const T* a;
  const T* b;
  Out* out;
  Op op;
  BroadcastIndex s;
  std::int64_t row;  // StridedWalk::row
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    std::int64_t ia, ib;
    if (row == 0) {
      s.offsets(i, ia, ib);
      out[i] = op(a[ia], b[ib]);
      return;
    }
    s.offsets(i * row, ia, ib);
    const std::int64_t sa = s.stride_a[s.rank - 1], sb = s.stride_b[s.rank - 1];
    Out* o = out + i * row;
    if (sa == 1 && sb == 1) {
      for (std::int64_t j = 0; j < row; ++j) o[j] = op(a[ia + j], b[ib + j]);
    } else if (sa == 1 && sb == 0) {
      const T y = b[ib];
      for (std::int64_t j = 0; j < row; ++j) o[j] = op(a[ia + j], y);
    } else if (sa == 0 && sb == 1) {
      const T x = a[ia];
      for (std::int64_t j = 0; j < row; ++j) o[j] = op(x, b[ib + j]);
    } else {
      for (std::int64_t j = 0; j < row; ++j) o[j] = op(a[ia + j * sa], b[ib + j * sb]);
    }
  }
};

/// \brief A new contiguous tensor op(a, b) with NumPy broadcasting; both on one device with one
/// dtype (float32 or float64 unless `accepts` is any), the result of theirs or Result's.
/// Bandwidth-bound: equal shapes of contiguous operands take the plain indexed path; strided
/// operands (views) are read through their strides, no copy.
template <class Result = SameType, Accepts accepts = Accepts::floats, class Op>
Tensor elementwise_binary(const char* label, const Tensor& a, const Tensor& b, Op op) {
  check_compatible(label, a, b);
  Broadcast bc = broadcast_shapes(label, a.shape(), b.shape());
  Tensor out = empty(std::move(bc.shape), a.device(), result_dtype<Result>(a));  // bc.shape is not read again
  if (bc.same_shape && a.is_contiguous() && b.is_contiguous()) {
    launch<accepts>(label, [&](const auto& backend, auto* x, auto* y, auto* o) {
      using T = std::remove_pointer_t<decltype(x)>;
      using Out = std::remove_pointer_t<decltype(o)>;
      for_each_index(label, backend, out.numel(), BinaryKernel<T, Op, Out>{x, y, o, op});
    }, a, b, result_operand<Result>(out));
    return out;
  }
  const BroadcastIndex index =
      strided_index(label, out.shape(), broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape()));
  launch_views<accepts>(label, [&](const auto& backend, auto* x, auto* y, auto* o) {
    using T = std::remove_pointer_t<decltype(x)>;
    using Out = std::remove_pointer_t<decltype(o)>;
    const StridedWalk walk = strided_walk<std::decay_t<decltype(backend)>>(index, out.numel());
    for_each_index(label, backend, walk.indices, BroadcastBinaryKernel<T, Op, Out>{x, y, o, op, index, walk.row},
                   out.numel());
  }, a, b, result_operand<Result>(out));
  return out;
}

}  // namespace kten::detail
