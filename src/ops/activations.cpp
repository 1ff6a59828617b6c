// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Activations: relu, sigmoid, tanh, gelu, silu, softplus, clamp and leaky_relu, each with its gradient beside
// it (one kernel each way). Bandwidth-bound like every elementwise kernel (elementwise.cpp).
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"
#include "unary.hpp"

namespace kten {

using namespace detail;

Tensor relu(const Tensor& x) {
  return differentiable_unary<Relu>("kten::relu", x, [](const Tensor& x, const Tensor&, const Tensor& g) { return relu_grad(x, g); });
}
Tensor detail::relu_grad(const Tensor& x, const Tensor& grad) {
  return elementwise_binary("kten::relu_grad", x, grad, ReluGrad{});
}
Tensor sigmoid(const Tensor& x) {
  return unary_with_grad_kernel<GradOf::output>("kten::sigmoid", "kten::sigmoid_grad", x, Sigmoid{}, SigmoidGrad{});
}
Tensor tanh(const Tensor& x) {
  return unary_with_grad_kernel<GradOf::output>("kten::tanh", "kten::tanh_grad", x, Tanh{}, TanhGrad{});
}
Tensor gelu(const Tensor& x) { return unary_with_grad_kernel("kten::gelu", "kten::gelu_grad", x, Gelu{}, GeluGrad{}); }
Tensor silu(const Tensor& x) { return unary_with_grad_kernel("kten::silu", "kten::silu_grad", x, Silu{}, SiluGrad{}); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return unary_with_grad_kernel("kten::softplus", "kten::softplus_grad", x, Softplus{beta, threshold},
                                SoftplusGrad{beta, threshold}, [=] { return ops::OpAttrs::of_reals({beta, threshold}); });
}
Tensor clamp(const Tensor& x, double lo, double hi) {
  return unary_with_grad_kernel("kten::clamp", "kten::clamp_grad", x, Clamp{lo, hi}, ClampGrad{lo, hi},
                                [=] { return ops::OpAttrs::of_reals({lo, hi}); });
}
Tensor leaky_relu(const Tensor& x, double slope) {
  return unary_with_grad_kernel("kten::leaky_relu", "kten::leaky_relu_grad", x, LeakyRelu{slope}, LeakyReluGrad{slope},
                                [=] { return ops::OpAttrs::of_reals({slope}); });
}

}  // namespace kten

namespace kten::ops {

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> activation_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, nonzero = Domain::nonzero;
  return {
      {"relu", "relu(Tensor)", 1, {nonzero}, DTypes::floating, true, [](X x, A) { return relu(x[0]); }},
      {"sigmoid", "sigmoid(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return sigmoid(x[0]); }},
      {"tanh", "tanh(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return tanh(x[0]); }},
      {"gelu", "gelu(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return gelu(x[0]); }},
      {"silu", "silu(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return silu(x[0]); }},
      // reals: beta, threshold (PyTorch's 1 and 20 when not given)
      {"softplus", "softplus(Tensor,double,double)", 1, {real}, DTypes::floating, true,
       [](X x, A a) { return softplus(x[0], a.reals.size() > 0 ? a.reals[0] : 1.0, a.reals.size() > 1 ? a.reals[1] : 20.0); }},
      {"clamp", "clamp(Tensor,double,double)", 1, {Domain::distinct}, DTypes::floating, true,
       [](X x, A a) { return clamp(x[0], a.reals.at(0), a.reals.at(1)); }},
      // reals: slope (0.01 when not given)
      {"leaky_relu", "leaky_relu(Tensor,double)", 1, {nonzero}, DTypes::floating, true,
       [](X x, A a) { return leaky_relu(x[0], a.reals.empty() ? 0.01 : a.reals[0]); }},
  };
}

}  // namespace kten::ops
