// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reductions over all elements, one axis or several. Whole-tensor reductions are bandwidth-bound;
// their result is written into device memory, so they return without fencing (a 0-d tensor on the
// device). NaN propagates: a sum, norm or variance over a NaN is NaN by arithmetic, and max and min
// take NaN over any number, so every device and every order of combining gives NaN (NumPy's and
// PyTorch's rule; which zero max or min returns among +0 and -0 may depend on the order).
//
// This file: sum, mean, norm, var and mean_square; max and min are in extrema.cpp, the kernels
// they share in reduce_impl.hpp.
#include "reduce_impl.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {
ReducedAxes reduced_axes(const char* op, const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  const Shape& s = x.shape();
  const int n = x.ndim(), wrap = n == 0 ? 1 : n;
  ReducedAxes r;
  r.keep = keepdim;
  r.reduced.assign(n, axes.empty());
  std::vector<int> named(wrap, -1);
  for (int axis : axes) {
    const int a = axis < 0 ? axis + wrap : axis;
    if (a < 0 || a >= wrap)
      fail<ShapeError>(op, "axis ", axis, " is out of range for a tensor of shape ", s, " (ndim ", n, ")");
    if (named[a] != -1)
      fail<ShapeError>(op, "axes ", named[a], " and ", axis, " name the same axis of shape ", s, "; name each axis once");
    named[a] = axis;
    if (n > 0) r.reduced[a] = true;
  }
  r.all = true;
  for (int d = 0; d < n; ++d) {
    r.keepdim.push_back(r.reduced[d] ? 1 : s[d]);
    if (r.reduced[d]) {
      r.len *= s[d];
    } else {
      r.kept.push_back(s[d]);
      r.all = r.all && s[d] == 1;
    }
  }
  return r;
}

KTEN_REDUCTION_KERNELS(, SumReduction)
KTEN_REDUCTION_KERNELS(, MeanReduction)
KTEN_REDUCTION_KERNELS(, NormReduction)
KTEN_REDUCTION_KERNELS(, MeanSquareReduction)
KTEN_REDUCTION_KERNELS(, SquaredDeviationReduction)

Tensor mean_square(const Tensor& x) {
  Tensor out = reduce_all<MeanSquareReduction>(x);
  if (recording(x))
    record("kten::mean_square", out, {&x}, [x = saved(x)](const Tensor& g, const Needs&) {
      return Grads{x * (g * (2.0 / static_cast<double>(x.numel())))};
    });
  return out;
}

namespace {

// The unbiased variance, two-pass for stability (the mean, then the squared deviations from it),
// and its gradient 2 (x - mean) / (n - 1); the reduced axes' mean is kept for backward.
Tensor variance(const Tensor& x, const ReducedAxes& r) {
  const Tensor m = reduce<MeanReduction>(x, r).reshape(r.keepdim);
  Tensor y = reduce<SquaredDeviationReduction>(x.detach() - m, r);
  if (recording(x))
    record(SquaredDeviationReduction::label, y, {&x}, [x = saved(x), m, r](const Tensor& g, const Needs&) {
      return Grads{(x - m) * spread(g * (2.0 / static_cast<double>(r.len - 1)), x.shape(), r)};
    });
  return y;
}

Tensor variance_over(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  constexpr const char* op = SquaredDeviationReduction::label;
  check_defined(x, op);
  return variance(x, reduced_axes(op, x, axes, keepdim));
}

}  // namespace
}  // namespace detail

KTEN_REDUCTION_FORMS(sum, detail::reduction<detail::SumReduction>)
KTEN_REDUCTION_FORMS(mean, detail::reduction<detail::MeanReduction>)
KTEN_REDUCTION_FORMS(norm, detail::reduction<detail::NormReduction>)
KTEN_REDUCTION_FORMS(var, detail::variance_over)

}  // namespace kten

namespace kten::ops {

// The registry's rows of this family (registry.hpp): each reduction's three forms.
std::vector<OpDef> reduce_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  return {KTEN_REDUCTION_OPS(sum, Domain::real), KTEN_REDUCTION_OPS(mean, Domain::real),
          KTEN_REDUCTION_OPS(norm, Domain::real), KTEN_REDUCTION_OPS(var, Domain::real)};
}

}  // namespace kten::ops
