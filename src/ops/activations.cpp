// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Activations: relu, sigmoid, tanh, gelu, silu, softplus, clamp and leaky_relu, each with its gradient beside
// it (one kernel each way). Bandwidth-bound like every elementwise kernel (elementwise.cpp). ONNX's
// other activations (Elu, Selu, PRelu, HardSigmoid, HardSwish, Mish) load as compositions of these.
#include <cmath>
#include <limits>

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

// Clip: min and max are optional inputs (absent: unbounded). Bounds known at load are clamp's
// scalars; computed ones are maximum/minimum, broadcast. NaN in x stays NaN.
std::vector<Tensor> clip_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  for (std::size_t i : {1, 2})
    if (c.has(i) && c.at(i).numel() != 1)
      fail<ShapeError>("onnx", c.where(), ": its ", i == 1 ? "min" : "max", " has shape ", c.at(i).shape(),
                       "; ONNX's bounds are scalars");
  if ((!c.has(1) || c.on_host(1)) && (!c.has(2) || c.on_host(2))) {
    const double inf = std::numeric_limits<double>::infinity();
    const OpAttrs bounds = OpAttrs::of_reals({c.has(1) ? c.real(1) : -inf, c.has(2) ? c.real(2) : inf});
    return {onnx_numeric({x}, [&](const std::vector<Tensor>& v) { return registered("clamp", v, bounds); })};
  }
  std::vector<Tensor> in{x};
  for (std::size_t i : {1, 2}) in.push_back(c.has(i) ? c.at(i).reshape({}) : Tensor());
  return {onnx_numeric(in, [](const std::vector<Tensor>& v) {
    Tensor y = v[1].defined() ? registered("maximum", {v[0], v[1]}) : v[0];
    return v[2].defined() ? registered("minimum", {y, v[2]}) : y;
  })};
}

// clamp as Clip, its bounds scalar inputs of x's dtype (an infinite one left out).
std::string clamp_row(OnnxEmit& e) {
  const double lo = e.r(0), hi = e.r(1);
  return e.node("Clip", {e.in[0], std::isinf(lo) && lo < 0 ? "" : e.scalar(lo), std::isinf(hi) && hi > 0 ? "" : e.scalar(hi)});
}

// The activations ONNX has and kten writes as compositions of its ops (so that their gradients,
// and the second derivatives the model-families issue needs, are those ops').

// x where x > 0, else alpha (e^x - 1): expm1 reads min(x, 0), so that a large x gives no infinity
// whose zero gradient would be NaN.
Tensor elu_of(const Tensor& x, double alpha) {
  const Tensor negative = registered("clamp", {x}, OpAttrs::of_reals({-std::numeric_limits<double>::infinity(), 0.0}));
  return where(gt(x, 0.0), x, registered("expm1", {negative}) * alpha);
}

std::vector<Tensor> elu_op(OnnxCall& c) { return {elu_of(c.at(0), c.attr_real("alpha", 1.0))}; }

std::vector<Tensor> selu_op(OnnxCall& c) {
  // ONNX's defaults, which are PyTorch's SELU constants rounded to float
  const double alpha = c.attr_real("alpha", 1.67326319217681884765625), gamma = c.attr_real("gamma", 1.05070102214813232421875);
  return {elu_of(c.at(0), alpha) * gamma};
}

// max(0, min(1, alpha x + beta))
Tensor hard_sigmoid_of(const Tensor& x, double alpha, double beta) {
  return registered("clamp", {x * alpha + beta}, OpAttrs::of_reals({0.0, 1.0}));
}

std::vector<Tensor> hard_sigmoid_op(OnnxCall& c) {
  return {hard_sigmoid_of(c.at(0), c.attr_real("alpha", 0.2), c.attr_real("beta", 0.5))};
}

std::vector<Tensor> hard_swish_op(OnnxCall& c) { return {c.at(0) * hard_sigmoid_of(c.at(0), 1.0 / 6, 0.5)}; }

// x tanh(softplus(x)), softplus with ONNX's beta 1 (PyTorch's threshold 20 leaves tanh at 1)
std::vector<Tensor> mish_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  return {x * registered("tanh", {registered("softplus", {x}, OpAttrs::of_reals({1.0, 20.0}))})};
}

// x where x > 0, else slope x; the slope broadcasts to x (one per channel, as PyTorch's PReLU)
std::vector<Tensor> prelu_op(OnnxCall& c) {
  const Tensor& x = c.at(0);
  const Tensor& slope = c.at(1);
  if (kten::detail::broadcast_shapes("onnx", x.shape(), slope.shape()).shape != x.shape())
    fail<ShapeError>("onnx", c.where(), ": the slope's shape ", slope.shape(), " does not broadcast to x's ", x.shape());
  return {where(gt(x, 0.0), x, x * slope)};
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
  set_onnx(rows, "softplus",
           {{"Softplus", 13, kOnnxLastOpset, 1, 1, 1, true, softplus_op, nullptr, 0},
            {"Mish", 18, kOnnxLastOpset, 1, 1, 1, true, mish_op, nullptr, 0}},
           {{"kten::softplus",
             [](OnnxEmit& e) {  // ONNX's Softplus has beta 1 (and PyTorch's threshold 20 at load)
               if (e.r(0) == 1) return e.node("Softplus", {e.in[0]});
               const std::string beta = e.scalar(e.r(0));
               return e.node("Div", {e.node("Softplus", {e.node("Mul", {e.in[0], beta})}), beta});
             }}});
  set_onnx(rows, "clamp",
           {{"Clip", 13, kOnnxLastOpset, 1, 3, 1, true, clip_op, nullptr, 0},
            {"HardSigmoid", 13, kOnnxLastOpset, 1, 1, 1, true, hard_sigmoid_op, nullptr, 0},
            {"HardSwish", 14, kOnnxLastOpset, 1, 1, 1, true, hard_swish_op, nullptr, 0},
            {"Elu", 6, kOnnxLastOpset, 1, 1, 1, true, elu_op, nullptr, 0},
            {"Selu", 13, kOnnxLastOpset, 1, 1, 1, true, selu_op, nullptr, 0}},
           {{"kten::clamp", clamp_row}});
  set_onnx(rows, "leaky_relu",
           {{"LeakyRelu", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_leaky_relu, nullptr, 0},
            {"PRelu", 13, kOnnxLastOpset, 2, 2, 1, true, prelu_op, nullptr, 0}},
           {{"kten::leaky_relu",
             [](OnnxEmit& e) { return e.node("LeakyRelu", {e.in[0]}, {attr_f("alpha", e.r(0))}); }}});
  return rows;
}

}  // namespace kten::ops
