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

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

constexpr char k_relu[] = "relu", k_sigmoid[] = "sigmoid", k_tanh[] = "tanh";

std::vector<Tensor> softplus_op(OnnxCall& c) {
  // PyTorch's softplus (beta 1, threshold 20): ONNX's log(1 + e^x) to within e^-20 relative.
  return {registered("softplus", {c.at(0)}, ops::OpAttrs::of_reals({1.0, 20.0}))};
}

std::vector<Tensor> onnx_leaky_relu(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const double alpha = c.attr_real("alpha", 0.01);
  return {where(gt(x, 0.0), x, x * alpha)};  // the gradient at 0 is alpha, as PyTorch's
}

// ONNX Gelu (opset 20): exact, or the tanh approximation PyTorch's gelu(approximate='tanh') is.
void check_gelu(const OnnxNode& n) {
  const std::string approximate = node_text(n, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    onnx_invalid(n, "approximate '" + approximate + "' (none, tanh)");
}

std::vector<Tensor> gelu_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  if (node_text(c.node, "approximate", "none") == "none") return {registered("gelu", {x})};
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return {x * 0.5 * (1.0 + tanh((x + x * x * x * 0.044715) * k))};
}

// clamp(x, lo, hi) = lo + relu(x - lo) - relu(x - hi): the importer has no Clip, Max or Min.
std::string clamp_row(OnnxEmit& e) {
  const double lo = e.r(0), hi = e.r(1);
  std::string y = e.in[0];
  if (std::isfinite(hi)) y = e.node("Sub", {y, e.node("Relu", {e.node("Sub", {e.in[0], e.scalar(hi)})})});
  if (std::isfinite(lo)) y = e.node("Add", {y, e.node("Relu", {e.node("Sub", {e.scalar(lo), e.in[0]})})});
  return std::isfinite(lo) || std::isfinite(hi) ? y : e.node("Identity", {y});
}

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> activation_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, nonzero = Domain::nonzero;
  std::vector<OpDef> rows = {
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
  set_onnx(rows, "relu", {{"Relu", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_relu>, nullptr, 0}},
           {onnx_node_of("kten::relu", "Relu")});
  set_onnx(rows, "sigmoid",
           {{"Sigmoid", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_sigmoid>, nullptr, 0}},
           {onnx_node_of("kten::sigmoid", "Sigmoid")});
  set_onnx(rows, "tanh", {{"Tanh", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_tanh>, nullptr, 0}},
           {onnx_node_of("kten::tanh", "Tanh")});
  set_onnx(
      rows, "gelu", {{"Gelu", 20, kOnnxLastOpset, 1, 1, 1, true, gelu_op, check_gelu, 0}},
      {{"kten::gelu",
        [](OnnxEmit& e) {  // before opset 20 no Gelu: x/2 (1 + erf(x / sqrt 2)), as PyTorch exports it
          if (e.opset >= 20) return e.node("Gelu", {e.in[0]});
          const std::string erf = e.node("Erf", {e.node("Div", {e.in[0], e.scalar(std::sqrt(2.0))})});
          return e.node("Mul", {e.node("Mul", {e.in[0], e.node("Add", {erf, e.scalar(1)})}), e.scalar(0.5)});
        }}});
  set_onnx(rows, "silu", {}, {{"kten::silu", [](OnnxEmit& e) {
                                 return e.node("Mul", {e.in[0], e.node("Sigmoid", {e.in[0]})});
                               }}});
  set_onnx(rows, "softplus", {{"Softplus", 13, kOnnxLastOpset, 1, 1, 1, true, softplus_op, nullptr, 0}},
           {{"kten::softplus",
             [](OnnxEmit& e) {  // ONNX's Softplus has beta 1 (and PyTorch's threshold 20 at load)
               if (e.r(0) == 1) return e.node("Softplus", {e.in[0]});
               const std::string beta = e.scalar(e.r(0));
               return e.node("Div", {e.node("Softplus", {e.node("Mul", {e.in[0], beta})}), beta});
             }}});
  set_onnx(rows, "clamp", {}, {{"kten::clamp", clamp_row}});
  set_onnx(rows, "leaky_relu",
           {{"LeakyRelu", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_leaky_relu, nullptr, 0}},
           {{"kten::leaky_relu",
             [](OnnxEmit& e) { return e.node("LeakyRelu", {e.in[0]}, {attr_f("alpha", e.r(0))}); }}});
  return rows;
}

}  // namespace kten::ops
