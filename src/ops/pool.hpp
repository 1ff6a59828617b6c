// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: pooling's forms that the public functions do not take.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief max_pool1d/2d/3d (`spatial` axes) with PyTorch's ceil_mode, which MaxPool's options
/// give: the output size rounded up, the last window starting inside the input or its left padding.
Tensor max_pool(const Tensor& x, int spatial, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode);

}  // namespace kten::detail
