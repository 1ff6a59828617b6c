// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the general matrix product behind matmul, Linear's forward and its gradients.

#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief C = op(A) * op(B) [+ bias along columns] [+ C], for 2-D float tensors on one device;
/// op(X) is X or its transpose. C must already have the result's shape. Shapes are the caller's
/// responsibility (checked by the public operations).
void gemm(const Tensor& A, bool transpose_a, const Tensor& B, bool transpose_b, const Tensor& C,
          const Tensor* bias, bool accumulate);

/// \brief x W^T [+ bias] in one GEMM (the bias in its epilogue), recorded for autograd: Linear's
/// forward. x is (batch, in), W (out, in) as PyTorch's, bias (out); shapes are the caller's
/// responsibility.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor* bias);

}  // namespace kten::detail
