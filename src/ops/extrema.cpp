// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Extrema: max and min over every element, one axis or several, and their gradients (ties share
// it evenly, as torch.amax). Bandwidth-bound like every reduction; NaN wins over any number, so
// every device and order of combining gives NaN. The kernels are reduce_impl.hpp's, compiled here
// for these two reductions. ONNX's GlobalMaxPool loads as max over the spatial axes.
#include "reduce_impl.hpp"
#include "registry.hpp"

namespace kten {
namespace detail {

KTEN_REDUCTION_KERNELS(, MaxReduction)
KTEN_REDUCTION_KERNELS(, MinReduction)

}  // namespace detail

KTEN_REDUCTION_FORMS(max, detail::reduction<detail::MaxReduction>)
KTEN_REDUCTION_FORMS(min, detail::reduction<detail::MinReduction>)

}  // namespace kten

namespace kten::ops {

namespace {

// GlobalMaxPool: the largest element of each (N, C) channel over its spatial axes, kept as extent 1.
std::vector<Tensor> global_max_pool(OnnxCall& c) {
  const Tensor& x = c.at(0);
  std::vector<std::int64_t> axes;
  for (int a = 2; a < spatial_axes(c, x) + 2; ++a) axes.push_back(a);
  return {registered("max_axes", {x}, OpAttrs::of_ints(axes, true))};
}

}  // namespace

// The registry's rows of this family (registry.hpp): each extremum's three forms.
std::vector<OpDef> extremum_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  std::vector<OpDef> rows = {KTEN_REDUCTION_OPS(max, Domain::distinct), KTEN_REDUCTION_OPS(min, Domain::distinct)};
  // ONNX forms (onnx_forms.hpp): the reductions' (reduce.cpp)
  set_onnx(rows, "max_axes",
           {{"ReduceMax", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10},
            {"GlobalMaxPool", 13, kOnnxLastOpset, 1, 1, 1, true, global_max_pool, nullptr, 0}},
           {onnx_reduction_of("kten::max", "ReduceMax")});
  set_onnx(rows, "min_axes", {{"ReduceMin", 13, kOnnxLastOpset, 1, 2, 1, true, onnx_reduce, nullptr, 0b10}},
           {onnx_reduction_of("kten::min", "ReduceMin")});
  return rows;
}

}  // namespace kten::ops
