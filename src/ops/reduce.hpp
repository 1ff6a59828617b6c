// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal reductions beside the public ones (kten/ops.hpp).

#include <vector>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief The axes a reduction folds and the shapes of its result.
struct ReducedAxes {
  std::vector<bool> reduced;  // per axis of x
  Shape kept;                 // the result's shape: x's without the reduced axes
  Shape keepdim;              // the result's shape with keepdim: the reduced axes kept as extent 1
  std::int64_t len = 1;       // how many elements each result folds
  bool all = false;           // every axis of extent > 1 is reduced: one result, the whole-tensor kernels
  bool keep = false;          // the caller asked for keepdim
  const Shape& shape() const { return keep ? keepdim : kept; }
};

/// \brief The reduction of x over `axes` (negative ones count from the end), each named at most
/// once (ShapeError otherwise); none means every axis, as PyTorch 1.13's sum(x, dim=[]). A 0-d
/// tensor takes axis 0 or -1, as PyTorch.
ReducedAxes reduced_axes(const char* op, const Tensor& x, const std::vector<int>& axes, bool keepdim);

/// \brief mean(x * x) in one pass (a 0-d tensor; NaN propagates): MSELoss without a temporary.
Tensor mean_square(const Tensor& x);

}  // namespace kten::detail
