#pragma once
// Internal: elementwise functors and helpers shared by the kernels of several operations.

#include <cstdint>

#include <type_traits>

#include "kokkos_compat.hpp"
#include <kten/tensor.hpp>

#include "dispatch.hpp"
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
struct Sigmoid {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return T(1) / (T(1) + exp_approx(-x)); }
};
struct Tanh { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::tanh(x); } };

template <class T> struct AddScalar { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x + s; } };
template <class T> struct ScalarSub { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return s - x; } };
template <class T> struct MulScalar { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x * s; } };
template <class T> struct DivScalar { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x / s; } };
template <class T> struct ScalarDiv { T s; KOKKOS_INLINE_FUNCTION T operator()(T x) const { return s / x; } };

inline constexpr int kMaxRank = 8;

/// \brief Per-input strides of a broadcast (0 along broadcast axes); plain data for kernels.
struct BroadcastIndex {
  int rank = 0;
  std::int64_t extent[kMaxRank] = {};
  std::int64_t stride_a[kMaxRank] = {};
  std::int64_t stride_b[kMaxRank] = {};
};

/// \brief The output shape of a broadcast and how to index the inputs.
struct Broadcast {
  bool same_shape = false;
  Shape shape;
  BroadcastIndex index;
};

/// \brief NumPy broadcasting of two shapes; ShapeError names the operation and the clash.
Broadcast broadcast_shapes(const char* op, const Shape& a, const Shape& b);

/// \brief The gradient of relu at x: 0 where x <= 0, else grad (NaN x included, as in PyTorch).
Tensor relu_grad(const Tensor& x, const Tensor& grad);

/// \brief Sets every element of `t` to `value`.
void fill(const Tensor& t, double value);

/// \brief out[i] = op(x[i]) (out may be x).
template <class T, class Op>
struct UnaryKernel {
  const T* x;
  T* out;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = op(x[i]); }
};

/// \brief out[i] = op(a[i], b[i]) for operands of one shape.
template <class T, class Op>
struct BinaryKernel {
  const T* a;
  const T* b;
  T* out;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { out[i] = op(a[i], b[i]); }
};

/// \brief A new tensor op(x) of x's shape, device and dtype; make_op(T{}) gives the functor for
/// element type T.
template <class MakeOp>
Tensor elementwise_unary(const char* label, const Tensor& x, MakeOp make_op) {
  check_defined(x, label);
  Tensor out = empty(x.shape(), x.device(), x.dtype());
  launch(label, [&](const auto& backend, auto* in, auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    for_each_index(label, backend, x.numel(), UnaryKernel<T, decltype(make_op(T{}))>{in, o, make_op(T{})});
  }, x, out);
  return out;
}

/// \brief A new tensor Op{}(x): a unary elementwise operation is a functor and this one call.
template <class Op>
Tensor unary(const char* label, const Tensor& x) {
  return elementwise_unary(label, x, [](auto) { return Op{}; });
}

/// \brief out[i] = op(a[ia], b[ib]): the flat output index is decomposed into coordinates and
/// re-composed into each input's offset, with stride 0 along broadcast axes.
template <class T, class Op>
struct BroadcastBinaryKernel {
  const T* a;
  const T* b;
  T* out;
  Op op;
  BroadcastIndex s;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    std::int64_t rest = i, ia = 0, ib = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const std::int64_t c = rest % s.extent[d];
      rest /= s.extent[d];
      ia += c * s.stride_a[d];
      ib += c * s.stride_b[d];
    }
    out[i] = op(a[ia], b[ib]);
  }
};

/// \brief A new tensor op(a, b) with NumPy broadcasting; both on one device with one dtype.
/// Bandwidth-bound: equal shapes take the plain indexed path.
template <class Op>
Tensor elementwise_binary(const char* label, const Tensor& a, const Tensor& b, Op op) {
  check_compatible(label, a, b);
  Broadcast bc = broadcast_shapes(label, a.shape(), b.shape());
  Tensor out = empty(std::move(bc.shape), a.device(), a.dtype());  // bc.shape is not read again
  launch(label, [&](const auto& backend, auto* x, auto* y, auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    if (bc.same_shape) for_each_index(label, backend, out.numel(), BinaryKernel<T, Op>{x, y, o, op});
    else for_each_index(label, backend, out.numel(), BroadcastBinaryKernel<T, Op>{x, y, o, op, bc.index});
  }, a, b, out);
  return out;
}

}  // namespace kten::detail
