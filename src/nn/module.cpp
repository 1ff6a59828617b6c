// Module: device placement of parameters, gradients, and the input-device rule; state dicts.
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

#include "autograd/autograd.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "ops/elementwise.hpp"

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

bool Parameter::fits(const Shape& shape) const {
  const Shape& want = value.defined() ? value.shape() : expected;
  if (want.size() != shape.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (want[i] == -1 ? shape[i] < 1 : want[i] != shape[i]) return false;
  return true;
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

namespace {
// "'0.weight', '0.bias'" for messages.
std::string quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}
}  // namespace

StateDict Module::state_dict() {
  StateDict out;
  for (auto& [name, p] : named_parameters()) {
    if (!p->value.defined())
      detail::fail("state_dict()", "parameter '", name,
                   "' has no shape yet (a lazy layer that has not seen an input); run a forward pass first");
    out.emplace_back(name, p->value.detach());
  }
  return out;
}

void Module::load_state_dict(const StateDict& state_dict, bool strict) {
  const std::string op = name() + " load_state_dict";
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [key, t] : state_dict)
    if (!given.emplace(key, &t).second) detail::fail<FormatError>(op, "the state dict names '", key, "' twice");

  // Everything is checked, then every tensor staged on this device, before a parameter changes.
  auto params = named_parameters();
  std::vector<const Tensor*> sources(params.size(), nullptr);
  std::vector<std::string> missing, unexpected, left_lazy;
  std::unordered_set<std::string> own;
  bool shapes_lazy = false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [key, p] = params[i];
    own.insert(key);
    const auto found = given.find(key);
    if (found != given.end()) sources[i] = found->second;
    else missing.push_back(key);
    if (p->value.defined()) continue;
    if (sources[i]) shapes_lazy = true;
    else left_lazy.push_back(key);
  }
  for (const auto& entry : state_dict)
    if (!own.count(entry.first)) unexpected.push_back(entry.first);
  // Every fault at once, as PyTorch's "Error(s) in loading state_dict": names (strict), then each
  // entry that cannot load (in either mode).
  std::vector<std::string> faults;
  const bool names_differ = strict && (!missing.empty() || !unexpected.empty());
  if (strict && !missing.empty()) faults.push_back("missing " + quoted(missing));
  if (strict && !unexpected.empty()) faults.push_back("unexpected " + quoted(unexpected));
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!sources[i]) continue;
    const Tensor& t = *sources[i];
    const Parameter& p = *params[i].slot;
    if (!t.defined())
      faults.push_back("'" + params[i].name + "' is an undefined tensor in the state dict");
    else if (!p.fits(t.shape()))
      faults.push_back("'" + params[i].name + "' has shape " + shape_str(t.shape()) + " in the state dict but " +
                       shape_str(p.value.defined() ? p.value.shape() : p.expected) + " in the model");
  }
  if (!faults.empty()) {
    std::string all;
    for (const auto& f : faults) all += (all.empty() ? "" : "; ") + f;
    detail::fail<FormatError>(op, "the state dict does not fit the model (", faults.size(),
                              faults.size() == 1 ? " fault): " : " faults): ", all,
                              names_differ ? " (load_state_dict(dict, /*strict=*/false) loads the names both have)" : "");
  }
  // A lazy layer takes every parameter from the dict or none: one shaped in part would make up the
  // rest at its first call.
  if (shapes_lazy && !left_lazy.empty())
    detail::fail<FormatError>(op, "the state dict shapes lazily shaped parameters but not ", quoted(left_lazy),
                              ", which have no shape yet; give those too, or run a forward pass first");
  std::vector<Tensor> staged(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!sources[i]) continue;
    // One counted transfer when the dict is on another device; the conversion runs here.
    staged[i] = sources[i]->detach().to(device_).astype(params[i].slot->dtype);
    if (!params[i].slot->value.defined() && staged[i].shares_storage_with(*sources[i]))
      staged[i] = staged[i].copyto(device_);  // a new parameter's storage is its own, never the dict's
  }

  for (std::size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *params[i].slot;
    if (!staged[i].defined()) continue;
    if (p.value.defined()) {
      p.value.copy_from(staged[i]);  // in place, as PyTorch: tensors taken from state_dict() see it
      continue;
    }
    p.value = staged[i];
    p.track();
  }
  if (shapes_lazy) parameters_loaded();
}

}  // namespace kten::nn
