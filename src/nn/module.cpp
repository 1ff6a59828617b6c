// Module: device placement of parameters, gradients, and the input-device rule.
#include <optional>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

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
  return forward(input);
}

void Module::to(const Device& device) {
  require_available(device);
  for (auto& [name, p] : named_parameters()) {
    if (!p->value.defined()) continue;
    p->value = p->value.to(device);
    p->grad = p->grad.to(device);
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
