// softmax, log_softmax and logsumexp along one axis, composed from the reduction and elementwise
// kernels, each with its gradient. Every one starts by subtracting the axis' max, so exp never
// overflows. Bandwidth-bound: softmax reads x twice and its exponentials twice (max, exp(x - max),
// their sum, the division), four passes over x's size where a fused row kernel would need two.
#include <cmath>

#include <kten/ops.hpp>

#include "autograd.hpp"
#include "checks.hpp"
#include "elementwise.hpp"
#include "reduce.hpp"

namespace kten {
namespace detail {
namespace {

/// \brief exp(x - m) in one pass: the shifted exponentials without a temporary x - m.
struct ExpOfDifference {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T m) const { return exp_approx(x - m); }
};
/// \brief log(s) + m: logsumexp from the sum of the shifted exponentials and the shift.
struct LogPlus {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T s, T m) const { return math::log(s) + m; }
};
/// \brief The shift logsumexp subtracts: the max, or 0 where the max is infinite (as PyTorch), so
/// that a slice of -inf gives log(0) + 0 = -inf and one holding +inf gives +inf, not inf - inf.
struct FiniteOrZero {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T m) const {
    return m == static_cast<T>(INFINITY) || m == static_cast<T>(-INFINITY) ? T(0) : m;
  }
};

// The axis as a one-axis reduction, its extent kept as 1 (checks x and the axis).
ReducedAxes one_axis(const char* op, const Tensor& x, int axis) {
  check_defined(x, op);
  return reduced_axes(op, x, {axis}, true);
}

}  // namespace
}  // namespace detail

using namespace detail;

Tensor softmax(const Tensor& x_in, int axis) {
  constexpr const char* op = "kten::softmax";
  one_axis(op, x_in, axis);
  const Tensor x = x_in.detach();  // the forward's steps are one node on the tape
  Tensor y = empty(x.shape(), x.device(), x.dtype());
  if (x.numel() > 0) {
    const Tensor e = elementwise_binary(op, x, max(x, {axis}, true), ExpOfDifference{});
    y = e / sum(e, {axis}, true);
  }
  if (recording(x_in))
    record(op, y, {&x_in}, [y = saved(y), axis](const Tensor& g, const Needs&) {
      return Grads{y * (g - sum(g * y, {axis}, true))};
    });
  return y;
}

Tensor log_softmax(const Tensor& x_in, int axis) {
  constexpr const char* op = "kten::log_softmax";
  one_axis(op, x_in, axis);
  const Tensor x = x_in.detach();
  Tensor y = empty(x.shape(), x.device(), x.dtype());
  if (x.numel() > 0) {
    // (x - max) - log(sum(exp(x - max))), not x - logsumexp: x - max is exact near the max, where
    // max + log(sum) would round to the max's precision.
    const Tensor shifted = x - max(x, {axis}, true);
    y = shifted - log(sum(exp(shifted), {axis}, true));
  }
  if (recording(x_in))
    record(op, y, {&x_in}, [y = saved(y), axis](const Tensor& g, const Needs&) {
      return Grads{g - exp(y) * sum(g, {axis}, true)};
    });
  return y;
}

Tensor logsumexp(const Tensor& x_in, int axis, bool keepdim) {
  constexpr const char* op = "kten::logsumexp";
  const ReducedAxes r = one_axis(op, x_in, axis);
  const Tensor x = x_in.detach();
  Tensor y;  // keepdim's shape
  if (r.len == 0) {
    y = full(r.keepdim, -INFINITY, x.device(), x.dtype());  // log(0)
  } else {
    const Tensor shift = unary<FiniteOrZero>(op, max(x, {axis}, true));
    y = elementwise_binary(op, sum(elementwise_binary(op, x, shift, ExpOfDifference{}), {axis}, true), shift, LogPlus{});
  }
  Tensor out = keepdim ? y : y.reshape(r.kept);
  if (recording(x_in))
    record(op, out, {&x_in}, [x = saved(x_in), y = saved(y), r](const Tensor& g, const Needs&) {
      return Grads{g.reshape(r.keepdim) * elementwise_binary("kten::logsumexp_grad", x, y, ExpOfDifference{})};
    });
  return out;
}

}  // namespace kten
