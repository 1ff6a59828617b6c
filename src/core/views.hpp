// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: stride arithmetic shared by the tensor core and its views.

#include <optional>

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief Row-major strides of `shape`, in elements.
Shape contiguous_strides(const Shape& shape);

/// \brief The strides that show elements laid out by (shape, strides) as `new_shape` (the same
/// element count) without moving them, or nothing when no strides can (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape);

}  // namespace kten::detail
