// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: indexing for indices kten made itself, and argmax/argmin's common form.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief index_select(x, 0, rows) under its own label, for int64 row indices that kten drew
/// itself inside [0, rows of x) (a dataset's epoch order, a replay buffer's samples). Checked in
/// the kernel like index_select (no host synchronisation). Differentiable like index_select.
Tensor select_rows_in_range(const Tensor& x, const Tensor& rows);

/// \brief argmax(x, axis, keepdim), or argmin with `smallest`; with `last`, ties give the last
/// index (ONNX's select_last_index), a NaN the last NaN.
Tensor arg_pick(const Tensor& x, int axis, bool keepdim, bool smallest, bool last);

}  // namespace kten::detail
