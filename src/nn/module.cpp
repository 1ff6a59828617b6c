// Module: device placement of parameters, gradients, and the input-device rule.
#include <optional>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

#include "autograd.hpp"
#include "checks.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"

namespace kten::nn {

Tensor Module::operator()(const Tensor& input) {
  if (!input.defined()) detail::check_defined(input, (name() + " forward").c_str());  // the name costs a string
  if (input.device() != device_)
    detail::fail<DeviceMismatch>(name() + " forward", "the input is on ", input.device(),
                                 " but the module's parameters are on ", device_,
                                 "; kten never copies implicitly. Move the input with x.to(", device_,
                                 ") or the module with .to(", input.device(), ")");
  // Named after the module for profilers; the name is built only when a tool listens (it costs
  // heap allocations on every call).
  std::optional<detail::Region> region;
  if (Kokkos::Profiling::profileLibraryLoaded()) region.emplace("kten::" + name() + "::forward");
  if (!detail::grad_mode_enabled) return forward(input);
  // Recorded: for backward(grad_output) to return d/d(input), an input without history becomes a
  // leaf whose gradient only Module::backward computes (loss.backward() skips it).
  Tensor in = input;
  if (!in.requires_grad() && is_floating(in.dtype())) {
    in.requires_grad_();
    detail::AutogradAccess::meta(in)->module_input = true;
  }
  Tensor out = forward(in);
  last_input_ = in;
  last_output_ = out;
  return out;
}

Tensor Module::backward(const Tensor& grad_output) {
  const std::string op = name() + " backward";
  if (!last_output_.defined()) detail::fail(op, "no recorded forward call to go back through");
  if (!last_output_.requires_grad())
    detail::fail(op, "the last forward call recorded nothing to go back through (no input or parameter requires grad)");
  if (grad_output.defined() && grad_output.shape() != last_output_.shape())
    detail::fail<ShapeError>(op, "the gradient has shape ", grad_output.shape(), ", the output had shape ",
                             last_output_.shape());
  // The graph is kept until the next forward call, so backward(grad_output) may be called again
  // (each call accumulates into the parameters' gradients, as before autograd). An input computed
  // by earlier operations: stop there (this module's backward only) and return its gradient.
  if (!last_input_.is_leaf()) return detail::run_backward(last_output_, grad_output, true, true, &last_input_);
  const bool own_leaf = last_input_.requires_grad() && detail::AutogradAccess::meta(last_input_)->module_input;
  if (own_leaf) last_input_.set_grad(Tensor());  // this call's gradient, not a sum over calls
  detail::run_backward(last_output_, grad_output, true, true);
  return last_input_.grad();  // undefined for an int64 input
}

void Parameter::track() {
  if (!value.defined()) return;
  value = value.detach();
  if (!grad.defined() || grad.shape() != value.shape() || grad.device() != value.device() ||
      grad.dtype() != value.dtype())
    grad = zeros(value.shape(), value.device(), value.dtype());
  if (!is_floating(value.dtype())) return;  // an int64 or boolean state (a step count, a mask) has no gradient
  value.requires_grad_();
  value.set_grad(grad);
}

void Module::to(const Device& device) {
  require_available(device);
  for (auto& [name, p] : named_parameters()) {
    if (!p->value.defined()) continue;
    p->value = p->value.detach().to(device);  // a move, not an operation to differentiate
    p->grad = p->grad.to(device);
    p->track();
  }
  device_ = device;
}

std::vector<NamedParameter> Module::named_parameters() { return {}; }

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters())
    if (p->value.defined()) out.push_back(p->value);
  return out;
}

void Module::zero_grad() {
  for (auto& [name, p] : named_parameters())
    if (p->grad.defined()) detail::fill(p->grad, 0.0);
}

}  // namespace kten::nn
