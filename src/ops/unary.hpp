// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: how a unary elementwise operation records its gradient, shared by the op families of
// unary_math.cpp and activations.cpp (templates: each op instantiates its own kernels in its file).

#include <kten/tensor.hpp>

#include "autograd/autograd.hpp"
#include "core/fail.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"

namespace kten::detail {

/// \brief y = op(x), and when x requires grad, its gradient gradient(x, y, g) on the tape (with
/// the op's scalars, `attrs`, for a trace).
template <class Op, class Gradient>
Tensor differentiable_unary(const char* label, const Tensor& x, Gradient gradient, Op op = Op{}, TraceAttrs attrs = {}) {
  Tensor y = unary(label, x, op);
  if (recording(x))
    record(label, y, {&x}, [x = saved(x), y = saved(y), gradient](const Tensor& g, const Needs&) {
      return Grads{gradient(x, y, g)};
    }, attrs);
  return y;
}

// grad(a, b) for two tensors of one shape (a unary operation's input or output, and its incoming
// gradient), read as contiguous memory: only the plain indexed kernel is compiled. With the
// strided walk of elementwise_binary around them, float64 erf and exp (gelu's gradient) needed
// more registers than an AMD GPU gives each thread of a 1024-thread block, and spilled.
template <class Grad>
Tensor same_shape_gradient(const char* label, const Tensor& a_in, const Tensor& b_in, Grad grad) {
  if (a_in.shape() != b_in.shape())
    fail<ShapeError>(label, "the gradient has shape ", b_in.shape(), ", the operation's output ", a_in.shape());
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor out = empty(a.shape(), a.device(), a.dtype());
  launch(label, [&](const auto& backend, auto* x, auto* y, auto* o) {
    using T = std::remove_pointer_t<decltype(x)>;
    for_each_index(label, backend, out.numel(), BinaryKernel<T, Grad, T>{x, y, o, grad});
  }, a, b, out);
  return out;
}

/// \brief Whether a gradient kernel reads the operation's input or its output.
enum class GradOf { input, output };
/// \brief y = op(x) with the gradient grad(x, g) (or grad(y, g)) as one kernel.
template <GradOf of = GradOf::input, class Op, class Grad>
Tensor unary_with_grad_kernel(const char* label, const char* grad_label, const Tensor& x, Op op, Grad grad,
                              TraceAttrs attrs = {}) {
  return differentiable_unary(label, x, [grad_label, grad](const Tensor& x, const Tensor& y, const Tensor& g) {
    return same_shape_gradient(grad_label, of == GradOf::input ? x : y, g, grad);
  }, op, attrs);
}

}  // namespace kten::detail
