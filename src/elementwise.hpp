#pragma once
// Internal: elementwise functors and helpers shared by the kernels of several operations.

#include <cstdint>

#include <kten/detail/kokkos_compat.hpp>
#include <kten/tensor.hpp>

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
// x <= 0 is false for NaN, so NaN passes through (NumPy's maximum(x, 0), PyTorch's relu).
struct Relu { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return x <= T(0) ? T(0) : x; } };
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
/// \brief p -= lr * (g + weight_decay * p), in place.
void sgd_update(const Tensor& p, const Tensor& g, double lr, double weight_decay);

/// \brief Sets every element of `t` to `value`.
void fill(const Tensor& t, double value);

/// \brief out[i] = op(x[i]) for i < n (out may be x).
template <class Backend, class T, class Op>
void map_kernel(const Backend& be, const char* label, const T* x, T* out, std::int64_t n, Op op) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, n),
                       KOKKOS_LAMBDA(std::int64_t i) { out[i] = op(x[i]); });
}

}  // namespace kten::detail
