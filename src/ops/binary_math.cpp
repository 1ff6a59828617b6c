// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Binary math with broadcasting: pow(a, b), maximum and minimum, each with its gradient beside it.
// Bandwidth-bound like every elementwise kernel (elementwise.cpp). ONNX's Max and Min (any number
// of inputs) load as maximum and minimum.
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "dispatch/dispatch.hpp"
#include "elementwise.hpp"
#include "registry.hpp"

namespace kten {

using namespace detail;

Tensor pow(const Tensor& a, const Tensor& b) {
  constexpr const char* label = "kten::pow";
  Tensor out = elementwise_binary(label, a, b, Pow{});
  if (recording(a, b))
    record(label, out, {&a, &b}, [a = saved(a), b = saved(b)](const Tensor& g, const Needs& needs) {
      Tensor ga, gb;
      if (needs[0]) {  // where(b == 0, 0, g b a^(b-1)): the mask wins over a NaN or infinite g
        const Tensor t = elementwise_binary("kten::pow_base_factor", a, b, PowBaseFactor{}) * g;
        ga = sum_to(elementwise_binary("kten::pow_base_mask", t, b, ZeroWhereExponentZero{}), a.shape());
      }
      if (needs[1]) gb = sum_to(g * elementwise_binary("kten::pow_exponent_factor", a, b, PowExponentFactor{}), b.shape());
      return Grads{ga, gb};
    });
  return out;
}

namespace {
// maximum or minimum: g goes to the input that is the result, half to each at a tie (PyTorch 1.13).
template <class Op>
Tensor extremum(const char* label, const Tensor& a, const Tensor& b, bool larger) {
  Tensor out = elementwise_binary(label, a, b, Op{});
  if (recording(a, b))
    record(label, out, {&a, &b}, [a = saved(a), b = saved(b), larger](const Tensor& g, const Needs& needs) {
      const auto share = [&](const Tensor& self, const Tensor& other) {
        const Tensor w = elementwise_binary("kten::extremum_share", self, other, ExtremumShare{larger});
        return sum_to(elementwise_binary("kten::extremum_grad", w, g, ShareOf{}), self.shape());
      };
      return Grads{needs[0] ? share(a, b) : Tensor(), needs[1] ? share(b, a) : Tensor()};
    });
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum<Maximum>("kten::maximum", a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum<Minimum>("kten::minimum", a, b, false); }

}  // namespace kten

namespace kten::ops {

// --- ONNX forms (onnx_forms.hpp): what load() maps onto these ops, what save() writes for them ---

namespace {

using kten::detail::fail;

std::vector<Tensor> pow_op(OnnxCall& c) {
  // A constant one-value exponent (x ** 2 in PyTorch) is the scalar power: PyTorch's values for a
  // negative base and its gradient.
  if (c.host.size() > 1 && c.host[1].defined() && c.host[1].numel() == 1)
    return {registered("pow_scalar", {c.at(0)}, ops::OpAttrs::of_reals({c.real(1)}))};
  return {registered("pow", {c.at(0), c.at(1).astype(c.at(0).dtype())})};
}

// ONNX's Max and Min take one or more inputs, broadcast together (int64 ones through float64).
template <const char* Name>
std::vector<Tensor> extremum_of_inputs(OnnxCall& c) {
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < c.in.size(); ++i) in.push_back(c.at(i));
  return {onnx_numeric(in, [](const std::vector<Tensor>& v) {
    Tensor y = v[0];
    for (std::size_t i = 1; i < v.size(); ++i) y = registered(Name, {y, v[i]});
    return y;
  })};
}

constexpr char k_maximum[] = "maximum", k_minimum[] = "minimum";

}  // namespace

// The registry's rows of this family (registry.hpp).
std::vector<OpDef> binary_math_ops() {
  using X = const std::vector<Tensor>&;
  using A = const OpAttrs&;
  const Domain real = Domain::real, positive = Domain::positive;
  std::vector<OpDef> rows = {
      {"pow", "pow(Tensor,Tensor)", 2, {positive, real}, DTypes::floating, true, [](X x, A) { return pow(x[0], x[1]); }},
      {"maximum", "maximum(Tensor,Tensor)", 2, {Domain::distinct}, DTypes::floating, true, [](X x, A) { return maximum(x[0], x[1]); }},
      {"minimum", "minimum(Tensor,Tensor)", 2, {Domain::distinct}, DTypes::floating, true, [](X x, A) { return minimum(x[0], x[1]); }},
  };
  set_onnx(rows, "pow", {{"Pow", 13, kOnnxLastOpset, 2, 2, 1, true, pow_op, nullptr, 0}},
           {onnx_node_of("kten::pow", "Pow")});
  set_onnx(rows, "maximum", {{"Max", 13, kOnnxLastOpset, 1, 1 << 20, 1, true, extremum_of_inputs<k_maximum>, nullptr, 0}},
           {onnx_node_of("kten::maximum", "Max")});
  set_onnx(rows, "minimum", {{"Min", 13, kOnnxLastOpset, 1, 1 << 20, 1, true, extremum_of_inputs<k_minimum>, nullptr, 0}},
           {onnx_node_of("kten::minimum", "Min")});
  return rows;
}

}  // namespace kten::ops
