// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the stride arithmetic of views (reshape's, and the ops that build views of their own).

#include <optional>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief The strides that show elements laid out by (shape, strides) as `new_shape` (the same
/// element count) without moving them, or nothing when no strides can (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape);

}  // namespace kten::detail
