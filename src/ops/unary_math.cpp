// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Unary math: exp, log, sqrt, abs, neg, sin, cos, atan, log1p, expm1, erf and pow(x, s), each with its
// gradient beside it. Bandwidth-bound like every elementwise kernel (elementwise.cpp): one read
// and one write per element, the transcendental functions of vector_math.hpp vectorised on CPUs.
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"
#include "unary.hpp"

namespace kten {

using namespace detail;

Tensor exp(const Tensor& x) {
  return differentiable_unary<Exp>("kten::exp", x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g * y; });
}
Tensor log(const Tensor& x) {
  return differentiable_unary<Log>("kten::log", x, [](const Tensor& x, const Tensor&, const Tensor& g) { return g / x; });
}
Tensor sqrt(const Tensor& x) {
  return differentiable_unary<Sqrt>("kten::sqrt", x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g / (y * 2.0); });
}
Tensor abs(const Tensor& x) { return unary_with_grad_kernel("kten::abs", "kten::abs_grad", x, Abs{}, AbsGrad{}); }
Tensor neg(const Tensor& x) {
  return differentiable_unary<Neg>("kten::neg", x, [](const Tensor&, const Tensor&, const Tensor& g) { return -g; });
}
Tensor sin(const Tensor& x) { return unary_with_grad_kernel("kten::sin", "kten::sin_grad", x, Sin{}, SinGrad{}); }
Tensor cos(const Tensor& x) { return unary_with_grad_kernel("kten::cos", "kten::cos_grad", x, Cos{}, CosGrad{}); }
namespace {
struct Atan { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x) const { return math::atan(x); } };
/// \brief atan's gradient g / (1 + x^2): 0 at +-inf (and past 1.8e19 in float32, where x^2 overflows: the limit).
struct AtanGrad { template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T g) const { return g / (T(1) + x * x); } };
}  // namespace
Tensor atan(const Tensor& x) { return unary_with_grad_kernel("kten::atan", "kten::atan_grad", x, Atan{}, AtanGrad{}); }
Tensor log1p(const Tensor& x) { return unary_with_grad_kernel("kten::log1p", "kten::log1p_grad", x, Log1p{}, Log1pGrad{}); }
Tensor expm1(const Tensor& x) {
  return unary_with_grad_kernel<GradOf::output>("kten::expm1", "kten::expm1_grad", x, Expm1{}, Expm1Grad{});
}
Tensor erf(const Tensor& x) { return unary_with_grad_kernel("kten::erf", "kten::erf_grad", x, Erf{}, ErfGrad{}); }
Tensor pow(const Tensor& x, double exponent) {
  const PowScalarGrad grad{PowScalar::of(exponent - 1), exponent};
  return differentiable_unary("kten::pow_scalar", x, [grad](const Tensor& x, const Tensor&, const Tensor& g) {
    if (grad.e == 0) return zeros(x.shape(), x.device(), x.dtype());  // PyTorch's, even where g is NaN or inf
    return elementwise_binary("kten::pow_scalar_grad", x, g, grad);
  }, PowScalar::of(exponent), [exponent] { return ops::OpAttrs::of_reals({exponent}); });
}

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

constexpr char k_exp[] = "exp", k_log[] = "log", k_sqrt[] = "sqrt", k_abs[] = "abs", k_neg[] = "neg",
               k_sin[] = "sin", k_cos[] = "cos", k_atan[] = "atan", k_erf[] = "erf";

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> unary_math_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, positive = Domain::positive, nonzero = Domain::nonzero;
  std::vector<OpDef> rows = {
      {"exp", "exp(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return exp(x[0]); }},
      {"log", "log(Tensor)", 1, {positive}, DTypes::floating, true, [](X x, A) { return log(x[0]); }},
      {"sqrt", "sqrt(Tensor)", 1, {positive}, DTypes::floating, true, [](X x, A) { return sqrt(x[0]); }},
      {"abs", "abs(Tensor)", 1, {nonzero}, DTypes::floating, true, [](X x, A) { return abs(x[0]); }},
      {"neg", "neg(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return neg(x[0]); }},
      {"sin", "sin(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return sin(x[0]); }},
      {"cos", "cos(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return cos(x[0]); }},
      {"atan", "atan(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return atan(x[0]); }},
      {"log1p", "log1p(Tensor)", 1, {positive}, DTypes::floating, true, [](X x, A) { return log1p(x[0]); }},
      {"expm1", "expm1(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return expm1(x[0]); }},
      {"erf", "erf(Tensor)", 1, {real}, DTypes::floating, true, [](X x, A) { return erf(x[0]); }},
      {"pow_scalar", "pow(Tensor,double)", 1, {positive}, DTypes::floating, true, [](X x, A a) { return pow(x[0], a.reals.at(0)); }},
  };
  set_onnx(rows, "exp", {{"Exp", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_exp>, nullptr, 0}},
           {onnx_node_of("kten::exp", "Exp")});
  set_onnx(rows, "log", {{"Log", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_log>, nullptr, 0}},
           {onnx_node_of("kten::log", "Log")});
  set_onnx(rows, "sqrt", {{"Sqrt", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_sqrt>, nullptr, 0}},
           {onnx_node_of("kten::sqrt", "Sqrt")});
  set_onnx(rows, "abs", {{"Abs", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_abs>, nullptr, 0}},
           {onnx_node_of("kten::abs", "Abs")});
  set_onnx(rows, "neg", {{"Neg", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_neg>, nullptr, 0}},
           {onnx_node_of("kten::neg", "Neg")});
  set_onnx(rows, "sin", {{"Sin", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_sin>, nullptr, 0}},
           {onnx_node_of("kten::sin", "Sin")});
  set_onnx(rows, "cos", {{"Cos", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_cos>, nullptr, 0}},
           {onnx_node_of("kten::cos", "Cos")});
  set_onnx(rows, "atan", {{"Atan", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_atan>, nullptr, 0}},
           {onnx_node_of("kten::atan", "Atan")});
  set_onnx(rows, "erf", {{"Erf", 13, kOnnxLastOpset, 1, 1, 1, true, onnx_unary<k_erf>, nullptr, 0}},
           {onnx_node_of("kten::erf", "Erf")});
  set_onnx(rows, "log1p", {}, {{"kten::log1p", [](OnnxEmit& e) {
                                  return e.node("Log", {e.node("Add", {e.in[0], e.scalar(1)})});
                                }}});
  set_onnx(rows, "expm1", {}, {{"kten::expm1", [](OnnxEmit& e) {
                                  return e.node("Sub", {e.node("Exp", {e.in[0]}), e.scalar(1)});
                                }}});
  set_onnx(rows, "pow_scalar", {}, {onnx_with_scalar("kten::pow_scalar", "Pow")});
  return rows;
}

}  // namespace kten::ops
